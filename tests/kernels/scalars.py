"""Kernels taking scalars of every dtype TileLang passes to a kernel, and one it refuses (bfloat16)."""

import tilelang.language as T


def narrow_scalars(N=256, block=128):
    """Y = X * alpha + beta + shift + (flip ? 1 : 0): float16, float64, int8, uint16 and bool scalars."""

    @T.prim_func
    def main(
        X: T.Tensor((N,), "float16"),
        Y: T.Tensor((N,), "float16"),
        alpha: T.float16,
        beta: T.float64,
        shift: T.int8,
        step: T.uint16,
        flip: T.bool,
    ):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = (
                    X[bx * block + i] * alpha
                    + T.cast(beta, "float16")
                    + T.cast(shift, "float16")
                    + T.cast(step, "float16")
                    + T.if_then_else(flip, T.float16(1), T.float16(0))
                )

    return main


def bf16_scale(N=256, block=128):
    """Y = X * alpha with a bfloat16 scalar, which TileLang's packed call cannot take."""

    @T.prim_func
    def main(X: T.Tensor((N,), "bfloat16"), Y: T.Tensor((N,), "bfloat16"), alpha: T.bfloat16):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] * alpha

    return main
