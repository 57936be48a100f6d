"""Kernels in the shapes of a TileLang operator library (TileOPs): factories of ``@tilelang.jit`` kernels.

``header_scale`` passes ``compile_flags=["-include", TL_HEADER]``, a header nvcc finds only
through TileLang's include path (TileOPs' gated DeltaNet passes ``tl_templates/cuda/gemm.h``);
``lost_header`` names a header that is nowhere, which a capture cannot record. ``SCALE_FACTOR``
is read by ``scale``'s kernel: a test edits it to change one kernel between two captures.
"""

import tilelang
import tilelang.language as T

#: On TileLang's include path in every release tl_aot supports (not in the working directory).
TL_HEADER = "tl_templates/cuda/common.h"
SCALE_FACTOR = 2.0


def scale(n, dtype="float32"):
    """Y = X * SCALE_FACTOR."""

    @tilelang.jit(out_idx=[-1])
    def kernel(block=128):
        @T.prim_func
        def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
            with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
                for i in T.Parallel(block):
                    if bx * block + i < n:
                        Y[bx * block + i] = X[bx * block + i] * SCALE_FACTOR

        return main

    return kernel


def shift(n, dtype="float32"):
    """Y = X + 1."""

    @tilelang.jit(out_idx=[-1])
    def kernel(block=128):
        @T.prim_func
        def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
            with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
                for i in T.Parallel(block):
                    if bx * block + i < n:
                        Y[bx * block + i] = X[bx * block + i] + T.cast(1, dtype)

        return main

    return kernel


def header_scale(n, dtype="float32"):
    """Y = -X, compiled with a header from TileLang's include path pre-included."""

    @tilelang.jit(out_idx=[-1], compile_flags=["-include", TL_HEADER])
    def kernel(block=128):
        @T.prim_func
        def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
            with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
                for i in T.Parallel(block):
                    if bx * block + i < n:
                        Y[bx * block + i] = -X[bx * block + i]

        return main

    return kernel


def lost_header(n, dtype="float32"):
    """A kernel whose compile flags name a header found nowhere: nvcc could not compile it, a capture cannot record it."""

    @tilelang.jit(out_idx=[-1], compile_flags=["-include", "tl_aot_test_no_such_header.h"])
    def kernel(block=128):
        @T.prim_func
        def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
            with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
                for i in T.Parallel(block):
                    if bx * block + i < n:
                        Y[bx * block + i] = X[bx * block + i] * X[bx * block + i]

        return main

    return kernel
