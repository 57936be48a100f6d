"""Libraries built with the CUDA compilers from PyPI, on a GPU (marker ``gpu``).

Two libraries of the quickstart GEMM (2048³ fp16, sm_90a), built on a machine with no CUDA toolkit:
``cu12/`` with ``tl_aot[build-cu12]`` (NVRTC + ptxas 12.9) and ``cu13/`` with ``tl_aot[build-cu13]``
(nvcc 13.0), in ``TL_AOT_PIP_CUDA_LIBS`` (default ``.gpubuild/pip_cuda``). Build them with::

    bash tests/gpu/pip_cuda_libs.sh          # needs TileLang; no toolkit, no GPU

Checked here: both load and compute the same bits (and agree with torch); a library whose driver
floor is above this machine's driver is refused, by ``tl_aot.load`` and by the C++ runtime at the
first call, with the one message (the driver version the loader reads is faked with
``TL_AOT_TESTING_DRIVER_VERSION``, since one machine has one driver).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
LIBS = Path(os.environ.get("TL_AOT_PIP_CUDA_LIBS", ROOT / ".gpubuild" / "pip_cuda"))
N = 2048


def _lib(major: int) -> Path:
    path = LIBS / f"cu{major}" / "libgemm_fp16.so"
    if not path.is_file():
        pytest.skip(f"{path} is missing: build it with bash tests/gpu/pip_cuda_libs.sh")
    return path


def _driver_cuda() -> int:
    import ctypes

    v = ctypes.c_int()
    ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v))
    return v.value


def test_cu12_and_cu13_libraries_compute_the_same_bits():
    import tl_aot

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the libraries hold sm_90a only")
    libs = {m: tl_aot.load(_lib(m)) for m in (12, 13)}
    floors = {m: libs[m].manifest.driver_min_cuda for m in libs}
    assert floors == {12: "12.0", 13: "13.0"}
    assert "NVRTC" in libs[12].manifest.compiler and "pip" in libs[12].manifest.compiler
    assert libs[13].manifest.compiler.startswith("nvcc 13.0")
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(N, N, device="cuda", dtype=torch.float16, generator=g)
    b = torch.randn(N, N, device="cuda", dtype=torch.float16, generator=g)
    outs = {}
    for m, lib in libs.items():
        c = torch.empty(N, N, device="cuda", dtype=torch.float16)
        lib.gemm_fp16(a, b, c)
        torch.cuda.synchronize()
        outs[m] = c
    ref = (a.float() @ b.float()).half()
    torch.testing.assert_close(outs[13], ref, rtol=1e-2, atol=1e-1)
    assert torch.equal(outs[12], outs[13]), f"{(outs[12] != outs[13]).sum().item()} elements differ"


_REFUSE = """
import json, sys, torch, tl_aot, tvm_ffi
path = sys.argv[1]
try:
    tl_aot.load(path)
    load = "loaded"
except tl_aot.common.errors.LibraryError as e:
    load = str(e)
module = tvm_ffi.load_module(path)  # around tl_aot.load: the C++ runtime refuses at the first call itself
a = torch.zeros(2048, 2048, device="cuda", dtype=torch.float16)
try:
    module["gemm_fp16"](a, a, a)
    call = "ran"
except Exception as e:
    call = f"{type(e).__name__}: {e}"
print(json.dumps({"load": load, "call": call}))
"""


@pytest.mark.parametrize("major", [12, 13])
def test_a_driver_older_than_the_floor_is_refused_with_one_message(major):
    path = _lib(major)
    floor = {12: 12000, 13: 13000}[major]
    fake = floor - 10  # 11.9 / 12.9: one minor release too old
    env = {**os.environ, "TL_AOT_TESTING_DRIVER_VERSION": str(fake)}
    proc = subprocess.run([sys.executable, "-c", _REFUSE, str(path)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    have = f"{fake // 1000}.{(fake % 1000) // 10}"
    for msg in (out["load"], out["call"]):
        assert "library gemm_fp16" in msg, msg
        assert f"supporting CUDA {floor // 1000}.0 or newer" in msg, msg
        assert f"this machine's driver supports CUDA {have}" in msg, msg
        assert "update the NVIDIA driver" in msg, msg
        assert "CUDA_ERROR" not in msg, msg
    assert out["call"].startswith("RuntimeError: gemm_fp16: library gemm_fp16")
    if major == 13:
        assert "tl_aot[build-cu12]" in out["load"]


def test_the_real_driver_loads_what_its_cuda_version_allows():
    import tl_aot

    have = _driver_cuda()
    for major in (12, 13):
        path = _lib(major)
        if have >= major * 1000:
            assert tl_aot.load(path).manifest.driver_min_cuda == f"{major}.0"
        else:
            with pytest.raises(tl_aot.common.errors.LibraryError, match="update the NVIDIA driver"):
                tl_aot.load(path)
