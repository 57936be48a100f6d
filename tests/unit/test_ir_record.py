"""A record's IR rebuilds into the prim_func it was made from, TileLang layouts and fragments included."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("tilelang")

from tilelang import tvm  # noqa: E402

from tl_aot import ir_record  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[1] / "kernels"))
import faithful  # noqa: E402

KERNELS = {
    "gemm_swizzled": lambda: faithful.gemm_swizzled(),
    "gemm_jit": lambda: faithful.gemm_jit.get_tir(512, 512, 512),
    "fp8_gemm_scaled": lambda: faithful.fp8_gemm_scaled(),
    "w4a16_gemm": lambda: faithful.w4a16_gemm(),
    "flashattn_fwd": lambda: faithful.flashattn_fwd.get_tir(1, 2, 256, 64),
    "flashattn_bwd": lambda: faithful.flashattn_bwd.get_tir(1, 2, 256, 64),
    "row_sum_fragment": lambda: faithful.row_sum_fragment(),
}


@pytest.fixture(scope="module")
def funcs() -> dict:
    return {name: make() for name, make in KERNELS.items()}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_each_kernel_round_trips_faithfully(funcs, name):
    func = funcs[name]
    text = ir_record.save_ir(func)
    assert ir_record.tl_types(text) & {"tl.Layout", "tl.Fragment"}, "the kernel holds a TileLang layout"
    naive = tvm.ir.load_json(text)  # what a record held before: fresh placeholder variables
    assert int(tvm.ir.structural_hash(naive)) != int(tvm.ir.structural_hash(func))
    back = ir_record.load_ir(text)
    assert int(tvm.ir.structural_hash(back)) == int(tvm.ir.structural_hash(func))
    assert ir_record.round_trip_problem(func, text) == ""
    mine, theirs = ir_record.layouts_of(func), ir_record.layouts_of(back)
    assert [ir_record._facts(x) for x in mine] == [ir_record._facts(x) for x in theirs]
    assert all("_i" not in ir_record._facts(x).split("->")[1] for x in theirs)  # output shapes evaluate


def test_the_check_names_what_a_naive_load_loses(funcs, monkeypatch):
    monkeypatch.setattr(ir_record, "rehydrate", lambda f: f)
    problem = ir_record.round_trip_problem(funcs["gemm_swizzled"])
    assert "a layout changed across the round trip: tl.Layout [128, 64] -> [1, 16, 512] came back as" in problem
    assert "_i // 8 + 1" in problem
    frag = ir_record.round_trip_problem(funcs["row_sum_fragment"])
    assert "tl.Fragment" in frag


def test_a_prim_func_without_tilelang_objects_comes_back_unchanged():
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                B[i] = A[i] + 1

    text = ir_record.save_ir(main)
    assert ir_record.tl_types(text) == set()
    assert ir_record.round_trip_problem(main, text) == ""
    assert ir_record.normalized_ir(ir_record.load_ir(text)) == ir_record.normalized_ir(main)


def test_a_text_that_does_not_load_is_a_reason_not_a_crash(funcs):
    assert ir_record.round_trip_problem(funcs["gemm_swizzled"], "{not json").startswith("the stored IR does not load")
