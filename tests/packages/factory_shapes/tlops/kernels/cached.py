"""A public factory over a private lru_cache'd helper that returns the compiled kernel."""

import functools

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def _fill(n, value, block=128):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Y[bx * block + i] = X[bx * block + i] * T.float32(0) + value

    return main


@functools.lru_cache(maxsize=16)
def _compiled(n, value):
    return _fill(n, value)


def fill_like(n, value=1.5):
    return _compiled(n, value)
