"""Kernels whose tensor parameters are sub-byte (int4, float4_e2m1fn), as TileLang's int4 GEMM and fp4 examples declare them.

TileLang's JIT takes such a tensor packed: for 4-bit types any 8-bit storage (``torch.int8`` for
int4, ``torch.float4_e2m1fn_x2`` for fp4) with the last dim halved, and returns an output as
TileLang's JIT allocates it (``torch.int8[m, N / 2]`` for an int4 ``[m, N]``). tl_aot's launcher
binds them the same way (:mod:`tl_aot.common.subbyte`); ``subbyte.toml`` builds the four below,
``tests/integration/test_subbyte_cpu.py`` and ``tests/gpu/test_subbyte_gpu.py`` use it.
"""

import tilelang
import tilelang.language as T


def int4_copy(N=256):
    """``B[i] = A[i]`` over int4 elements: the simplest kernel whose parameters are sub-byte tensors."""

    @T.prim_func
    def main(A: T.Tensor((N,), "int4"), B: T.Tensor((N,), "int4")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(N):
                B[i] = A[i]

    return main


@tilelang.jit(out_idx=[-1])
def int4_rows(N=128, block_m=16):
    """An int4 ``[m, N]`` copied into a returned output: a dynamic row count and an allocated packed output."""
    m = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((m, N), "int4"), B: T.Tensor((m, N), "int4")):
        with T.Kernel(T.ceildiv(m, block_m), threads=128) as bx:
            for i, j in T.Parallel(block_m, N):
                if bx * block_m + i < m:
                    B[bx * block_m + i, j] = A[bx * block_m + i, j]

    return main


def int4_cols(M=16):
    """An int4 ``[M, n]`` copy whose dynamic dim is the packed one: ``n`` binds as twice the storage's last dim."""
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((M, n), "int4"), B: T.Tensor((M, n), "int4")):
        with T.Kernel(M, threads=32) as bx:
            for j in T.serial(n):  # serial: TileLang 0.1.15 cannot prove a vectorised int4 store aligned here
                B[bx, j] = A[bx, j]

    return main


def fp4_copy(M=64, N=128):
    """``B = A`` over float4_e2m1fn elements (the dtype of TileLang's fp4 GEMMs)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float4_e2m1fn"), B: T.Tensor((M, N), "float4_e2m1fn")):
        with T.Kernel(1, threads=128) as _:
            for i, j in T.Parallel(M, N):
                B[i, j] = A[i, j]

    return main
