#!/bin/bash
# Issue 39's demonstration: TileOPs' whole smoke suite captured under pytest-xdist, built from the one record,
# served strictly from the library (no TileLang compile), against TileLang's JIT with a warm cache.
# Needs .tileops/ (a `git archive HEAD src tests workloads pyproject.toml` of tile-ai/TileOPs; never committed)
# and, in /tmp/site, TileLang, apache-tvm-ffi, z3, einops, pyyaml, pytest-xdist, execnet
# (../shared/device/fetch-wheels.sh, plus `pip download pytest-xdist execnet` into .whl-x).
# One step per call (each fits the machine's 10-minute call); the machine keeps /tmp between calls:
#   setup WHEELDIRS...   install the wheels of those folders into /tmp/site
#   capture [SECONDS]    the smoke suite under `tl_aot capture`, 16 workers (pytest -n 16 --dist loadfile), stopped
#                        after SECONDS (default 540): the record keeps what was captured (flushed every 15 s);
#                        the files whose every test finished are listed in $W/complete.txt
#   build ARCHS [JOBS] [SECONDS]  the record built for ARCHS (e.g. 90a or 80,89,90a,100a) with JOBS jobs (default:
#                        all cores), stopped after SECONDS (default 560): built variants stay in the cache
#                        ($W/cache), so the same step again goes on where it stopped
#   serve                the complete files, strictly served (a kernel the library lacks fails the test), timed
#   jit-warm             the same files with TileLang's JIT and the capture's (now warm) cache, timed: the anchor
#   report               the figures, as a table; copies the record and logs to $OUT
set -u
ROOT=$PWD
export PYTHONPATH=$ROOT/.tileops:$ROOT/.tileops/src:/tmp/site:$ROOT PYTHONUNBUFFERED=1
W=${W:-/tmp/tw39}
mkdir -p "$W/times"
PYTEST=(python3 -m pytest -q -p no:cacheprovider -o addopts= -m smoke)
now() { date +%s.%N; }
since() { python3 -c "import sys; print(round($(now) - $1, 1))"; }

case "${1:-}" in
  setup)
    shift
    wheels=(); for d in "$@"; do wheels+=("$ROOT/$d"/*.whl); done
    python3 -m pip install -q --no-index --no-deps --upgrade --target /tmp/site "${wheels[@]}" 2>&1 | grep -v WARNING | tail -2
    ls /tmp/site | head -40 | tr '\n' ' ' ;;
  capture)
    limit=${2:-540}
    cd "$ROOT/.tileops"
    export TILELANG_CACHE_DIR=$W/jit-cache
    t0=$(now)
    "${PYTEST[@]}" --collect-only tests > "$W/collected.txt" 2>&1
    echo "collected $(grep -c '::' "$W/collected.txt") smoke tests in $(since "$t0") s"
    t0=$(now)
    # pytest itself is stopped (SIGINT to its process group): it prints the summary of what ran, workers flush.
    python3 -m tl_aot capture -o "$W/record.json" -- \
      timeout -s INT "$limit" "${PYTEST[@]}" -n 16 --dist loadfile -rA tests > "$W/capture.log" 2>&1
    echo "capture exit $? after $(since "$t0") s" | tee "$W/times/capture"
    tail -5 "$W/capture.log"
    python3 "$ROOT/bench/tileops_complete.py" "$W/collected.txt" "$W/capture.log" > "$W/complete.txt"
    echo "complete files: $(wc -l < "$W/complete.txt")"
    python3 -c "import json; d=json.load(open('$W/record.json')); print('kernels', len(d['kernels']), 'tunings', len(d.get('tunings', {})))" ;;
  build)
    archs=${2:?archs}; jobs=${3:-$(nproc)}; limit=${4:-560}
    export TL_AOT_CACHE_DIR=$W/cache
    t0=$(now)
    /usr/bin/time -f "build cpu %U+%S s, max rss %M KB" timeout -s INT "$limit" python3 -m tl_aot build --capture "$W/record.json" --keep-going \
      --arch "$archs" -o "$W/lib" --name tileops_whole -j "$jobs" -q > "$W/build.log" 2>&1
    echo "build exit $? after $(since "$t0") s ($archs, -j $jobs)" | tee -a "$W/times/build"
    tail -8 "$W/build.log"
    du -b "$W"/lib/*.so | tail -3 ;;
  serve|jit-warm)
    cd "$ROOT/.tileops"
    mapfile -t files < "$W/complete.txt"
    if [ "$1" = serve ]; then
      rm -rf "$W/served-cache"; export TILELANG_CACHE_DIR=$W/served-cache
      cmd=(python3 -m tl_aot run --serve "$W/lib/libtileops_whole.so" --strict --)
    else
      export TILELANG_CACHE_DIR=$W/jit-cache; cmd=()
    fi
    t0=$(now)
    "${cmd[@]}" "${PYTEST[@]}" -n 16 --dist loadfile "${files[@]}" > "$W/$1.log" 2>&1
    echo "$1 exit $? after $(since "$t0") s" | tee "$W/times/$1"
    tail -3 "$W/$1.log"
    [ "$1" = serve ] && echo "files in the served run's TileLang cache: $(find "$W/served-cache" -type f 2>/dev/null | wc -l)" ;;
  report)
    cat "$W"/times/* 2>/dev/null
    mkdir -p "$OUT"; cp "$W/complete.txt" "$W"/*.log "$OUT/" 2>/dev/null; gzip -c "$W/record.json" > "$OUT/record.json.gz"
    grep -h "passed\|failed" "$W"/serve.log "$W"/jit-warm.log 2>/dev/null | tail -4 ;;
  *) echo "usage: $0 setup DIRS... | capture [SECONDS] | build ARCHS [JOBS] | serve | jit-warm | report"; exit 2 ;;
esac
