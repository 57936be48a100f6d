"""Launcher coverage built into a real library (tests/kernels/coverage.toml), checked without a GPU.

Dims solved from expressions (``n * 2``, ``n + 2``, a paged KV cache), bit operations in launch
bounds, and kernels whose every tensor is an output. Calls use tensors that claim to be on cuda:0
(fake_cuda): every argument check runs; a call that passes them fails at allocation (no allocator
here) or at the missing driver.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.builds import build_spec
from support.fake_cuda import FakeCudaTensor

pytest.importorskip("tilelang")

KERNELS = Path(__file__).parents[1] / "kernels"
NO_ALLOCATOR = "needs a tensor allocator and none is set"


@pytest.fixture(scope="module")
def coverage(tmp_path_factory, cache_dir):
    return build_spec(KERNELS / "coverage.toml", tmp_path_factory, cache_dir)


def f32(*shape):
    return FakeCudaTensor(list(shape), "float32")


def test_manifest_records_solved_symbols_and_tensorless_entries(coverage):
    _, lib = coverage
    m = lib.manifest
    for e in m.entries:
        assert [str(v.arch) for v in e.variants] == ["sm_80", "sm_90a"]
    assert [s.spelled() for s in m.entry("pair_sum").symbols] == ["n = X.shape[0] // 2"]
    assert [s.spelled() for s in m.entry("stencil3").symbols] == ["n = X.shape[0] - 2"]
    paged = m.entry("paged_gather")
    assert [s.spelled() for s in paged.symbols] == ["batch = table.shape[0]", "max_pages = table.shape[1]", "num_pages = K.shape[0] // 16"]
    assert paged.signature() == (
        "paged_gather(K: float16[num_pages * 16, 4, 64], table: int32[batch, max_pages]) -> out: float16[batch, max_pages * 16, 4, 64]"
    )
    assert m.entry("tile_copy").variants[1].kernels[0].grid[0] == "rt::shr<int32_t>((s_n + 127), 7)"
    assert lib.signature("alibi_slopes").signature() == "alibi_slopes() -> slopes: float32[12]"
    assert lib.signature("sinusoidal").signature() == "sinusoidal() -> table: float32[128, 64]"
    assert lib.signature("arange").signature() == "arange(n: int32, start: int32, step: int32) -> out: int32[n]"


def test_header_declares_the_tensorless_calls(coverage):
    result, _ = coverage
    header = result.header.read_text()
    assert "::tvm::ffi::Tensor alibi_slopes();" in header
    assert "::tvm::ffi::Tensor arange(int32_t n, int32_t start, int32_t step, void* stream);" in header
    assert "void arange(::tvm::ffi::TensorView out, int32_t n, int32_t start, int32_t step);" in header
    assert "CUDA context current on the calling thread" in header


def test_a_dim_that_does_not_solve_exactly_is_refused(coverage):
    _, lib = coverage
    with pytest.raises(
        ValueError,
        match=r"pair_sum: argument 'X' expected shape \[n \* 2\] with dim 0 = n \* 2 for an integer n in \[1, 2147483647\], got \[9\]",
    ):
        lib.pair_sum(f32(9))
    with pytest.raises(ValueError, match=r"stencil3: argument 'X' expected shape \[n \+ 2\] with dim 0 = n \+ 2 for an integer n in \[1, "):
        lib.stencil3(f32(2))  # n would be 0
    k = FakeCudaTensor([40, 4, 64], "float16")  # 40 rows are not whole pages of 16
    with pytest.raises(
        ValueError, match=r"paged_gather: argument 'K' expected shape \[num_pages \* 16, 4, 64\] with dim 0 = num_pages \* 16"
    ):
        lib.paged_gather(k, FakeCudaTensor([2, 3], "int32"))


def test_solved_symbols_check_the_other_tensors_and_shape_the_outputs(coverage):
    _, lib = coverage
    with pytest.raises(ValueError, match=r"pair_sum: argument 'Y' expected shape \[n\] with dim 0 = n = 4, got \[5\]"):
        lib.pair_sum(f32(8), f32(5))
    for call in (
        lambda: lib.pair_sum(f32(8)),
        lambda: lib.paged_gather(FakeCudaTensor([32, 4, 64], "float16"), FakeCudaTensor([2, 3], "int32")),
    ):
        with pytest.raises(RuntimeError, match=NO_ALLOCATOR):  # every check passed: only the allocation is missing
            call()


def test_tensorless_entries_check_their_arguments_then_allocate(coverage):
    _, lib = coverage
    with pytest.raises(RuntimeError, match=f"arange: allocating 'out' {NO_ALLOCATOR}"):
        lib.arange(7, 0, 1)
    with pytest.raises(RuntimeError, match=f"alibi_slopes: allocating 'slopes' {NO_ALLOCATOR}"):
        lib.alibi_slopes()
    with pytest.raises(ValueError, match=r"arange: output 'out' would have shape \[-1\] for these arguments; a dim cannot be negative"):
        lib.arange(-1, 0, 1)
    with pytest.raises(TypeError, match=r"arange: argument 'n' expected an int \(int32\)"):
        lib.arange("7", 0, 1)
    with pytest.raises(ValueError, match=r"arange: argument 'n' expected a value in range of int32"):
        lib.arange(2**31, 0, 1)


def test_tensorless_entries_in_place_take_the_outputs_device_and_check_the_scalar_dim(coverage):
    _, lib = coverage
    with pytest.raises(ValueError, match=r"arange: argument 'out' expected shape \[n\] with dim 0 = n = 7, got \[5\]"):
        lib.arange(FakeCudaTensor([5], "int32"), 7, 0, 1)
    with pytest.raises(TypeError, match="arange: argument 'out' expected dtype int32"):
        lib.arange(FakeCudaTensor([7], "int64"), 7, 0, 1)
    for call in (lambda: lib.arange(FakeCudaTensor([7], "int32"), 7, 0, 1), lambda: lib.sinusoidal(f32(128, 64))):
        with pytest.raises(Exception) as e:  # every check passed: then the GPU is needed
            call()
        assert "allocating" not in str(e.value) and "argument" not in str(e.value)


def test_parameters_and_symbols_tilelang_named_alike_are_told_apart(coverage):
    result, lib = coverage
    assert lib.signature("gated_scale").signature() == "gated_scale(X: float32[n], alpha: float32, alpha_1: float32) -> Y: float32[n]"
    assert lib.signature("two_lengths").signature() == "two_lengths(X: float32[n], Y: float32[n_1])"
    assert "void gated_scale(::tvm::ffi::TensorView X, float alpha, float alpha_1, ::tvm::ffi::TensorView Y);" in result.header.read_text()
    with pytest.raises(TypeError, match=r"gated_scale: argument 'alpha_1' expected a float"):
        lib.gated_scale(f32(8), 1.0, "2")  # the second scalar checked as its own argument
    with pytest.raises(Exception) as e:  # X and Y of different lengths, as TileLang's JIT accepts: every check passes
        lib.two_lengths(f32(8), f32(5))
    assert "argument" not in str(e.value)
