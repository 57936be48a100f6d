"""A persistent GEMM: one block per SM, asked of the GPU while the kernel is built
(``driver.get_num_sms()``), each block walking its share of the output tiles."""

import tilelang.language as T
from tilelang.carver.arch import driver


def persistent_gemm(M, N, K, block_M=128, block_N=128, block_K=64, stages=3, threads=256, dtype="float16"):
    num_sms = driver.get_num_sms()
    tiles_m, tiles_n = T.ceildiv(M, block_M), T.ceildiv(N, block_N)
    waves = T.ceildiv(tiles_m * tiles_n, num_sms)

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(num_sms, threads=threads) as sm:
            a_s = T.alloc_shared((block_M, block_K), dtype)
            b_s = T.alloc_shared((block_K, block_N), dtype)
            c_s = T.alloc_shared((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            for w in T.serial(waves):
                tile = sm + w * num_sms
                tm = tile // tiles_n
                tn = tile % tiles_n
                if tm < tiles_m:
                    T.clear(acc)
                    for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                        T.copy(A[tm * block_M, ko * block_K], a_s)
                        T.copy(B[ko * block_K, tn * block_N], b_s)
                        T.gemm(a_s, b_s, acc)
                    T.copy(acc, c_s)
                    T.copy(c_s, C[tm * block_M, tn * block_N])

    return gemm
