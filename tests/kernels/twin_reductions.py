"""Kernels with two block-wide reductions, in the shapes of row normalisations (layer norm, softmax, Welford).

Each ``T.reduce_sum`` / ``T.reduce_max`` across more than a warp gets a shared ``workspace``; the
two do not live at once, so TileLang puts both at one offset of the merged shared buffer under one
name, and the order of their declarations is the lowering process's
(:mod:`tl_aot.capture.alias_order`). A row is staged through shared memory first, as layer norms do.
"""

import tilelang
import tilelang.language as T


def row_norm(M=64, N=1024, threads=128, dtype="float16"):
    """One row per block: its mean and variance by two sums over ``threads`` threads, then the row scaled by ``W``."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=threads) as bx:
            xs = T.alloc_shared((N,), dtype)
            x = T.alloc_fragment((N,), "float")
            s = T.alloc_fragment((1,), "float")
            v = T.alloc_fragment((1,), "float")
            T.copy(X[bx, 0], xs)
            T.copy(xs, x)
            T.reduce_sum(x, s, dim=0)
            for j in T.Parallel(N):
                x[j] = (x[j] - s[0] / N) * (x[j] - s[0] / N)
            T.reduce_sum(x, v, dim=0)
            for j in T.Parallel(N):
                Y[bx, j] = T.cast((T.cast(xs[j], "float") - s[0] / N) * T.rsqrt(v[0] / N + 1e-5) * T.cast(W[j], "float"), dtype)

    return main


def _row_softmax(M, N, block_M, threads, dtype):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float")
            top = T.alloc_fragment((block_M,), "float")
            total = T.alloc_fragment((block_M,), "float")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, top, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j] - top[i])
            T.reduce_sum(x, total, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / total[i]
            T.copy(x, Y[bx * block_M, 0])

    return main


def row_softmax(M=64, N=1024, dtype="float16"):
    """Behind ``@tilelang.jit`` as row kernels are written: ``_func(block_M, threads)`` (16 rows, 256 threads)."""

    @tilelang.jit(out_idx=[1])
    def _func(block_M, threads):
        return _row_softmax(M, N, block_M, threads, dtype)

    return _func
