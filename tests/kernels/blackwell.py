"""Blackwell (sm_100a) kernels in the shapes TileLang's tcgen05 examples take, ours.

``fp4_fp8_gemm``: an FP4 x FP8 GEMM on the 5th-generation tensor cores (``tcgen05.mma``
``kind::f8f6f4``), the accumulator in tensor memory (``T.alloc_tmem``), FP4 ``A`` staged in shared
memory as ``T.float4_e2m1_unpacked`` (one FP4 value per byte, the layout the MMA reads): a custom
dtype, which a capture record must keep at 8 bits.
"""

import tilelang.language as T


def fp4_fp8_gemm(M=256, N=256, K=256, block_M=128, block_N=128, block_K=128):
    """C = A @ B.T for packed-FP4 ``A`` and FP8 ``B``, one 128 x 128 tile per CTA."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float4_e2m1fn), B: T.Tensor((N, K), T.float8_e4m3fn), C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float4_e2m1_unpacked)
            B_shared = T.alloc_shared((block_N, block_K), T.float8_e4m3fn)
            C_tmem = T.alloc_tmem([block_M, block_N], T.float32)
            mbar = T.alloc_barrier(1)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=1):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.tcgen05_gemm(A_shared, B_shared, C_tmem, False, True, mbar=mbar, clear_accum=k == 0)
                T.mbarrier_wait_parity(mbar, k % 2)
            T.copy(C_tmem, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def nvfp4_gemm_sm120(M=128, N=128, K=256, block_K=256):
    """Consumer Blackwell (sm_120a): one 128 x 128 NVFP4 tile, block-scaled (``mma.sync ... kind::mxf4nvf4``, UE4M3 scales).

    Plain ``sm_120`` lacks the instruction: TileLang's template compiles a trap in its place there.
    """
    words = block_K // 64  # uint32 scale words per row and K block (four UE4M3 scales of 16 values each)

    @T.prim_func
    def main(
        A: T.Tensor((M, K), T.float4_e2m1fn),
        B: T.Tensor((N, K), T.float4_e2m1fn),
        SFA: T.Tensor((M * (K // block_K), words), T.uint32),
        SFB: T.Tensor((N * (K // block_K), words), T.uint32),
        C: T.Tensor((M, N), T.bfloat16),
    ):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_shared = T.alloc_shared((M, block_K), T.float4_e2m1fn)
            B_shared = T.alloc_shared((N, block_K), T.float4_e2m1fn)
            SFA_shared = T.alloc_shared((M, words), T.uint32)
            SFB_shared = T.alloc_shared((N, words), T.uint32)
            C_local = T.alloc_fragment((M, N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[0, ko * block_K], A_shared)
                T.copy(B[0, ko * block_K], B_shared)
                for r, w in T.Parallel(M, words):
                    SFA_shared[r, w] = SFA[ko * M + r, w]
                for r, w in T.Parallel(N, words):
                    SFB_shared[r, w] = SFB[ko * N + r, w]
                T.mma_gemm_blockscaled(
                    A_shared,
                    B_shared,
                    C_local,
                    SFA_shared,
                    SFB_shared,
                    transpose_B=True,
                    clear_accum=False,
                    k_start=ko * block_K,
                    sf_a_granularity_k=16,
                    sf_b_granularity_k=16,
                    sf_layout="blockscaled_chunk_kmajor",
                )
            T.copy(C_local, C[0, 0])

    return main
