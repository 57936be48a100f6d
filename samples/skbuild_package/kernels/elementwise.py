"""Elementwise kernels of the CMake sample: a dynamic length, and scalar arguments."""

import tilelang.language as T


def add_one(dtype="float32", block=256):
    """``Y = X + 1`` for any length ``n`` (a dynamic dimension, checked at run time)."""
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Y[bx * block + i] = X[bx * block + i] + T.cast(1, dtype)

    return main


def axpy(N, block=128):
    """``Y = alpha * X + Y + shift`` for a static length ``N``, with a float and an int scalar."""

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), alpha: T.float32, shift: T.int32):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = alpha * X[bx * block + i] + Y[bx * block + i] + T.cast(shift, "float32")

    return main
