"""Broken on purpose: a T.gemm over 3 warps (threads=96), which TileLang's C++ refuses, logging "Fatal:" itself."""

import tilelang.language as T


def odd_warps(M=128, N=128, K=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, 1, threads=96) as (bx, by):
            A_shared = T.alloc_shared((M, K), "float16")
            B_shared = T.alloc_shared((K, N), "float16")
            C_local = T.alloc_fragment((M, N), "float32")
            T.copy(A[0, 0], A_shared)
            T.copy(B[0, 0], B_shared)
            T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[0, 0])

    return main
