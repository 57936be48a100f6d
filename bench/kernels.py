"""The TileLang kernels of the benchmark suite.

Plain TileLang, no tl_aot import: ``build_libs.py`` builds these factories ahead of time with
tl_aot, and ``run.py`` compiles the very same factories with TileLang's JIT as the anchor, so any
device-time gap between the two is a launcher difference, never a code difference.
"""

import tilelang.language as T


def add_one(N=1024, dtype="float32", block=256):
    """Y = X + 1 over ``N`` elements: the launch-overhead kernel (the GPU work is negligible)."""

    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] + T.cast(1, dtype)

    return main


def matmul(
    M, N, K, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256, rasterize=True, dtype="float16", accum_dtype="float32"
):
    """C = A @ B, all row-major (A: M×K, B: K×N), the H100 configuration of TileLang's GEMM examples.

    128×256×64 tiles, 3 pipeline stages, 256 threads (two warpgroups of wgmma), TMA loads, the
    epilogue staged through shared memory and block rasterisation (``T.use_swizzle``) for L2 reuse.
    """

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            C_shared = T.alloc_shared((block_M, block_N), dtype)
            T.use_swizzle(panel_size=10, enable=rasterize)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return main


def softmax(M, N, dtype="float16", block_M=4, threads=128):
    """Row softmax of an M×N matrix, ``block_M`` rows per CTA, computed in float32."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            xs = T.alloc_fragment((block_M, N), "float32")
            mx = T.alloc_fragment((block_M,), "float32")
            sm = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], xs)
            T.reduce_max(xs, mx, dim=1)
            for i, j in T.Parallel(block_M, N):
                xs[i, j] = T.exp(xs[i, j] - mx[i])
            T.reduce_sum(xs, sm, dim=1)
            for i, j in T.Parallel(block_M, N):
                xs[i, j] = xs[i, j] / sm[i]
            T.copy(xs, Y[bx * block_M, 0])

    return main
