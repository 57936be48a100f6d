"""Kernels that return their outputs, in the three ways TileLang users write them.

``scale_add``: an old-style factory under ``@tilelang.jit(out_idx=[-1])`` with a dynamic row count.
``row_stats``: new-style ``@tilelang.jit``, two ``T.empty`` outputs returned as a tuple.
``axpy_first``: a plain factory whose output is its *first* parameter, next to a scalar; the spec
names it (``out_idx = ["out"]``), since a plain prim_func says nothing about outputs.
"""

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def scale_add(N, block=256, dtype="float16"):
    m = T.dynamic("m")

    @T.prim_func
    def main(x: T.Tensor((m, N), dtype), b: T.Tensor((N,), dtype), y: T.Tensor((m, N), dtype)):
        with T.Kernel(T.ceildiv(N, block), m, threads=block) as (bx, by):
            for i in T.Parallel(block):
                col = bx * block + i
                if col < N:
                    y[by, col] = x[by, col] * T.cast(2.0, dtype) + b[col]

    return main


@tilelang.jit
def row_stats(x, threads: int = 128):
    M, N = T.const("M N")
    x: T.Tensor[[M, N], T.float32]
    total = T.empty((M,), T.float32)
    peak = T.empty((M,), T.float32)
    with T.Kernel(M, threads=threads) as bx:
        row = T.alloc_fragment((N,), T.float32)
        s = T.alloc_fragment((1,), T.float32)
        p = T.alloc_fragment((1,), T.float32)
        T.copy(x[bx, 0:N], row)
        T.reduce_sum(row, s, dim=0)
        T.reduce_max(row, p, dim=0)
        total[bx] = s[0]
        peak[bx] = p[0]
    return total, peak


def axpy_first(N, block=128):
    @T.prim_func
    def main(out: T.Tensor((N,), "float32"), a: T.Tensor((N,), "float32"), alpha: T.float32, c: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                j = bx * block + i
                if j < N:
                    out[j] = a[j] * alpha + c[j]

    return main
