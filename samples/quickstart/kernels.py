"""The quick-start kernel: a TileLang GEMM as JIT users write it (no tl_aot imports; tl_aot builds it as is).

``out_idx=[-1]`` makes C the output: ``c = matmul(...)(a, b)`` under TileLang's JIT, and
``c = lib.gemm_fp16(a, b)`` from the library tl_aot builds.
"""

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3, threads=128, dtype="float16", accum_dtype="float32"):
    """``M`` may be None for a dynamic row count (the TMA descriptors then depend on it at run time)."""
    m = T.dynamic("m") if M is None else M

    @T.prim_func
    def main(A: T.Tensor((m, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((m, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(m, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[-1])
def matmul_dynamic_m(N, K, **kwargs):
    """The same GEMM with a row count known only at run time."""
    return matmul.get_tir(None, N, K, **kwargs)
