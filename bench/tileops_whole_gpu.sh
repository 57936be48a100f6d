#!/bin/bash
# Issue 39's demonstration: TileOPs' smoke suite (whole, or the share in bench/tileops_share.txt) captured under
# pytest-xdist, built from the one record for several archs with image packs, made into a wheel split by arch,
# installed in a fresh venv with no CUDA compiler and served strictly (no TileLang compile), against TileLang's
# JIT with a warm cache. Needs .tileops/ (a `git archive HEAD src tests workloads pyproject.toml` of
# tile-ai/TileOPs; never committed) and, in /tmp/site, TileLang, z3, einops, pyyaml, pytest-xdist, execnet
# (../shared/device/fetch-wheels.sh, plus `pip download pytest-xdist execnet` into .whl-x), apache-tvm-ffi in .whl/.
# One step per call (each fits the machine's 10-minute call); the machine keeps /tmp between calls:
#   setup WHEELDIRS...   install the wheels of those folders into /tmp/site
#   capture [SECONDS] [all|share]  the suite (default: the share) under pytest-xdist (one worker a core, spread over the GPUs), stopped after SECONDS
#                        (default 540; every kernel is written when met); the files whose every test finished
#                        are listed in $W/complete.txt
#   capture-rest [SECONDS]  the collected files no capture call finished, captured into the same record (a
#                        whole-suite capture is longer than one call); complete.txt counts every call's log
#   capture-here [SECONDS]  on this GPU, `capture --serve LIB` of the complete files: what this GPU's model asks for and
#                        the library (captured on another model) lacks is compiled and recorded (record.here.json),
#                        the rest served; a workload may choose kernels by model (TileOPs runs one GQA kernel on an
#                        H200 only), so a record from an H100 misses it. `build` then builds both records
#   build ARCHS [SECONDS] the record built for ARCHS (e.g. 80,89,90a,100a) on all cores, images in packs beside the
#                        library; stopped after SECONDS (default 560): built variants stay in the cache, so the step
#                        again goes on where it stopped
#   wheel                the library as a wheel (tileops_aot), split by arch (tl_aot split-wheel): sizes
#   serve [SECONDS]      a fresh install prefix, no nvcc on PATH: the base wheel and this GPU's arch wheel installed, the
#                        complete files run strictly served (a kernel the library lacks fails its test), timed
#   jit-warm [SECONDS]   the same files with TileLang's JIT and the capture's (now warm) cache, timed: the anchor
#   recapture            one kernel's source changed, `capture --serve LIB` again: only that kernel compiled
#   report               the goals table (bench/tileops_whole_report.py) from the steps' files; it, the record and logs to $OUT
set -u
ROOT=$PWD
export PYTHONPATH=$ROOT/.tileops:$ROOT/.tileops/src:/tmp/site:$ROOT PYTHONUNBUFFERED=1
W=${W:-/tmp/tw39}
mkdir -p "$W/times"
PYTEST=(python3 -m pytest -q -p no:cacheprovider -o addopts= -m smoke)
now() { date +%s.%N; }
since() { python3 -c "import sys; print(round($(now) - $1, 1))"; }
# The steps that run TileOPs' tests need its archive here: a GPU machine's later call may not keep an ignored folder
# (seen: serve and jit-warm then ran "no tests" and exited 5), so say so rather than time an empty run.
tileops() { [ -d "$ROOT/.tileops/src" ] || { echo "no TileOPs archive at $ROOT/.tileops (git archive HEAD src tests workloads pyproject.toml of tile-ai/TileOPs)" >&2; exit 2; }; }
files() { tileops; mapfile -t FILES < "$W/complete.txt"; }
# pytest-xdist workers: one per core (WORKERS overrides), spread evenly over the machine's GPUs (each worker sees one).
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); [ "$GPUS" -ge 1 ] || GPUS=1
WORKERS=${WORKERS:-$(nproc)}
XDIST=(--dist worksteal)
if [ "$GPUS" -gt 1 ]; then
  for ((g = 0; g < GPUS; g++)); do XDIST+=(--tx "$(( (WORKERS + GPUS - 1) / GPUS ))*popen//env:CUDA_VISIBLE_DEVICES=$g"); done
else
  XDIST+=(-n "$WORKERS")
