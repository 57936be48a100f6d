"""Kernels built with TileLang's CuTeDSL backend: a kernel file that asks for it, and factories a spec switches."""

import tilelang
import tilelang.language as T


@tilelang.jit(target="cutedsl")
def scale_cutedsl(N=4096, dtype="float32", block=256):
    """Y = X * alpha over a dynamic length (the kernel file asks for the CuTeDSL backend itself)."""
    del N
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype), alpha: T.float32):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Y[bx * block + i] = X[bx * block + i] * T.cast(alpha, dtype)

    return main
