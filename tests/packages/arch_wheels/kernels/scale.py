"""Y = alpha * X for a static length."""

import tilelang.language as T


def scale(N, block=128):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), alpha: T.float32):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = alpha * X[bx * block + i]

    return main
