"""Kernels in the shapes of a TileLang operator library (TileOPs): factories of ``@tilelang.jit`` kernels.

``header_scale`` passes ``compile_flags=["-include", TL_HEADER]``, a header nvcc finds only
through TileLang's include path (TileOPs' gated DeltaNet passes ``tl_templates/cuda/gemm.h``);
``lost_header`` names a header that is nowhere, which a capture cannot record. ``SCALE_FACTOR``
is read by ``scale``'s kernel: a test edits it to change one kernel between two captures.
``by_model`` chooses its kernel by the GPU's model, not its arch, as TileOPs chooses its H200-only
GQA kernel: an H100 and an H200 (both sm_90) ask for different kernels.
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


def shift_wide(n, dtype="float32"):
    """Y = X + 1, two elements a thread: what ``by_model`` runs on an H200."""

    @tilelang.jit(out_idx=[-1])
    def kernel(block=128):
        @T.prim_func
        def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
            with T.Kernel(T.ceildiv(n, 2 * block), threads=block) as bx:
                for i in T.Parallel(2 * block):
                    if bx * 2 * block + i < n:
                        Y[bx * 2 * block + i] = X[bx * 2 * block + i] + T.cast(1, dtype)

        return main

    return kernel


def by_model(n, dtype="float32"):
    """The Y = X + 1 kernel for this GPU's model: ``shift_wide`` on an H200, ``shift`` on any other GPU.

    Chosen by ``torch.cuda.get_device_name()``, as TileOPs chooses (``"H200" in`` the name): a library
    captured on an H100 holds ``shift`` only, and an H200 asks it for a kernel it never saw.
    """
    import torch

    h200 = torch.cuda.is_available() and "H200" in torch.cuda.get_device_name()
    return (shift_wide if h200 else shift)(n, dtype)


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
