#!/usr/bin/env bash
# Builds the two libraries tests/gpu/test_pip_cuda_gpu.py checks on the GPU machine: the quickstart
# GEMM (2048^3 fp16, sm_90a) with the CUDA 12 compiler from PyPI (NVRTC + ptxas 12.9.86) and with the
# CUDA 13 one (nvcc 13.0.88), each with every system CUDA path removed from PATH and no CUDA_HOME:
# the compiler is the pip-installed one tl_aot finds by itself. Needs TileLang (tl_aot[build]); no GPU.
#   bash tests/gpu/pip_cuda_libs.sh [OUT]       (default OUT: .gpubuild/pip_cuda)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
out="${1:-.gpubuild/pip_cuda}"
python="${PYTHON:-python}"
scrubbed="$(printf '%s' "$PATH" | tr ':' '\n' | while read -r d; do [ -n "$d" ] && [ ! -e "$d/nvcc" ] && printf '%s:' "$d"; done)"
for major in 12 13; do
  case $major in
    12) pins="cuda-toolkit[nvcc,nvrtc,cudart,cccl]==12.9.1" ;;
    13) pins="cuda-toolkit[nvcc,nvvm,crt,cudart,cccl]==13.0.2" ;;
  esac
  wheels="$out/wheels-cu$major"
  [ -d "$wheels/nvidia" ] || "$python" -m pip install -q --no-deps --target "$wheels" \
    $("$python" -m pip download -q --no-deps -d "$out/dl-cu$major" "$pins" >/dev/null && \
      "$python" - "$out/dl-cu$major" <<'PY'
import sys, zipfile, pathlib, re
# the meta-package's pinned components for the extras asked for
for whl in pathlib.Path(sys.argv[1]).glob("cuda_toolkit-*.whl"):
    meta = zipfile.ZipFile(whl).read(next(n for n in zipfile.ZipFile(whl).namelist() if n.endswith("METADATA"))).decode()
    extras = {"nvcc", "nvrtc", "nvvm", "crt", "cudart", "cccl"}
    for line in meta.splitlines():
        m = re.match(r"Requires-Dist: (\S+)==(\S+); .*extra == '(\w+)'", line)
        if m and m.group(3) in extras:
            print(f"{m.group(1)}=={m.group(2)}")
PY
    )
  env -u CUDA_HOME -u CUDA_PATH PATH="$scrubbed" PYTHONPATH="$PWD/$wheels" TL_AOT_CUDA=$major "$python" -m tl_aot build \
    samples/quickstart/kernels.py:matmul --name gemm_fp16 --arch 90a \
    --arg M=2048 --arg N=2048 --arg K=2048 -o "$out/cu$major" --cache-dir "$out/cache-cu$major"
done
echo "built $out/cu12/libgemm_fp16.so and $out/cu13/libgemm_fp16.so"
