"""Two block-wide reductions in one loop body: two ``workspace`` buffers alive over the same statements.

TileLang gives each ``T.reduce_sum`` / ``T.reduce_max`` across more than a warp a shared
``workspace``. Inside one loop both live over the same statements, so its arena plan ties them and
which one lands at the lower offset is the lowering process's (TileLang 0.1.15 wrote both in one
process: :mod:`tl_aot.capture.alias_order`). TileOPs' gated DeltaNet backward has this shape three
times over.
"""

import tilelang.language as T


def row_stats(M=64, N=256, steps=4, threads=128, dtype="float16"):
    """Per row and step, the sum over the max of ``N`` values: two reductions over ``threads`` threads in a serial loop."""

    @T.prim_func
    def main(X: T.Tensor((M, steps, N), dtype), Y: T.Tensor((M, steps), "float")):
        with T.Kernel(M, threads=threads) as bx:
            xs = T.alloc_shared((N,), dtype)
            x = T.alloc_fragment((N,), "float")
            total = T.alloc_fragment((1,), "float")
            top = T.alloc_fragment((1,), "float")
            for t in T.serial(steps):
                T.copy(X[bx, t, 0], xs)
                T.copy(xs, x)
                T.reduce_sum(x, total, dim=0)
                T.reduce_max(x, top, dim=0)
                Y[bx, t] = total[0] / top[0]

    return main
