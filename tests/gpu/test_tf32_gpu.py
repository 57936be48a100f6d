"""A ``T.tfloat32`` tensor parameter on the GPU, called exactly as TileLang's JIT is called: with a ``torch.float32``.

``tests/kernels/tf32.toml``, built by tl_aot, must take the float32 tensor TileLang's JIT takes for
a tfloat32 parameter, give the JIT's result, and refuse a float16 one with tl_aot's error.
"""

from __future__ import annotations

import importlib.util
import re

import pytest
from support.builds import prebuilt_or_build
from support.helpers import KERNELS

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def lib(tmp_path_factory, cache_dir):
    """``libtl_tf32.so``: tf32_scale_rows(x: float32[m, 64], w: tfloat32[64]) -> out: float32[m, 64]."""
    import tl_aot

    return tl_aot.load(prebuilt_or_build(KERNELS / "tf32.toml", "tl_tf32", tmp_path_factory, cache_dir))


def test_a_float32_tensor_is_taken_for_tfloat32_and_the_result_is_the_jits(lib):
    x = torch.randn(100, 64, device="cuda")
    w = torch.randn(64, device="cuda")
    out = lib.tf32_scale_rows(x, w)
    torch.cuda.synchronize()
    assert out.dtype == torch.float32 and out.shape == (100, 64)
    torch.testing.assert_close(out, x * w, rtol=2e-3, atol=2e-3)  # w read at tf32 precision (10 mantissa bits)
    pytest.importorskip("tilelang")
    spec = importlib.util.spec_from_file_location("tl_aot_test_tf32", KERNELS / "tf32.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.testing.assert_close(out, module.tf32_scale_rows()(x, w), rtol=0, atol=0)


def test_a_float16_weight_is_refused_and_nothing_runs(lib):
    out = torch.zeros(16, 64, device="cuda")
    with pytest.raises(TypeError, match=re.escape("tf32_scale_rows: argument 'w' expected dtype custom[tfloat32], got float16")):
        lib.tf32_scale_rows(torch.randn(16, 64, device="cuda"), torch.randn(64, device="cuda", dtype=torch.float16), out)
    torch.cuda.synchronize()
    assert not out.any()
