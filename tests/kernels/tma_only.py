"""A kernel TileLang lowers for sm_90a and refuses for sm_80: an explicit ``T.tma_copy`` (no TMA before Hopper).

TileLang's warp-specialised examples meet the same refusal; ``bench/examples_refusal.py`` must call it
TileLang's (``tests/unit/test_examples_sweep.py``).
"""

import tilelang.language as T


def tma_rows(M=256, N=64, block=64):
    """``B = A``, each block's rows brought into shared memory by one TMA copy."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(M // block, threads=128) as bx:
            rows = T.alloc_shared((block, N), "float16")
            ready = T.alloc_barrier(arrive_count=128)
            T.tma_copy(A[bx * block, 0], rows, barrier=ready)
            T.barrier_arrive(ready)
            T.barrier_wait(ready, 0)
            T.copy(rows, B[bx * block, 0])

    return main
