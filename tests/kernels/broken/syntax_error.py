"""Broken on purpose: a Python syntax error (the ':' missing on line 9)."""

import tilelang.language as T


def add_one(N=1024):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] + 1.0

    return main
