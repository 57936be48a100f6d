"""A tensor parameter named like a C++ keyword (``delete``): valid TileLang, so tl_aot must build it."""

import tilelang.language as T


def copy(N=1024):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), delete: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                delete[bx * 128 + i] = X[bx * 128 + i]

    return main
