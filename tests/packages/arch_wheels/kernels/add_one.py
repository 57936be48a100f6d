"""Y = X + 1 over a dynamic length."""

import tilelang.language as T
from common import BLOCK


def add_one(dtype="float32"):
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < n:
                    Y[bx * BLOCK + i] = X[bx * BLOCK + i] + T.cast(1, dtype)

    return main
