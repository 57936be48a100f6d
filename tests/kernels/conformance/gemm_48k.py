"""A 128x128x32 fp16 GEMM with a 3-stage pipeline: exactly 48 KiB of dynamic shared memory plus
the pipeline's barriers in static shared memory (TMA + wgmma on sm_90a)."""

import tilelang.language as T


def gemm_48k(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32, stages=3, dtype="float16"):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), dtype)
            b_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[by * block_M, ko * block_K], a_s)
                T.copy(B[ko * block_K, bx * block_N], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return gemm
