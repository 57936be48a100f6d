#!/bin/bash
# TileOPs served by tl_aot on a GPU machine, against TileLang's JIT with an empty and a warm cache (issue 31 goal:
# served <= 0.9x warm, <= 0.1x empty). Needs a TileOPs checkout in .tileops/ (git archive HEAD src tests workloads
# of tile-ai/TileOPs; not committed) and einops, pyyaml, TileLang on PYTHONPATH. One step per call (each fits 10 min):
#   jit        the slice under capture with TileLang's JIT (its own cache) -> $W/tileops.capture.json
#   jit-empty  the slice with the JIT and an empty TileLang cache (timed; anchor)
#   jit-warm   the slice again with that cache, now warm (timed; anchor)
#   serve [LIB]  builds the record (16 cores; or takes LIB, built elsewhere) and runs the slice strictly served (timed)
#   profile    the served run under cProfile: where serving's time goes (top functions to $OUT/served.prof.txt)
#   ratios     served / warm and served / empty, from the timed steps
# The slice: activation, norms, softmax (elementwise/normalisation), GEMM and batched GEMM, attention forward and
# backward (smoke tests), and the tuned attention tests (TileLang's autotuner at run time, tune=True).
set -u
ROOT=$PWD
export PYTHONPATH=$ROOT/.tileops:$ROOT/.tileops/src:/tmp/site:$ROOT PYTHONUNBUFFERED=1
W=/tmp/work; mkdir -p $W/times
cd $ROOT/.tileops
SMOKE="tests/ops/test_activation.py tests/ops/test_layer_norm.py tests/ops/test_rms_norm.py tests/ops/test_softmax.py
  tests/ops/test_gemm.py tests/ops/test_bmm.py tests/ops/attention/test_mha.py tests/ops/attention/test_gqa.py"
TUNED="tests/ops/attention/test_mha.py"
PYTEST="python3 -m pytest -q -p no:cacheprovider -o addopts="
slice() {  # $1: a command prefix (capture / run --serve ...); both selections, one timed wall for the pair
  local t0=$(date +%s.%N)
  $1 $PYTEST $SMOKE -m smoke 2>&1 | tail -4
  $1 $PYTEST $TUNED -k tuned 2>&1 | tail -4
  python3 -c "import time; print(round(time.time() - $t0, 2))"
}
case "${1:-}" in
  jit)
    export TILELANG_CACHE_DIR=$W/capture-cache
    slice "python3 -m tl_aot capture -o $W/tileops.capture.json --" | tail -9
    cp $W/tileops.capture.json $OUT/ 2>/dev/null ;;
  jit-empty)
    rm -rf $W/jit-cache; export TILELANG_CACHE_DIR=$W/jit-cache
    slice "" | tee /dev/stderr | tail -1 > $W/times/jit_empty ;;
  jit-warm)
    export TILELANG_CACHE_DIR=$W/jit-cache
    slice "" | tee /dev/stderr | tail -1 > $W/times/jit_warm ;;
  serve)
    LIB=${2:-$W/lib}
    [ -n "${2:-}" ] || /usr/bin/time -f "build wall %e s" python3 -m tl_aot build --capture $W/tileops.capture.json --arch 90a -o $LIB --name tileops_served -j 16 -q 2>&1 | tail -25
    rm -rf $W/served-cache; mkdir -p $W/served-cache; export TILELANG_CACHE_DIR=$W/served-cache
    slice "python3 -m tl_aot run --serve $LIB --strict --" | tee /dev/stderr | tail -1 > $W/times/served
    echo "files in served TileLang cache: $(find $W/served-cache -type f | wc -l)" ;;
  profile)
    export TILELANG_CACHE_DIR=$W/served-cache
    python3 -m tl_aot run --serve $W/lib --strict -- python3 -m cProfile -o $W/served.prof -m pytest -q -p no:cacheprovider -o addopts= $SMOKE -m smoke 2>&1 | tail -3
    python3 -c "import pstats,sys; s=pstats.Stats('$W/served.prof', stream=sys.stdout); s.sort_stats('cumulative').print_stats(45); s.sort_stats('tottime').print_stats(25)" > $OUT/served.prof.txt
    grep -E "tl_aot|serving|runtime.py|capture.py" $OUT/served.prof.txt | head -30 ;;
  ratios)
    python3 - "$W/times" <<'EOF'
import sys, pathlib
t = {p.name: float(p.read_text().split()[0]) for p in pathlib.Path(sys.argv[1]).iterdir() if p.read_text().strip()}
print({k: round(v, 1) for k, v in t.items()})
if {"served", "jit_warm", "jit_empty"} <= set(t):
    w, e = t["served"] / t["jit_warm"], t["served"] / t["jit_empty"]
    print(f"served/warm {w:.3f} (goal <= 0.9: {'met' if w <= 0.9 else 'NOT met'}); served/empty {e:.3f} (goal <= 0.1: {'met' if e <= 0.1 else 'NOT met'})")
EOF
    ;;
  *) echo "usage: $0 jit | jit-empty | jit-warm | serve [LIB] | profile | ratios"; exit 2 ;;
esac
