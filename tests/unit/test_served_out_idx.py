"""A served kernel's ``out_idx`` is ``JITKernel.out_idx``: legalised as TileLang's adapter does, outputs returned in its order."""

from types import SimpleNamespace

import pytest

from tl_aot.common.metadata import LoweredEntry, Param
from tl_aot.serving.served_kernel import ServedKernel, legalised_out_idx

ENTRY = LoweredEntry(
    name="two_outs",
    source="kernels.py",
    function="two_outs",
    params=(
        Param("A", "tensor", "float32", (128,)),
        Param("alpha", "scalar", "float32"),
        Param("B", "tensor", "float32", (128,), output=True),
        Param("C", "tensor", "float32", (128,), output=True),
    ),
)


class _Lib:
    path = "libk.so"

    def __init__(self):
        self.asked = []

    def signature(self, name):
        self.asked.append(name)
        return ENTRY


def _served(out_idx, fn=lambda *args: ("B", "C")):
    return ServedKernel(fn, "two_outs", _Lib(), SimpleNamespace(func=None, out_idx=out_idx, pass_configs={}, compile_flags=[]))


@pytest.mark.parametrize("out_idx", [-1, 3, [-1], [2, 3], [-2, -1], [-1, -2], [3, 2], [0, -1], []])
def test_out_idx_is_legalised_as_tilelangs_adapter_legalises_it(out_idx):
    """The same answer as ``BaseKernelAdapter._legalize_result_idx``, the function ``JITKernel.out_idx`` returns the result of."""
    base = pytest.importorskip("tilelang.jit.adapter.base")
    params = [object()] * len(ENTRY.params)
    tilelang_s = base.BaseKernelAdapter._legalize_result_idx(
        SimpleNamespace(params=params), list(out_idx) if isinstance(out_idx, list) else out_idx
    )
    assert legalised_out_idx(out_idx, ENTRY) == tilelang_s
    assert _served(out_idx).out_idx == tilelang_s


def test_no_out_idx_is_the_entrys_own_outputs_and_a_name_its_position():
    """``None`` (a ``T.empty`` return: TileLang reads the outputs from the prim_func) and a spec file's names."""
    assert legalised_out_idx(None, ENTRY) == [2, 3]
    assert legalised_out_idx(["C", "B"], ENTRY) == [3, 2]


def test_the_manifest_is_read_on_first_use_not_at_lookup():
    kernel = _served([-1])
    assert kernel.library.asked == []
    assert kernel.out_idx == [3] and kernel.out_idx == [3]
    assert kernel.library.asked == ["two_outs"]  # once


def test_outputs_asked_out_of_order_come_back_in_that_order_as_the_jit_returns_them():
    calls = []

    def library_fn(*args):
        calls.append(args)
        return ("B", "C")  # the library returns its outputs in parameter order

    kernel = _served([-1, -2], library_fn)
    assert kernel("A", 2.0) == ("C", "B")
    assert kernel("A", 3.0) == ("C", "B")
    assert calls == [("A", 2.0), ("A", 3.0)]
    assert _served([2, 3], library_fn)("A", 1.0) == ("B", "C")
    assert _served([-1, -2], lambda *args: None)("A", 1.0, "B", "C") is None  # every parameter passed: nothing returned


def test_the_profiler_compares_outputs_in_out_idx_order(monkeypatch):
    pytest.importorskip("tilelang")
    assert _served([-1, -2]).get_profiler().result_idx == [3, 2]
