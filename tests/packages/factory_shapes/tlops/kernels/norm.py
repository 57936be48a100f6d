"""The factory calls its nested jit and returns the compiled kernel; eps/clip come as float values."""

import functools

import tilelang
import tilelang.language as T

from .common import TileConfig, tl_dtype


@functools.cache
def rms_norm(rows, cols, dtype, eps=1e-6, clip=float("inf"), config=TileConfig()):  # noqa: B008 (a frozen config)
    dtype = tl_dtype(dtype)

    @tilelang.jit(out_idx=[-1], pass_configs={tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True})
    def _norm(block):
        @T.prim_func
        def main(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), dtype)):
            with T.Kernel(T.ceildiv(rows, block), threads=config.threads) as bx:
                x_l = T.alloc_fragment((block, cols), "float32")
                sq = T.alloc_fragment((block, cols), "float32")
                ss = T.alloc_fragment((block,), "float32")
                T.copy(X[bx * block, 0], x_l)
                for i, j in T.Parallel(block, cols):
                    sq[i, j] = x_l[i, j] * x_l[i, j]
                T.reduce_sum(sq, ss, dim=1)
                for i in T.Parallel(block):
                    ss[i] = T.rsqrt(ss[i] / cols + eps)
                for i, j in T.Parallel(block, cols):
                    x_l[i, j] = T.min(x_l[i, j] * ss[i], clip)
                T.copy(x_l, Y[bx * block, 0])

        return main

    return _norm(block=config.block // 32)
