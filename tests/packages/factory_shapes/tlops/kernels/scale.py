"""lru_cache over a module-level @tilelang.jit whose compile_flags -include the package's own header."""

import functools
import os

import tilelang
import tilelang.language as T

from .common import tl_dtype

_HELPERS = os.path.join(os.path.dirname(__file__), "include", "tlops_helpers.h")


@functools.lru_cache(maxsize=64)
@tilelang.jit(out_idx=[-1], compile_flags=["-include", _HELPERS], pass_configs={tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
def relu6_scale(n, factor, dtype="float32", block=256):
    dtype = tl_dtype(dtype)

    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                j = bx * block + i
                if j < n:
                    Y[j] = T.call_extern("float32", "tlops_relu6", X[j]) * factor

    return main


relu6_half = functools.partial(relu6_scale, factor=0.5)
