"""The one seam with TileLang's JIT: requests built once, interceptions chained newest first, TileLang restored."""

import pytest

pytest.importorskip("tilelang")

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402

from tl_aot.jit import seam as jit_seam  # noqa: E402
from tl_aot.jit.resolve import intercept_compiles  # noqa: E402
from tl_aot.jit.seam import CompileRequest  # noqa: E402


def _func():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                B[i] = A[i] * 2

    return main


def test_interceptions_chain_newest_first_and_tilelang_is_restored():
    tl_jit = jit_seam.jit_module()
    real_cached, real_compile = tl_jit.cached, tl_jit.JITImpl.compile
    seen = []

    def outer(req, call, proceed):
        seen.append(("outer", req.name, req.out_idx, req.pass_configs, req.compile_flags))
        return "from outer"

    def inner(req, call, proceed):
        seen.append(("inner", req.name))
        return proceed()

    a, b = jit_seam.Interception(outer, name="a"), jit_seam.Interception(inner, name="b")
    with jit_seam.intercepting(a), jit_seam.intercepting(b):
        got = tilelang.compile(_func(), out_idx=[-1], pass_configs={"tl.disable_tma_lower": True}, compile_flags="-O3")
    assert got == "from outer"
    assert seen[0] == ("inner", "main")
    assert seen[1][:3] == ("outer", "main", [-1]) and seen[1][4] == ("-O3",)
    assert tl_jit.cached is real_cached and tl_jit.JITImpl.compile is real_compile


def test_a_jit_call_is_known_while_it_compiles_and_resolve_sees_one_request():
    calls = []

    @tilelang.jit(out_idx=[-1])
    def double(n=128):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=128) as _:
                for i in T.Parallel(n):
                    B[i] = A[i] * 2

        return main

    def note(req, call, proceed):
        calls.append(call)
        return proceed()

    with jit_seam.intercepting(jit_seam.Interception(note)), intercept_compiles() as state:
        double.compile(n=256)
    assert len(state.requests) == 1 and isinstance(state.requests[0], CompileRequest)
    assert state.requests[0].session == state.session
    assert calls == []  # resolve's interception (the newest) answered without proceeding
    assert [dict(c[2]) for c in state.jit_calls] == [{"n": 256}]
    assert jit_seam.last_jit_call() is None


def test_a_stand_in_used_later_compiles_a_t_empty_kernel_as_tilelang_would(monkeypatch):
    """A kernel returning ``T.empty`` outputs (TileLang merges their out_idx before ``cached``), kept past a build.

    Used afterwards, the stand-in compiles its request again: once through ``tilelang.compile``,
    which merged the out_idx a second time and raised TileLang's "Out index conflict" (TileLang's
    ``example_gemm_intrinsics.py`` met it under ``capture --device``).
    """
    monkeypatch.syspath_prepend(str(__import__("support.helpers", fromlist=["KERNELS"]).KERNELS))
    import outputs

    with jit_seam.intercepting(jit_seam.Interception(lambda r, c, p: jit_seam.CompiledStandIn(r))):
        stand_in = outputs.row_stats.compile(M=64, N=128)
    assert isinstance(stand_in, jit_seam.CompiledStandIn) and stand_in.tl_aot_request.out_idx is not None

    class Compiled:
        def get_kernel_source(self):
            return "// the kernel's CUDA"

    requests = []
    with jit_seam.intercepting(jit_seam.Interception(lambda r, c, p: requests.append(r) or Compiled())):
        assert stand_in.get_kernel_source() == "// the kernel's CUDA"
    assert [r.out_idx for r in requests] == [stand_in.tl_aot_request.out_idx]
    assert requests[0].compile_flags == stand_in.tl_aot_request.compile_flags
