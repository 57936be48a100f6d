"""A kernel with a sub-byte (int4) tensor parameter, which tl_aot's launchers cannot check.

TileLang's newer releases bind such a tensor from int8 storage with the last dim halved; tl_aot's
launcher checks a tensor's DLPack dtype, shape and strides element for element, so it refuses the
parameter. Built beside other entries with ``--keep-going``, this one entry is left out while lowering
and the rest ships (TileLang's int4 GEMM example met it: ``tests/integration/test_subbyte_cpu.py``).
"""

import tilelang.language as T


def int4_copy(N=256):
    """``B[i] = A[i]`` over int4 elements: the simplest kernel whose parameters are sub-byte tensors."""

    @T.prim_func
    def main(A: T.Tensor((N,), "int4"), B: T.Tensor((N,), "int4")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(N):
                B[i] = A[i]

    return main
