"""Ops registered by name; the kernel factories live beside them."""

import tilelang.language as T

from ..registry import register


@register("negate")
def negate(n, dtype):
    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < n:
                    Y[bx * 128 + i] = -X[bx * 128 + i]

    return main
