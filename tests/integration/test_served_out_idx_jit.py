"""A served kernel's ``out_idx`` against TileLang's own ``JITKernel``, built on the CPU for an explicit target.

The served kernel's entry is read from the same prim_func by tl_aot's lowering (the manifest's
parameters, outputs marked), so this is the value a served request answers where the JIT's would be.
"""

from types import SimpleNamespace

import pytest

from tl_aot.common.metadata import LoweredEntry
from tl_aot.lower.ir_signature import output_positions, read_signature
from tl_aot.serving.served_kernel import ServedKernel

tilelang = pytest.importorskip("tilelang")


def _two_outputs():
    import tilelang.language as T

    @T.prim_func
    def two_outs(A: T.Tensor((128,), "float32"), s: T.float32, B: T.Tensor((128,), "float32"), C: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                B[i] = A[i] * s
                C[i] = A[i] + s

    return two_outs


@pytest.fixture(autouse=True)
def _tilelangs_cache_off():
    """Every compile here is TileLang's own, not a kernel another test left in its cache."""
    from tilelang.env import env

    was = env.is_cache_enabled()
    env.disable_cache()
    yield
    if was:
        env.enable_cache()


@pytest.mark.parametrize("out_idx", [-1, [-1, -2]])
def test_served_out_idx_is_the_jit_kernels(out_idx):
    from tilelang import tvm

    jit_kernel = tilelang.compile(_two_outputs(), out_idx=out_idx, target=tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}))
    func = _two_outputs()
    params, _, _ = read_signature(func, "two_outs", output_positions(func, out_idx, "two_outs"))
    entry = LoweredEntry(name="two_outs", source="kernels.py", function="two_outs", params=params)
    library = SimpleNamespace(path="libk.so", signature=lambda name: entry)
    request = SimpleNamespace(func=func, out_idx=out_idx, pass_configs={}, compile_flags=[])
    served = ServedKernel(lambda *args: None, "two_outs", library, request)
    assert served.out_idx == jit_kernel.out_idx
    assert all(i >= 0 for i in served.out_idx)
