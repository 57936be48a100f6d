"""Scalars of each narrow dtype TileLang passes, built for real (CPU) and called on a GPU; bfloat16 refused by name.

tests/kernels/scalars.toml: one entry taking float16, float64, int8, uint16 and bool scalars. The
launcher compiles with nvcc, the manifest and header give each scalar's dtype, and the C++ API takes
a float16 scalar as a double (the launcher rounds it as TileLang's packed call does). On a GPU the
library's result matches torch's computation of the same expression in float16.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.builds import build_spec

pytest.importorskip("tilelang")

KERNELS = Path(__file__).parents[1] / "kernels"


@pytest.fixture(scope="module")
def built(tmp_path_factory, cache_dir):
    return build_spec(KERNELS / "scalars.toml", tmp_path_factory, cache_dir)


def test_the_manifest_and_header_give_each_scalars_dtype(built):
    result, lib = built
    entry = next(e for e in lib.manifest.entries if e.name == "narrow_scalars")
    scalars = {p.name: p.dtype for p in entry.params if p.kind == "scalar"}
    assert scalars == {"alpha": "float16", "beta": "float64", "shift": "int8", "step": "uint16", "flip": "bool"}
    header = result.header.read_text()
    assert "alpha: float16, beta: float64, shift: int8, step: uint16, flip: bool)" in header
    assert "double alpha, double beta, int8_t shift, uint16_t step, bool flip);" in header


def test_a_bfloat16_scalar_is_refused_naming_entry_arch_parameter_and_line():
    from tl_aot.common.arch import parse_arch
    from tl_aot.common.errors import LoweringError
    from tl_aot.config.kernel_spec import KernelSpec
    from tl_aot.lower.lower import lower_variant

    spec = KernelSpec.create(name="bf16_scale", source=KERNELS / "scalars.py", function="bf16_scale", archs=["90a"])
    with pytest.raises(LoweringError) as e:
        lower_variant(spec, parse_arch("90a"))
    msg = str(e.value)
    assert msg.startswith("entry 'bf16_scale' (sm_90a): parameter 'alpha': scalar dtype bfloat16 cannot be passed")
    line = next(i for i, t in enumerate((KERNELS / "scalars.py").read_text().splitlines(), 1) if "def bf16_scale" in t)
    assert f"scalars.py:{line}" in msg
    assert "Check failed" not in msg


@pytest.mark.gpu
def test_narrow_scalars_match_torch_on_the_gpu(built):
    import torch

    _, lib = built
    x = torch.randn(256, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    alpha, beta = 0.1 + 2.0**-12, 1.0 / 3.0  # alpha is not a float16: the launcher rounds it as TileLang does
    lib.narrow_scalars(x, y, alpha, beta, -3, 7, True)
    a, b = torch.tensor(alpha, dtype=torch.float16), torch.tensor(beta, dtype=torch.float16)
    want = x * a + b + torch.tensor(-3.0, dtype=torch.float16) + torch.tensor(7.0, dtype=torch.float16) + 1
    torch.testing.assert_close(y, want, rtol=1e-3, atol=1e-2)
