"""Operators built as several specialisations of one entry (tests/kernels/specialised.toml).

Written as a library author writes them for TileLang's JIT: ``@tilelang.jit(out_idx=[-1])``
factories whose static sizes and dtype are arguments, with a dynamic-shape variant of the GEMM.
"""

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def gemm(N=None, K=None, block_M=128, block_N=128, block_K=64, stages=3, dtype="float16"):
    """C = A @ B with a dynamic row count; ``N`` / ``K`` None make those dynamic too (the fallback)."""
    m = T.dynamic("m")
    n = T.dynamic("n") if N is None else N
    k = T.dynamic("k") if K is None else K

    @T.prim_func
    def main(A: T.Tensor((m, k), dtype), B: T.Tensor((k, n), dtype), C: T.Tensor((m, n), dtype)):
        with T.Kernel(T.ceildiv(n, block_N), T.ceildiv(m, block_M), threads=128) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), dtype)
            b_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(k, block_K), num_stages=stages):
                T.copy(A[by * block_M, ko * block_K], a_s)
                T.copy(B[ko * block_K, bx * block_N], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[-1])
def rms_norm(N, eps=1e-6, threads=256, dtype="float16"):
    """y = x / rms(x) * w per row; one block per row, the hidden size ``N`` static."""
    m = T.dynamic("m")

    @T.prim_func
    def main(x: T.Tensor((m, N), dtype), w: T.Tensor((N,), dtype), y: T.Tensor((m, N), dtype)):
        with T.Kernel(m, threads=threads) as row:
            xs = T.alloc_fragment((N,), "float32")
            sq = T.alloc_fragment((N,), "float32")
            ss = T.alloc_fragment((1,), "float32")
            T.copy(x[row, 0:N], xs)
            for j in T.Parallel(N):
                sq[j] = xs[j] * xs[j]
            T.reduce_sum(sq, ss, dim=0)
            for j in T.Parallel(N):
                y[row, j] = T.cast(xs[j] * T.rsqrt(ss[0] / N + eps) * T.cast(w[j], "float32"), dtype)

    return main
