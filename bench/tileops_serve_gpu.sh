#!/bin/bash
# TileOPs served by tl_aot on a GPU machine: `jit` runs a slice of its tests under capture with TileLang's JIT,
# `serve [LIB]` builds the record (16 cores; or takes LIB, a library built from it elsewhere, e.g. on a CPU machine)
# and runs the same tests strictly served. Needs a TileOPs checkout in .tileops/
# (git archive HEAD src tests workloads of tile-ai/TileOPs; not committed) and einops, pyyaml, TileLang on PYTHONPATH.
set -u
ROOT=$PWD
export PYTHONPATH=$ROOT/.tileops:$ROOT/.tileops/src:/tmp/site:$ROOT PYTHONUNBUFFERED=1
W=/tmp/work; mkdir -p $W
cd $ROOT/.tileops
TESTS="tests/ops/test_activation.py tests/ops/test_layer_norm.py tests/ops/test_rms_norm.py tests/ops/test_softmax.py"
if [ "$1" = jit ]; then
  export TILELANG_CACHE_DIR=$W/jit-cache
  /usr/bin/time -f "jit run wall %e s" python3 -m tl_aot capture -o $W/tileops.capture.json -- python3 -m pytest $TESTS -m smoke -q -p no:cacheprovider -o addopts="" 2>&1 | tail -12
else
  LIB=${2:-$W/lib}
  [ -n "${2:-}" ] || /usr/bin/time -f "build wall %e s" python3 -m tl_aot build --capture $W/tileops.capture.json --arch 90a -o $LIB --name tileops_served -j 16 -q 2>&1 | tail -25
  mkdir -p $W/served-cache; export TILELANG_CACHE_DIR=$W/served-cache
  /usr/bin/time -f "served run wall %e s" python3 -m tl_aot run --serve $LIB --strict -- python3 -m pytest $TESTS -m smoke -q -p no:cacheprovider -o addopts="" 2>&1 | tail -12
  echo "files in served TileLang cache: $(find $W/served-cache -type f | wc -l)"
  [ -n "${2:-}" ] || cp $W/tileops.capture.json $OUT/ 2>/dev/null
fi
