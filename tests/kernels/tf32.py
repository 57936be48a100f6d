"""A kernel with a ``T.tfloat32`` tensor parameter, as DeepSeek's mHC pre-GEMM declares its weight.

TileLang's JIT takes such a tensor as a ``torch.float32`` one (its host code accepts DLPack float32 or
TVM's custom tfloat32 code); the kernel reads it at tf32 precision. ``tf32.toml`` builds it,
``tests/integration/test_tf32_cpu.py`` and ``tests/gpu/test_tf32_gpu.py`` use it.
"""

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def tf32_scale_rows(N=64, block_m=16):
    """``out[i, j] = x[i, j] * w[j]`` with ``w`` a tfloat32 ``[N]`` and a dynamic row count: input, returned float32 output."""
    m = T.dynamic("m")

    @T.prim_func
    def main(x: T.Tensor((m, N), T.float32), w: T.Tensor((N,), T.tfloat32), out: T.Tensor((m, N), T.float32)):
        with T.Kernel(T.ceildiv(m, block_m), threads=128) as bx:
            for i, j in T.Parallel(block_m, N):
                if bx * block_m + i < m:
                    out[bx * block_m + i, j] = x[bx * block_m + i, j] * T.Cast(T.float32, w[j])

    return main
