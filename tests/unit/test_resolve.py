"""Resolving the user's object as TileLang's JIT would: each factory shape, and each way it can go wrong."""

import textwrap
from pathlib import Path

import pytest

pytest.importorskip("tilelang")

from tl_aot.common.arch import parse_arch  # noqa: E402
from tl_aot.common.errors import LoweringError, SpecError  # noqa: E402
from tl_aot.config.values import Expr  # noqa: E402
from tl_aot.lower.lower import lower_variant  # noqa: E402
from tl_aot.spec import KernelSpec  # noqa: E402

TLOPS = Path(__file__).parents[1] / "packages" / "factory_shapes" / "tlops" / "kernels"

HEADER = """
import functools
import tilelang
import tilelang.language as T


def body(n, dtype="float32", block=128):
    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i]
    return main
"""


def lower(source, function, arch="90a", **kw):
    spec = KernelSpec.create(name=kw.pop("name", function), source=source, function=function, archs=[arch], **kw)
    return lower_variant(spec, parse_arch(arch))


@pytest.fixture
def kernels(tmp_path):
    def write(text: str) -> Path:
        path = tmp_path / "k.py"
        path.write_text(HEADER + textwrap.dedent(text))
        return path

    return write


def test_two_level_factory_routes_problem_to_the_factory_and_config_to_the_jit():
    v = lower(TLOPS / "gemm.py", "gemm_kernel", args={"m": 256, "n": 256, "k": 128, "block_m": 128, "num_stages": 3})
    assert v.resolved == "gemm_kernel(m=256, n=256, k=128) -> _gemm(block_m=128, num_stages=3)"
    assert dict(v.pass_configs) == {"tl.disable_tma_lower": "true", "tl.disable_warp_specialized": "true"}
    assert [p.output for p in v.params] == [False, False, True]  # the nested jit's out_idx=[-1]


def test_pinned_levels_and_unknown_names(kernels):
    src = kernels("""
        def outer(n, block=64):
            @tilelang.jit
            def inner(block=32, dtype="float32"):
                return body(n, dtype, block)
            return inner
    """)
    with pytest.raises(LoweringError, match="'block' is a parameter of both outer") as e:
        lower(src, "outer", args={"n": 256, "block": 128})
    assert "factory_args" in str(e.value) and "jit_args" in str(e.value)
    v = lower(src, "outer", args={"n": 256}, factory_args={"block": 7}, jit_args={"block": 128})
    assert v.resolved == "outer(block=7, n=256) -> inner(block=128)"
    assert v.kernels[0].block[0] == "128"
    with pytest.raises(LoweringError, match="no level takes bogus") as e:
        lower(src, "outer", args={"n": 256, "bogus": 1})
    assert "outer(n, block=64) took n" in str(e.value) and "inner(block=32, dtype='float32') takes block, dtype" in str(e.value)
    with pytest.raises(LoweringError, match="jit_args 'nope'"):
        lower(src, "outer", args={"n": 256}, jit_args={"nope": 1})


def test_several_kernels_need_select_and_name_the_choices():
    args = {"shape": Expr("Problem(64, 256)"), "dtype": "float16"}
    with pytest.raises(LoweringError, match=r"gives 2 kernels \(fwd \(fwd\), bwd \(bwd\)\); choose one with select"):
        lower(TLOPS / "multi.py", "activation", args=args)
    with pytest.raises(LoweringError, match="select = 'side' is none of the kernels"):
        lower(TLOPS / "multi.py", "activation", args=args, select="side")
    fwd = lower(TLOPS / "multi.py", "activation", args=args, select="fwd")
    assert fwd.resolved.endswith("-> fwd()") and [p.name for p in fwd.params] == ["X", "Y"]
    pair = lower(TLOPS / "multi.py", "activation_pair", args=args, select="1")
    assert [p.name for p in pair.params] == ["X", "G", "D"]


def test_lru_cache_partial_and_compiled_kernels_never_compile(monkeypatch):
    import importlib

    jk = importlib.import_module("tilelang.jit.kernel")

    def refuse(*a, **k):
        raise AssertionError("tl_aot compiled a kernel with TileLang's JIT")

    monkeypatch.setattr(jk.JITKernel, "__init__", refuse)
    full = lower(TLOPS / "scale.py", "relu6_scale", args={"n": 1000, "factor": 0.5})
    half = lower(TLOPS / "scale.py", "relu6_half", args={"n": 1000})
    assert full.func_hash == half.func_hash  # partial(factor=0.5) is the same call
    assert half.compile_flags[0] == "-include" and half.compile_flags[1].endswith("tlops_helpers.h")
    assert half.inputs[0][0].endswith("tlops_helpers.h")  # the header is an input of the image
    assert "--use_fast_math" in half.nvcc_options
    override = lower(TLOPS / "scale.py", "relu6_half", args={"n": 1000, "factor": 2.0})
    assert override.func_hash != half.func_hash  # the build's args win over the partial's
    norm = lower(TLOPS / "norm.py", "rms_norm", args={"rows": 256, "cols": 128, "dtype": Expr("torch.float16")})
    assert norm.resolved.endswith("-> main")  # the factory compiled its own jit: its request is taken


def test_a_stale_compiled_kernel_in_a_user_cache_is_rebuilt_not_reused():
    a = lower(TLOPS / "cached.py", "fill_like", arch="90a", args={"n": 1024})
    b = lower(TLOPS / "cached.py", "fill_like", arch="80", args={"n": 1024})
    assert a.func_hash == b.func_hash and b.arch == parse_arch("sm_80")


