#!/bin/bash
# TileOPs' tuned attention tests (tune=True: TileLang's autotuner at run time) captured, built and served strictly
# on the GPU machine (issue 31: served tuning on a real library's tuned kernels). Needs .tileops/ (git archive of
# tile-ai/TileOPs) and TileLang, einops, pyyaml in /tmp/site. Two calls, back to back (the machine keeps /tmp):
#   capture      the tests under `python -m tl_aot capture` (the autotuner alone runs ~3.5 min there with a warm cache)
#   build-serve  build the record (-j 16), run the tests strictly served, then with the JIT's warm cache (anchor)
set -u
ROOT=$PWD
export PYTHONPATH=$ROOT/.tileops:$ROOT/.tileops/src:/tmp/site:$ROOT PYTHONUNBUFFERED=1
W=/tmp/tw; mkdir -p $W
cd $ROOT/.tileops
PYTEST="python3 -m pytest -q -p no:cacheprovider -o addopts= tests/ops/attention/test_mha.py -k tuned"
case "${1:-}" in
  capture)
    rm -f $W/rec.json; export TILELANG_CACHE_DIR=$W/jit-cache
    t0=$(date +%s); python3 -m tl_aot capture -o $W/rec.json -- $PYTEST 2>&1 | tail -3; echo "capture $(( $(date +%s) - t0 )) s"
    python3 -c "import json; d=json.load(open('$W/rec.json')); print('kernels', len(d.get('kernels', {})), 'tunings', len(d.get('tunings', {})))" ;;
  build-serve)
    t0=$(date +%s); python3 -m tl_aot build --capture $W/rec.json --keep-going --arch 90a -o $W/lib --name tuned_served -j 16 -q 2>&1 | tail -4
    echo "build $(( $(date +%s) - t0 )) s"
    rm -rf $W/served-cache; export TILELANG_CACHE_DIR=$W/served-cache
    t0=$(date +%s); python3 -m tl_aot run --serve $W/lib --strict -- $PYTEST 2>&1 | tail -3; echo "served $(( $(date +%s) - t0 )) s"
    echo "files in served TileLang cache: $(find $W/served-cache -type f 2>/dev/null | wc -l)"
    export TILELANG_CACHE_DIR=$W/jit-cache
    t0=$(date +%s); $PYTEST 2>&1 | tail -1; echo "jit warm $(( $(date +%s) - t0 )) s" ;;
  *) echo "usage: $0 capture | build-serve"; exit 2 ;;
esac
