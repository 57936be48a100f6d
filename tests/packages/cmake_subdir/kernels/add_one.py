"""Y = X + ONE for any length; ONE comes from a local module (tl_aot's depfile lists it)."""

import tilelang.language as T
from values import ONE


def add_one(block=256):
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Y[bx * block + i] = X[bx * block + i] + T.float32(ONE)

    return main
