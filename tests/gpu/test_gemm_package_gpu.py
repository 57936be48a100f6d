"""samples/gemm_package as its users get it: the wheel installed, its kernels against torch (marker ``gpu``).

The wheel comes from ``TL_AOT_SAMPLE_WHEEL`` (built on the CPU machine, e.g. with
``pip wheel --no-build-isolation --no-deps -w dist samples/gemm_package``: it holds sm_90a and
sm_80, and needs only apache-tvm-ffi here), else it is built now (needs TileLang and nvcc).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "gemm_package"
GEMMS = [
    ("gemm_fp16_4096", 4096, torch.float16),
    ("gemm_fp16_8192", 8192, torch.float16),
    ("gemm_bf16_4096", 4096, torch.bfloat16),
    ("gemm_bf16_8192", 8192, torch.bfloat16),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A folder holding the installed tl_gemm package (``pip install --no-deps --target``)."""
    tmp = tmp_path_factory.mktemp("tl_gemm")
    wheel = os.environ.get("TL_AOT_SAMPLE_WHEEL")
    if not wheel:
        if importlib.util.find_spec("tilelang") is None or shutil.which("nvcc") is None:
            pytest.skip("set TL_AOT_SAMPLE_WHEEL to a tl_gemm wheel built where TileLang and nvcc are")
        src = tmp / "src"
        shutil.copytree(SAMPLE, src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "*.so", "_kernels.py"))
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w", str(tmp / "dist"), str(src)]
        subprocess.run(cmd, check=True, env={k: v for k, v in os.environ.items() if k != "TL_AOT_ARCHS"})
        (wheel,) = (tmp / "dist").glob("tl_gemm-*.whl")
    target = tmp / "site"
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target), str(wheel)]
    subprocess.run(cmd, check=True)
    return target


@pytest.fixture(scope="module")
def tl_gemm(site):
    sys.path.insert(0, str(site))
    try:
        import tl_gemm

        yield tl_gemm
    finally:
        sys.path.remove(str(site))


@pytest.mark.parametrize("entry,n,dtype", GEMMS, ids=[g[0] for g in GEMMS])
def test_gemm_matches_torch(tl_gemm, entry, n, dtype):
    torch.manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = (torch.randn(n, n, device="cuda") / n**0.5).to(dtype)  # keeps C ~ N(0, 1) at any size
    c = torch.full((n, n), float("nan"), device="cuda", dtype=dtype)
    getattr(tl_gemm, entry)(a, b, c)
    ref = (a.float() @ b.float()).to(dtype)
    tol = 2e-2 if dtype == torch.float16 else 4e-2
    torch.testing.assert_close(c, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("rows", [1, 3, 4, 1000, 4097])
def test_softmax_any_row_count(tl_gemm, rows):
    x = torch.randn(rows, 1024, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    tl_gemm.softmax_fp16(x, y)
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), dim=1), rtol=1e-2, atol=1e-3)


def test_runs_on_the_current_stream(tl_gemm):
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    b = (torch.randn(4096, 4096, device="cuda") / 64).half()
    c = torch.zeros_like(a)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        tl_gemm.gemm_fp16_4096(a, b, c)
    s.synchronize()
    torch.testing.assert_close(c, (a.float() @ b.float()).half(), rtol=2e-2, atol=2e-2)


def test_wrong_size_is_refused_and_the_library_stays_usable(tl_gemm):
    small = torch.empty(4096, 4096, device="cuda", dtype=torch.float16)
    big = torch.empty(8192, 8192, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="gemm_fp16_4096: argument 'A' expected shape"):
        tl_gemm.gemm_fp16_4096(big, small, small)
    with pytest.raises(TypeError, match="expected dtype float16, got bfloat16"):
        tl_gemm.gemm_fp16_4096(small, small.bfloat16(), small)
    test_softmax_any_row_count(tl_gemm, 7)


def test_installed_package_runs_without_tl_aot_or_tilelang(site):
    """A fresh interpreter: torch for tensors, tl_gemm (tvm_ffi underneath), and nothing of tl_aot or TileLang."""
    code = f"""
import sys
sys.path.insert(0, {str(site)!r})
import torch, tl_gemm
x = torch.randn(100, 1024, device="cuda", dtype=torch.float16)
y = torch.empty_like(x)
tl_gemm.softmax_fp16(x, y)
torch.testing.assert_close(y.float(), torch.softmax(x.float(), dim=1), rtol=1e-2, atol=1e-3)
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("tl_aot", "tilelang"))
assert not heavy, heavy
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_called_like_the_jit_and_registered_as_torch_ops(tl_gemm):
    """``c = gemm(a, b)`` as under @tilelang.jit(out_idx=[-1]); the loader's register_torch_ops() makes torch ops."""
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    b = (torch.randn(4096, 4096, device="cuda") / 64).half()
    c = tl_gemm.gemm_fp16_4096(a, b)
    assert isinstance(c, torch.Tensor) and c.shape == (4096, 4096) and c.dtype == torch.float16
    torch.testing.assert_close(c, (a.float() @ b.float()).half(), rtol=2e-2, atol=2e-2)
    ops = tl_gemm.register_torch_ops()
    assert ops is torch.ops.tl_gemm and tl_gemm.register_torch_ops() is ops
    torch.testing.assert_close(ops.gemm_fp16_4096(a, b), c, rtol=0, atol=0)
    x = torch.randn(300, 1024, device="cuda", dtype=torch.float16)
    f = torch.compile(lambda t: torch.ops.tl_gemm.softmax_fp16(t * 2), fullgraph=True)
    torch.testing.assert_close(f(x).float(), torch.softmax(2 * x.float(), dim=1), rtol=1e-2, atol=1e-3)
