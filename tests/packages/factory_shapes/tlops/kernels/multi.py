"""One factory returns several jit functions: forward and backward of an activation."""

import tilelang
import tilelang.language as T

from .common import Act, Problem, tl_dtype


def activation(shape: Problem, dtype, act=Act.RELU, block=128):
    dtype = tl_dtype(dtype)
    rows, cols = shape

    def apply(x):
        return T.max(x, T.cast(0, dtype)) if act is Act.RELU else x

    @tilelang.jit(out_idx=[-1])
    def fwd(threads=block):
        @T.prim_func
        def main(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), dtype)):
            with T.Kernel(rows, threads=threads) as bx:
                for j in T.Parallel(cols):
                    Y[bx, j] = apply(X[bx, j])

        return main

    @tilelang.jit(out_idx=[-1])
    def bwd(threads=block):
        @T.prim_func
        def main(X: T.Tensor((rows, cols), dtype), G: T.Tensor((rows, cols), dtype), D: T.Tensor((rows, cols), dtype)):
            with T.Kernel(rows, threads=threads) as bx:
                for j in T.Parallel(cols):
                    D[bx, j] = T.if_then_else(X[bx, j] > T.cast(0, dtype), G[bx, j], T.cast(0, dtype))

        return main

    return {"fwd": fwd, "bwd": bwd}


def activation_pair(shape: Problem, dtype):
    kernels = activation(shape, dtype)
    return kernels["fwd"], kernels["bwd"]