def test_a_user_cache_that_kept_a_stand_in_compiles_for_real_once_the_build_is_over(monkeypatch):
    """fill_like's private lru_cache keeps what TileLang returned during the build: after it, that is TileLang's kernel."""
    import sys

    lower(TLOPS / "cached.py", "fill_like", arch="90a", args={"n": 2048})
    cached = next(m for name, m in sys.modules.items() if name.endswith("kernels.cached"))
    kept = cached.fill_like(2048)  # the helper's lru_cache answers: the build's stand-in
    compiled = []

    class Kernel:
        def __call__(self, x):
            return ("ran", x)

        def get_kernel_source(self):
            return "// cuda"

    def compile(func, **options):
        compiled.append((func, options))
        return Kernel()

    from tl_aot.jit.seam import jit_module

    monkeypatch.setattr(jit_module(), "cached", compile)  # where TileLang's compile and the JIT end
    assert kept("x") == ("ran", "x")  # compiled with TileLang on first use, as the JIT would have
    assert kept.get_kernel_source() == "// cuda"
    assert len(compiled) == 1  # once
    func, options = compiled[0]
    assert func is kept.tl_aot_request.func and options["out_idx"] == kept.tl_aot_request.out_idx
    assert options["pass_configs"] == dict(kept.tl_aot_request.pass_configs)


def test_jit_caches_hold_no_stand_in_after_a_build():
    import importlib

    lower(TLOPS / "scale.py", "relu6_scale", args={"n": 512, "factor": 1.0})
    from tl_aot.jit.seam import CompiledStandIn

    mods = [m for name, m in __import__("sys").modules.items() if name.endswith("kernels.scale")]
    assert mods
    for m in mods:
        jit = importlib.import_module(m.__name__).relu6_scale.__wrapped__
        assert not any(isinstance(v, CompiledStandIn) for v in jit._kernel_cache.values())


def test_registry_filled_by_imports():
    with pytest.raises(LoweringError, match="KeyError: 'negate'"):
        lower(TLOPS / "dispatch.py", "from_registry", args={"op": "negate", "n": 64}, name="no_imports")
    v = lower(TLOPS / "dispatch.py", "from_registry", args={"op": "negate", "n": 64}, imports=["tlops.ops"])
    assert v.resolved == "from_registry(op='negate', n=64) -> prim_func"
    assert any(d.endswith("ops/elementwise.py") for d in v.deps)  # the registry's module is a dependency


@pytest.mark.parametrize(
    ("decorator", "fragment"),
    [
        ('execution_backend="torch"', "execution_backend='torch'"),
        ('target="hip"', "target 'hip'"),
        ('target="cuda -arch=sm_80"', "but this variant is built for sm_90a"),
    ],
)
def test_options_tl_aot_cannot_honour_are_errors_naming_them(kernels, decorator, fragment):
    src = kernels(f"""
        @tilelang.jit({decorator})
        def k(n):
            return body(n)
    """)
    with pytest.raises(LoweringError, match="entry 'k' \\(sm_90a\\)") as e:
        lower(src, "k", args={"n": 256})
    assert fragment in str(e.value)


@pytest.mark.parametrize("decorator", ['target="cutedsl"', 'execution_backend="cutedsl"'])
def test_a_kernel_asking_for_cutedsl_is_built_with_it_or_names_the_extra(kernels, decorator):
    from tl_aot.common.errors import ToolchainNotFound
    from tl_aot.common.versions import cutedsl_version

    src = kernels(f"""
        @tilelang.jit({decorator})
        def k(n):
            return body(n)
    """)
    if not cutedsl_version():
        with pytest.raises(ToolchainNotFound, match=r"pip install 'tl_aot\[cutedsl\]'"):
            lower(src, "k", args={"n": 256})
        return
    v = lower(src, "k", args={"n": 256})
    assert v.backend == "cutedsl" and "@cute.kernel" in v.cuda_source and v.nvcc_options == ()


def test_honoured_targets_and_verbose_build(kernels):
    src = kernels("""
        @tilelang.jit(target="cuda", verbose=True, execution_backend="cython")
        def k(n):
            return body(n)
    """)
    assert lower(src, "k", args={"n": 256}).kernels


def test_a_factory_that_runs_its_kernel_gets_a_clear_error(kernels):
    src = kernels("""
        @tilelang.jit(out_idx=[-1])
        def k(n):
            return body(n)

        def warm(n):
            kernel = k(n)
            kernel(None)
            return kernel
    """)
    with pytest.raises(LoweringError, match="was called while tl_aot built it"):
        lower(src, "warm", args={"n": 256})


def test_spec_options_merge_over_the_kernels_own(kernels):
    from tilelang.transform import PassConfigKey

    src = kernels("""
        @tilelang.jit(pass_configs={"tl.disable_tma_lower": True}, compile_flags="-DFROM_KERNEL=1")
        def k(n):
            return body(n)
    """)
    v = lower(src, "k", args={"n": 256}, pass_configs={PassConfigKey.TL_ENABLE_FAST_MATH: True}, compile_flags=["-DFROM_SPEC=1"])
    assert dict(v.pass_configs) == {"tl.disable_tma_lower": "true", "tl.enable_fast_math": "true"}
    assert v.compile_flags == ("-DFROM_KERNEL=1", "-DFROM_SPEC=1")
    assert v.nvcc_options == ("--use_fast_math", "-DFROM_KERNEL=1", "-DFROM_SPEC=1")


def test_values_that_cannot_be_spelled_are_refused_at_spec_time():
    with pytest.raises(SpecError, match="args.cfg: a value of type builtins.object"):
        KernelSpec.create(name="k", source="k.py", function="k", archs=["90a"], args={"cfg": object()})
