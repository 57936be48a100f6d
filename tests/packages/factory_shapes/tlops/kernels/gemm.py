"""Two-level factory: the problem picks the kernel, the nested @tilelang.jit takes the tile config."""

import tilelang
import tilelang.language as T

from .common import tl_dtype


def gemm_kernel(m, n, k, dtype="float16", accum_dtype="float32"):
    dtype = tl_dtype(dtype)

    @tilelang.jit(
        out_idx=[-1],
        pass_configs={tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True, tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True},
    )
    def _gemm(block_m=64, block_n=64, block_k=32, num_stages=2, threads=128):
        @T.prim_func
        def main(A: T.Tensor((m, k), dtype), B: T.Tensor((k, n), dtype), C: T.Tensor((m, n), dtype)):
            with T.Kernel(T.ceildiv(n, block_n), T.ceildiv(m, block_m), threads=threads) as (bx, by):
                A_s = T.alloc_shared((block_m, block_k), dtype)
                B_s = T.alloc_shared((block_k, block_n), dtype)
                C_l = T.alloc_fragment((block_m, block_n), accum_dtype)
                T.clear(C_l)
                for ko in T.Pipelined(T.ceildiv(k, block_k), num_stages=num_stages):
                    T.copy(A[by * block_m, ko * block_k], A_s)
                    T.copy(B[ko * block_k, bx * block_n], B_s)
                    T.gemm(A_s, B_s, C_l)
                T.copy(C_l, C[by * block_m, bx * block_n])

        return main

    return _gemm
