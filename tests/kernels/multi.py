"""One prim_func that launches two kernels in order (the second reads what the first wrote)."""

import tilelang.language as T


def scale_then_shift(N, shift=2.0):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32"), alpha: T.float32):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] * alpha
        with T.Kernel(T.ceildiv(N, 256), threads=256) as bx:
            for i in T.Parallel(256):
                Z[bx * 256 + i] = Y[bx * 256 + i] + shift

    return main
