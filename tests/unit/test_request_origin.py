"""Where a compile request came from, as a record and ``inspect`` spell it."""

from __future__ import annotations

import pytest

from tl_aot.jit.request_origin import jit_origin, jit_text


def test_an_eager_call_with_tensors_is_spelled_by_shape_and_dtype_not_values():
    """TileLang's tcgen05 examples call ``matmul(a, b, 128, ...)`` with tensors: the origin names their shapes."""
    torch = pytest.importorskip("torch")

    def matmul(A, B, block_M, in_dtype):
        """The user's @tilelang.jit function."""

    matmul.__module__, matmul.__qualname__ = "gemm_tcgen5mma", "matmul"
    jit = type("Jit", (), {"func": type("Fn", (), {"orig_func": matmul})()})()
    a = torch.randn(256, 512, dtype=torch.bfloat16)
    origin = jit_origin((jit, (a, torch.zeros(128, 512, dtype=torch.bfloat16), 128), {"in_dtype": torch.bfloat16}))
    assert origin["args"] == {
        "0": "torch.Tensor(bfloat16[256, 512])",
        "1": "torch.Tensor(bfloat16[128, 512])",
        "2": "128",
        "in_dtype": "torch.bfloat16",
    }
    text = jit_text(origin)
    assert text.startswith("gemm_tcgen5mma.matmul(0=torch.Tensor(bfloat16[256, 512]), ") and "tensor([" not in text
