"""NHWC 2-D convolution as an implicit GEMM: im2col TMA loads on sm_90a."""

import tilelang.language as T


def conv2d(N, C, H, W, F, K=3, S=1, D=1, P=1, block_M=64, block_N=64, block_K=32, num_stages=2, threads=128, dtype="float16"):
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1

    @T.prim_func
    def main(data: T.Tensor((N, H, W, C), dtype), kernel: T.Tensor((K, K, C, F), dtype), out: T.Tensor((N, OH, OW, F), dtype)):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M), threads=threads) as (bx, by):
            data_shared = T.alloc_shared((block_M, block_K), dtype)
            kernel_shared = T.alloc_shared((block_K, block_N), dtype)
            out_local = T.alloc_fragment((block_M, block_N), "float32")
            out_shared = T.alloc_shared((block_M, block_N), dtype)
            kernel_flat = T.Tensor((K * K * C, F), dtype, kernel.data)
            out_flat = T.Tensor((N * OH * OW, F), dtype, out.data)
            T.clear(out_local)
            for k_iter in T.Pipelined(T.ceildiv(K * K * C, block_K), num_stages=num_stages):
                T.im2col(data, data_shared, by, k_iter, K, S, D, P)
                T.copy(kernel_flat[k_iter * block_K, bx * block_N], kernel_shared)
                T.gemm(data_shared, kernel_shared, out_local)
            T.copy(out_local, out_shared)
            T.copy(out_shared, out_flat[by * block_M, bx * block_N])

    return main