fi
# What a step leaves is copied to $OUT as it ends (the machine may go back before a later step).
save() { [ -n "${OUT:-}" ] || return 0; mkdir -p "$OUT"; cp "$@" "$OUT/" 2>/dev/null; true; }

case "${1:-}" in
  setup)
    shift
    wheels=(); for d in "$@"; do wheels+=("$ROOT/$d"/*.whl); done
    python3 -m pip install -q --no-index --no-deps --upgrade --target /tmp/site "${wheels[@]}" 2>&1 | grep -v WARNING | tail -2 ;;
  capture|capture-rest)
    limit=${2:-540}
    tileops
    cd "$ROOT/.tileops"
    export TILELANG_CACHE_DIR=$W/jit-cache TORCHINDUCTOR_CACHE_DIR=$W/inductor-capture
    if [ "$1" = capture ]; then
      if [ "${3:-share}" = all ]; then sel=(tests); else mapfile -t sel < "$ROOT/bench/tileops_share.txt"; fi
      rm -f "$W"/capture*.log
      t0=$(now)
      "${PYTEST[@]}" --collect-only "${sel[@]}" > "$W/collected.txt" 2>&1
      echo "collected $(grep -c '::' "$W/collected.txt") smoke tests of ${#sel[@]} paths in $(since "$t0") s"
      log=$W/capture.log
    else
      mapfile -t sel < <(python3 "$ROOT/bench/tileops_complete.py" --missing "$W/collected.txt" "$W"/capture*.log)
      [ "${#sel[@]}" -gt 0 ] || { echo "every collected file is complete"; exit 0; }
      log=$W/capture.$(ls "$W"/capture*.log | wc -l).log
      echo "continuing with ${#sel[@]} files"
    fi
    t0=$(now)
    # pytest itself is stopped (SIGINT to its process group): it prints the summary of what ran. The record is
    # merged into (a second call adds to what the first recorded).
    python3 -m tl_aot capture -o "$W/record.json" --keep-going -- \
      timeout -s INT "$limit" "${PYTEST[@]}" "${XDIST[@]}" -rA "${sel[@]}" > "$log" 2>&1
    echo "$1 exit $? after $(since "$t0") s" | tee -a "$W/times/capture"
    grep -E "passed|failed" "$log" | tail -1; grep "^tl_aot capture" "$log" | tail -3
    python3 "$ROOT/bench/tileops_complete.py" "$W/collected.txt" "$W"/capture*.log > "$W/complete.txt"
    python3 -c "import json; d=json.load(open('$W/record.json')); print('kernels', len(d['kernels']), 'tunings', len(d.get('tunings', {})))"
    echo "$(wc -l < "$W/complete.txt") files complete of $(grep '::' "$W/collected.txt" | cut -d: -f1 | sort -u | wc -l) collected"
    gzip -c "$W/record.json" > "$W/record.json.gz"; save "$W/record.json.gz" "$W/complete.txt" "$log" ;;
  capture-here)
    files; cd "$ROOT/.tileops"
    export TILELANG_CACHE_DIR=$W/jit-cache TORCHINDUCTOR_CACHE_DIR=$W/inductor-here
    limit=(); [ -n "${2:-}" ] && limit=(timeout -s INT "$2")
    t0=$(now)
    python3 -m tl_aot capture --serve "$W/lib/libtileops_whole.so" -o "$W/record.here.json" --keep-going -- \
      "${limit[@]}" "${PYTEST[@]}" "${XDIST[@]}" "${FILES[@]}" > "$W/here.log" 2>&1
    echo "capture-here exit $? after $(since "$t0") s on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" | tee "$W/times/here"
    grep -E "passed|failed" "$W/here.log" | tail -1; grep "^tl_aot capture" "$W/here.log" | tail -3; save "$W/here.log" ;;
  build)
    archs=${2:?archs}; limit=${3:-560}; arch_flags=(); for a in ${archs//,/ }; do arch_flags+=(--arch "$a"); done
    records=(--capture "$W/record.json"); [ -f "$W/record.here.json" ] && records+=(--capture "$W/record.here.json")
    export TL_AOT_CACHE_DIR=$W/cache
    t0=$(now)
    /usr/bin/time -f "build cpu %U+%S s, max rss %M KB" timeout -k 20 -s INT "$limit" python3 -m tl_aot build \
      "${records[@]}" --keep-going "${arch_flags[@]}" -o "$W/lib" --name tileops_whole -j "$(nproc)" \
      --image-packs --pack-hint "pip install 'tileops-aot-{tag}==0.1'" > "$W/build.log" 2>&1
    echo "build exit $? after $(since "$t0") s ($archs, -j $(nproc))" | tee -a "$W/times/build"
    grep -E "variant|image packs|job time|built |cpu|left out" "$W/build.log" | tail -8
    du -b "$W"/lib/*.so "$W"/lib/*.tlpack 2>/dev/null; save "$W/build.log" ;;
  wheel)
    pkg=$W/pkg; rm -rf "$pkg" "$W/dist"; mkdir -p "$pkg/tileops_aot" "$W/dist"
    cp "$W"/lib/libtileops_whole.so "$W"/lib/*.tlpack "$pkg/tileops_aot/"
    printf '"""TileOPs kernels built ahead of time by tl_aot (a demonstration package)."""\n' > "$pkg/tileops_aot/__init__.py"
    cat > "$pkg/pyproject.toml" <<'TOML'
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"
[project]
name = "tileops-aot"
version = "0.1"
dependencies = ["apache-tvm-ffi"]
[tool.setuptools]
packages = ["tileops_aot"]
[tool.setuptools.package-data]
tileops_aot = ["*.so", "*.tlpack"]
TOML
    (cd "$pkg" && python3 -m pip wheel -q --no-deps --no-build-isolation -w "$W/dist" .) 2>&1 | grep -v WARNING | tail -2
    python3 -m tl_aot split-wheel "$W"/dist/*.whl 2>&1 | tee "$W/wheels.txt"
    # setuptools tags a package holding a built library py3-none-any: the true manylinux tag (the build host's glibc)
    python3 -m tl_aot check-wheel --retag "$W"/dist/tileops_aot-*.whl 2>&1 | tee -a "$W/wheels.txt"; ls -l "$W"/dist; save "$W/wheels.txt" ;;
  serve|jit-warm)
    files
    if [ "$1" = serve ]; then
      # A fresh install prefix (the machine's python is itself a venv holding torch): tvm-ffi, tl_aot, the base
      # wheel and this GPU's arch wheel; neither the repository nor the build's output on the path.
      site=$W/served-site; rm -rf "$site" "$W/served-cache"
      base=$(ls "$W"/dist/tileops_aot-*.whl); arch=$(ls "$W"/dist/tileops_aot_sm90a-*.whl)
      python3 -m pip install -q --no-index --no-deps --target "$site" "$ROOT"/.whl/*.whl "$base" "$arch" 2>&1 | grep -v WARNING | tail -1
      python3 -m pip install -q --no-deps --no-build-isolation --target "$site" "$ROOT" 2>&1 | grep -v WARNING | tail -1
      export PYTHONPATH=$site:$ROOT/.tileops:$ROOT/.tileops/src:/tmp/site
      libdir=$(cd /tmp && python3 -c "import os, tileops_aot, tl_aot; assert tl_aot.__file__.startswith('$site'); print(os.path.dirname(tileops_aot.__file__))") || exit 1
      echo "installed: $(ls "$libdir" | tr '\n' ' ')"
      # No CUDA compiler: every folder holding an nvcc off PATH, so a compile that slipped through would fail.
      PATH="$(printf '%s' "$PATH" | tr ':' '\n' | while read -r d; do [ -n "$d" ] && [ ! -e "$d/nvcc" ] && printf '%s:' "$d"; done)"
      unset CUDA_HOME CUDA_PATH; export TILELANG_CACHE_DIR=$W/served-cache PATH
      command -v nvcc && echo "an nvcc is still on PATH" && exit 1
      # Each served process's exit line carries its lookups' CPU time too (the report's lookup figure).
      export TL_AOT_SERVE_CPU_TIME=1
      cmd=(python3 -m tl_aot run --serve "$libdir" --strict --)
    else
      export TILELANG_CACHE_DIR=$W/jit-cache; cmd=()
    fi
    # Each run compiles its torch.compile graphs afresh: TileOPs names an op instance in a compiled graph by a
    # per-process counter, so an inductor cache shared between runs hands one run's graph (and its baked output
    # shape) to another process's instance of the same number (seen: test_pool_compile_two_instances_one_frame).
    # Triton's kernel cache (~/.triton/cache by default) likewise: shared, the second run reused the first's compiled
    # Triton kernels (seen on the share: the served run, first, spent 8 s more in each torch.compile test than the JIT's).
    export TORCHINDUCTOR_CACHE_DIR=$W/inductor-$1 TRITON_CACHE_DIR=$W/triton-$1; rm -rf "$TORCHINDUCTOR_CACHE_DIR" "$TRITON_CACHE_DIR"
    cd "$ROOT/.tileops"
    t0=$(now)
    # Stopped after SECONDS (default: none) like capture: pytest, interrupted, still prints what ran.
    limit=(); [ -n "${2:-}" ] && limit=(timeout -s INT "$2")
    "${cmd[@]}" "${limit[@]}" python3 -m pytest -q -p no:cacheprovider -o addopts= -m smoke "${XDIST[@]}" --junitxml="$W/$1.xml" "${FILES[@]}" > "$W/$1.log" 2>&1
    echo "$1 exit $? after $(since "$t0") s" | tee "$W/times/$1"
    grep -E "passed|failed" "$W/$1.log" | tail -1; grep "^tl_aot serve" "$W/$1.log" | head -3
    [ "$1" = serve ] && echo "files in the served run's TileLang cache: $(find "$W/served-cache" -type f 2>/dev/null | wc -l)" | tee "$W/served-facts.txt"
    if [ "$1" = serve ]; then
      # The installed library loaded, then served, each in a fresh process: wall and CPU, nothing called. tvm_ffi
      # is imported first and timed apart: it imports torch (torch-c-dlpack-ext), which a TileOPs process has anyway.
      for verb in load serve; do (cd /tmp && python3 -c "
import time, os, tileops_aot
so = os.path.join(os.path.dirname(tileops_aot.__file__), 'libtileops_whole.so')
w = time.perf_counter(); import tvm_ffi, tl_aot; imp = (time.perf_counter() - w) * 1e3
w, c = time.perf_counter(), time.process_time(); tl_aot.$verb(so); lw, lc = (time.perf_counter() - w) * 1e3, (time.process_time() - c) * 1e3
print(f'$verb: {lw:.1f} ms wall / {lc:.1f} ms CPU (importing tvm_ffi, torch and tl_aot before it: {imp:.0f} ms)')
") 2>&1 | tail -1 | tee -a "$W/served-facts.txt"; done
    fi
    gzip -kf "$W/$1.log"; gzip -kf "$W/$1.xml"; save "$W/$1.log.gz" "$W/$1.xml.gz" ;;
  recapture)
    files; cd "$ROOT/.tileops"
    # One kernel function edited so its IR changes (every shape of it is a new kernel), results the same.
    target=src/tileops/kernels/norm/rms_norm.py; cp "$target" "$W/kernel.bak"
    sed -i 's|sumsq\[i\] / float(N) + eps|sumsq[i] * (1.0 / float(N)) + eps|' "$target"
    cmp -s "$target" "$W/kernel.bak" && { echo "the edit did not apply to $target"; exit 1; }
    export TILELANG_CACHE_DIR=$W/recapture-cache
    t0=$(now)
    python3 -m tl_aot capture --serve "$W/lib/libtileops_whole.so" -o "$W/record2.json" --keep-going -- \
      "${PYTEST[@]}" "${XDIST[@]}" "${FILES[@]}" > "$W/recapture.log" 2>&1
    echo "recapture exit $? after $(since "$t0") s (changed: $target)" | tee "$W/times/recapture"
    cp "$W/kernel.bak" "$target"; grep "^tl_aot capture" "$W/recapture.log" | tail -3 ;;
  report)
    cat "$W"/times/* 2>/dev/null
    out=${OUT:-$W/out}; mkdir -p "$out"
    cp "$W/complete.txt" "$W"/*.log "$W/wheels.txt" "$out/" 2>/dev/null; gzip -c "$W/record.json" > "$out/record.json.gz"
    python3 "$ROOT/bench/tileops_whole_report.py" "$W" | tee "$out/goals.md" ;;
  *) echo "usage: $0 setup DIRS... | capture [SECONDS] [all|share] | capture-rest [SECONDS] | capture-here [SECONDS] | build ARCHS [SECONDS] | wheel | serve | jit-warm | recapture | report"; exit 2 ;;
esac
