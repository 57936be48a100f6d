"""Launcher coverage: dims TileLang solves from expressions, bit operations, kernels whose every tensor is an output.

Lowered here for sm_90a and sm_80 (CPU only); the C++ they produce is in the golden launcher
(pair_sum, tile_copy, arange) and runs in tests/integration/test_coverage_cpu.py and tests/gpu.
"""

from pathlib import Path

import pytest

pytest.importorskip("tilelang")

from support.golden import launcher_golden

from tl_aot.common.arch import parse_arch  # noqa: E402
from tl_aot.common.errors import LoweringError  # noqa: E402
from tl_aot.lower.lower import lower_variant  # noqa: E402
from tl_aot.spec import KernelSpec  # noqa: E402

KERNELS = Path(__file__).parents[1] / "kernels"
ARCHS = ["90a", "80"]


def lower(function, arch, out_idx=None, source="coverage.py", **args):
    spec = KernelSpec.create(name=function, source=KERNELS / source, function=function, args=args, archs=[arch], out_idx=out_idx)
    return lower_variant(spec, parse_arch(arch))


def by_name(v):
    return {p.name: p for p in v.params}, {s.name: s for s in v.symbols}


@pytest.mark.parametrize("arch", ARCHS)
def test_a_symbol_only_in_a_product_is_solved_as_tilelang_solves_it(arch):
    params, symbols = by_name(lower("pair_sum", arch, out_idx=[-1]))
    n = symbols["n"]
    assert (n.param, n.dim, n.dtype, n.derived) == ("X", 0, "int32", True)
    assert n.expr == "X.shape[0] // 2" and n.spelled() == "n = X.shape[0] // 2"
    assert n.cpp == "rt::floordiv(x.t_X->shape[0], 2)"
    assert (params["X"].shape, params["X"].shape_cpp) == (("n * 2",), ("(s_n * 2)",))
    assert (params["Y"].shape, params["Y"].shape_cpp, params["Y"].output) == (("n",), ("s_n",), True)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_symbol_in_a_sum_is_solved_too(arch):
    v = lower("stencil3", arch, out_idx=[-1])
    (n,) = v.symbols
    assert (n.name, n.expr, n.cpp) == ("n", "X.shape[0] - 2", "(x.t_X->shape[0] - 2)")
    assert v.kernels[0].args[-1].value == "s_n"


@pytest.mark.parametrize("arch", ARCHS)
def test_paged_kv_cache_with_a_static_page_size(arch):
    v = lower("paged_gather", arch, out_idx=["out"])
    params, symbols = by_name(v)
    assert [s.name for s in v.symbols] == ["batch", "max_pages", "num_pages"]  # direct dims first, then solved ones
    assert not symbols["batch"].derived and symbols["max_pages"].spelled() == "max_pages = table.shape[1]"
    assert symbols["num_pages"].spelled() == "num_pages = K.shape[0] // 16"
    assert params["K"].shape_cpp == ("(s_num_pages * 16)", "4", "64")
    assert params["out"].shape_cpp == ("s_batch", "(s_max_pages * 16)", "4", "64")
    assert v.kernels[0].grid == ("s_max_pages", "s_batch", "1")


@pytest.mark.parametrize("arch", ARCHS)
def test_two_dynamic_factors_of_one_dim_are_a_build_error(arch):
    # TileLang's own binder cannot split num_pages * page_size either: its message names both
    with pytest.raises(
        LoweringError, match=r"(?s)TileLang failed to lower paged_two_dynamic.*unable to solve variables \(num_pages, page_size\)"
    ):
        lower("paged_two_dynamic", arch)


@pytest.mark.parametrize("arch", ARCHS)
def test_bit_operations_in_launch_bounds(arch):
    (k,) = lower("tile_copy", arch).kernels
    assert k.grid[0] == "rt::shr<int32_t>((s_n + 127), 7)" and k.grid_display[0] == "T.shift_right(n + 127, 7)"
    assert k.dynamic_smem == "(rt::shl<int32_t>(1, a_log_tile) * 4)"
    assert [a.value for a in k.args] == ["p_X", "p_Y", "a_log_tile", "s_n"]


@pytest.mark.parametrize("arch", ARCHS)
def test_kernels_whose_every_tensor_is_an_output(arch):
    alibi = lower("alibi_slopes", arch, out_idx=[0], heads=12)
    assert [(p.name, p.shape, p.output) for p in alibi.params] == [("slopes", (12,), True)] and not alibi.symbols
    table = lower("sinusoidal", arch, out_idx=[0], seq=128, dim=64)
    assert [(p.name, p.shape, p.output) for p in table.params] == [("table", (128, 64), True)]
    # a dim bound by a scalar argument (T.match_buffer): TileLang binds it from the scalar, so does the launcher
    v = lower("arange", arch, out_idx=["out"])
    params, _ = by_name(v)
    assert (params["out"].shape, params["out"].shape_cpp, params["out"].output) == (("n",), ("a_n",), True)
    assert not v.symbols and v.kernels[0].grid[0] == "rt::floordiv((a_n + 127), 128)"


def test_a_dim_bound_by_a_scalar_is_checked_against_it_in_place():
    v = lower("arange", "90a")  # every parameter passed: out's length must equal n (it used to be read from out)
    params, _ = by_name(v)
    assert params["out"].shape_cpp == ("a_n",) and not params["out"].output and not v.symbols


