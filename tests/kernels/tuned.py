"""An ``@autotune`` GEMM written the way TileLang's examples write them (for python -m tl_aot tune)."""

import itertools

import tilelang
import tilelang.language as T
from tilelang.autotuner import autotune


def _configs():
    return [
        {"block_M": bm, "block_N": bn, "block_K": bk, "stages": st, "threads": 128}
        for bm, bn, bk, st in itertools.product([64, 128], [128, 256], [32, 64], [2, 3])
        if not (bm == 128 and bn == 256 and bk == 64 and st == 3)  # over the shared-memory budget
    ]


@autotune(configs=_configs(), warmup=10, rep=50)
@tilelang.jit(out_idx=[-1])
def gemm(M, N, K, block_M=128, block_N=128, block_K=32, stages=2, threads=128, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), dtype)
            b_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[by * block_M, ko * block_K], a_s)
                T.copy(B[ko * block_K, bx * block_N], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main
