"""New-style ``@tilelang.jit``: sizes from ``T.const``, tensors as arguments, the output from ``T.empty``."""

import tilelang
import tilelang.language as T
from tilelang.autotuner import autotune


@tilelang.jit
def gemm(A, B, block_M: int = 128, block_N: int = 128, block_K: int = 64, stages: int = 3):
    M, N, K = T.const("M N K")
    dtype = T.float16
    A: T.Tensor[[M, K], dtype]
    B: T.Tensor[[K, N], dtype]
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        a_s = T.alloc_shared((block_M, block_K), dtype)
        b_s = T.alloc_shared((block_K, block_N), dtype)
        acc = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(acc)
        for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
            T.copy(A[by * block_M, ko * block_K], a_s)
            T.copy(B[ko * block_K, bx * block_N], b_s)
            T.gemm(a_s, b_s, acc)
        T.copy(acc, C[by * block_M, bx * block_N])
    return C


@autotune(configs=[{"block": b, "threads": t} for b, t in [(1, 128), (2, 128), (4, 256), (8, 256)]], warmup=5, rep=10)
@tilelang.jit
def row_scale(x, w, block: int = 1, threads: int = 128):
    """Eager style under ``@autotune``: tensors as arguments, ``y = x * w`` per row, ``T.empty`` output."""
    M, N = T.const("M N")
    x: T.Tensor[[M, N], T.float16]
    w: T.Tensor[[N], T.float16]
    y = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(M, block), threads=threads) as bx:
        for i, j in T.Parallel(block, N):
            y[bx * block + i, j] = x[bx * block + i, j] * w[j]
    return y
