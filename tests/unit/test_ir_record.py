"""A record's IR rebuilds into the prim_func it was made from, TileLang layouts and fragments included."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("tilelang")

import tilelang  # noqa: E402
from tilelang import tvm  # noqa: E402

from tl_aot.common.tilelang_compat import NEWEST  # noqa: E402
from tl_aot.jit import ir_record  # noqa: E402

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


PERSISTENT = {
    "bmm_fp8_persistent": lambda: faithful.bmm_fp8_persistent.get_tir(4, 256, 256, 256),
    "attn_fwd_persistent_causal": lambda: faithful.attn_fwd_persistent_causal.get_tir(1, 2, 256, 128),
}


@pytest.mark.parametrize("name", sorted(PERSISTENT))
def test_a_persistent_kernel_is_faithful_though_its_identity_hash_changes(name):
    """``T.Persistent`` uses its wave variable before the loop binding it: free to the hash, one variable across the trip."""
    from tl_aot.capture.device_code import digest, lower

    func = PERSISTENT[name]()
    text = ir_record.save_ir(func)
    back = ir_record.load_ir(text)
    assert "tl.Layout" in ir_record.tl_types(text)
    assert int(tvm.ir.structural_hash(back)) != int(tvm.ir.structural_hash(func))  # what the old check refused
    assert int(tvm.ir.structural_hash(back, map_free_vars=True)) == int(tvm.ir.structural_hash(func, map_free_vars=True))
    assert ir_record.round_trip_problem(func, text) == ""
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    with target:
        try:
            original = lower(func, target, {}).kernel_source
        except Exception as e:  # an older TileLang that cannot lower the kernel itself: nothing to compare with
            if tilelang.__version__ == NEWEST:
                raise
            pytest.skip(f"TileLang {tilelang.__version__} does not lower {name} itself: {str(e).strip().splitlines()[-1]}")
        assert digest(lower(back, target, {}).kernel_source) == digest(original)


def test_a_layout_with_fresh_placeholders_is_refused_even_where_its_facts_agree(funcs, monkeypatch):
    """Free variables are mapped for the function, never for a layout: TileLang matches ``_i``, ``_j`` by identity."""
    monkeypatch.setattr(ir_record, "rehydrate", lambda f: f)
    monkeypatch.setattr(ir_record, "_facts", lambda lay: "same")
    problem = ir_record.round_trip_problem(funcs["gemm_swizzled"])
    assert problem.startswith("a layout's placeholders changed across the round trip")


def test_a_persistent_kernel_with_fresh_placeholders_is_still_refused(monkeypatch):
    monkeypatch.setattr(ir_record, "rehydrate", lambda f: f)
    problem = ir_record.round_trip_problem(PERSISTENT["bmm_fp8_persistent"]())
    assert problem.startswith("a layout changed across the round trip")


def _shared_dtypes(func) -> dict[str, tuple[str, int]]:
    """Each shared buffer the prim_func allocates: its dtype's name and bits."""
    found: dict[str, tuple[str, int]] = {}

    def visit(n) -> None:
        if isinstance(n, tvm.tirx.SBlock):
            for b in n.alloc_buffers:
                found[b.name] = (str(b.dtype), int(b.dtype.bits))

    tvm.tirx.stmt_functor.post_order_visit(func.body, visit)
    return found


def test_a_custom_dtype_keeps_its_bits_and_the_kernel_lowers_the_same():
    """FP4 staged as ``T.float4_e2m1_unpacked`` (8 bits): tvm's JSON drops the bits; the record keeps them."""
    import tilelang.language as T

    if not hasattr(T, "float4_e2m1_unpacked"):
        pytest.skip(f"TileLang {tilelang.__version__} has no float4_e2m1_unpacked")
    import blackwell

    from tl_aot.capture.device_code import digest, lower

    func = blackwell.fp4_fp8_gemm()
    assert _shared_dtypes(func)["A_shared"][1] == 8
    naive = tvm.ir.load_json(tvm.ir.save_json(func))  # tvm alone: custom[float4_e2m1_unpacked] read back as 32 bits
    assert _shared_dtypes(naive)["A_shared"][1] == 32
    text = ir_record.save_ir(func)
    assert ir_record.round_trip_problem(func, text) == ""
    back = ir_record.load_ir(text)
    assert _shared_dtypes(back) == _shared_dtypes(func)
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_100a"})
    with target:
        assert digest(lower(back, target, {}).kernel_source) == digest(lower(func, target, {}).kernel_source)


def test_a_custom_dtype_used_at_two_widths_is_left_as_written_and_refused():
    """No width is guessed: the record keeps tvm's spelling and the round trip check names the change."""
    bits = {"float4_e2m1_unpacked": {8, 16}}
    text = '{"nodes": [{"type": "ir.PrimType", "data": {"dtype": "custom[float4_e2m1_unpacked]x2"}}]}'
    assert ir_record._with_custom_bits(text, bits) == text
    one = ir_record._with_custom_bits(text, {"float4_e2m1_unpacked": {8}})
    assert '"custom[float4_e2m1_unpacked]8x2"' in one