def test_an_output_dim_no_input_or_scalar_gives_is_still_refused(tmp_path):
    f = tmp_path / "fill.py"
    f.write_text(
        "import tilelang.language as T\n\n\n"
        "def fill():\n"
        "    n = T.dynamic('n')\n\n"
        "    @T.prim_func\n"
        "    def main(o: T.Tensor((n,), 'float32')):\n"
        "        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:\n"
        "            for i in T.Parallel(128):\n"
        "                if bx * 128 + i < n:\n"
        "                    o[bx * 128 + i] = 1.0\n\n"
        "    return main\n"
    )
    spec = KernelSpec.create(name="fill", source=f, function="fill", archs=["90a"], out_idx=[0])
    with pytest.raises(LoweringError, match="output 'o' has dim 'n', which no input tensor's shape or scalar argument gives"):
        lower_variant(spec, parse_arch("90a"))


def test_the_golden_launcher_solves_checks_and_picks_the_current_device():
    """pair_sum solves n from X's dim and checks it exact; arange (no input tensor) sizes its output from a scalar.

    rt::check_args reads these tables; that a tensorless entry's device is the current one when it
    allocates, else its first output's, is the runtime's (tests/unit/cpp/test_launcher_runtime.cc).
    """
    cc = launcher_golden("dynamic_dims").read_text()  # pair_sum, tile_copy, arange: entries 0, 1, 2
    pair_sum = cc[cc.index("namespace entry0 {") : cc.index("}  // namespace entry0")]
    assert "    case 0: return rt::floordiv(x.t[0]->shape[0], 2);\n    case 1: return (s_n * 2);\n" in pair_sum
    assert '{"n", 0, 0, 2147483647, 0, {rt::kExpr, 1}, "[n * 2] with dim 0 = n * 2 for an integer n in [1, 2147483647]"}' in pair_sum
    assert "const int64_t grid0[3] = {rt::shr<int32_t>((s_n + 127), 7), 1, 1};" in cc  # tile_copy
    arange = cc[cc.index("namespace entry2 {") : cc.index("}  // namespace entry2")]
    assert "const rt::Checks checks{tensors, 1, 0, " in arange  # one tensor, no input tensor
    assert '{"out", 1, "[n]", "int32", {{0, 32}}, 1, dims + 0, nullptr, "()", 64, {0, 32, 1}, values + 0, 1}' in arange
    assert "  const int32_t a_n = static_cast<int32_t>(x.a[0].i);\n  switch (i) {\n    case 0: return a_n;\n" in arange


def test_when_on_a_solved_symbol_is_refused():
    import dataclasses

    from tl_aot.codegen.dispatch import plan
    from tl_aot.common.metadata import LoweredEntry, Param, Symbol

    x = Param("X", "tensor", "float32", ("n * 2",), shape_cpp=("(s_n * 2)",))
    y = Param("Y", "tensor", "float32", ("n",), shape_cpp=("s_n",), output=True)
    n = Symbol("n", "int32", "X", 0, expr="X.shape[0] // 2", cpp="rt::floordiv(x.t_X->shape[0], 2)")
    first = LoweredEntry("s0", "k.py", "k", params=(x, y), symbols=(n,), export="k", when=(("n", 1, 64),))
    second = dataclasses.replace(first, name="s1", when=(), fallback=True)
    with pytest.raises(LoweringError, match=r"when names n = X.shape\[0\] // 2, solved from a dim expression"):
        plan((first, second))


@pytest.mark.parametrize("arch", ARCHS)
def test_parameters_tilelang_renamed_alike_keep_their_own_values(arch):
    # `alpha = alpha_lo` / `alpha = alpha_hi` in the body: TileLang's builder names both parameters `alpha`
    v = lower("gated_scale", arch, out_idx=[-1])
    assert [p.name for p in v.params] == ["X", "alpha", "alpha_1", "Y"]  # the later one numbered, as TileLang's C does
    (k,) = v.kernels
    assert [a.value for a in k.args] == ["p_X", "p_Y", "a_alpha", "a_alpha_1", "s_n"]  # each from its own parameter
    assert "float alpha, float alpha_1, int n)" in v.cuda_source  # the names TileLang's own code generator chose


@pytest.mark.parametrize("arch", ARCHS)
def test_two_symbols_of_one_name_are_bound_apart(arch):
    v = lower("two_lengths", arch)
    assert [(s.name, s.param) for s in v.symbols] == [("n", "X"), ("n_1", "Y")]  # not one `n` the two must share
    params, _ = by_name(v)
    assert (params["X"].shape, params["Y"].shape) == (("n",), ("n_1",))
    assert [a.value for a in v.kernels[0].args] == ["p_X", "p_Y", "s_n", "s_n_1"]


def test_a_symbol_named_like_its_tensor_is_numbered_not_refused():
    # TileLang's JIT runs it (its CUDA reads `int X_1`); the launcher binds the symbol apart from the tensor
    v = lower("sized_by_its_name", "90a")
    assert [(s.name, s.param, s.dim) for s in v.symbols] == [("X_1", "X", 0)]
    params, _ = by_name(v)
    assert (params["X"].shape, params["Y"].shape) == (("X_1",), ("X_1",))
    assert [a.value for a in v.kernels[0].args] == ["p_X", "p_Y", "s_X_1"]
    assert "float* __restrict__ Y, int X_1)" in v.cuda_source


def test_a_variant_lowered_twice_in_one_process_is_named_the_same():
    # the renaming is in place on TileLang's objects: lowering the renamed prim_func again changes nothing
    first, second = lower("gated_scale", "90a", out_idx=[-1]), lower("gated_scale", "90a", out_idx=[-1])
    assert [p.name for p in first.params] == [p.name for p in second.params] and first.cuda_source == second.cuda_source
