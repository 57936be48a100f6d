"""Row softmax Y = softmax(X, dim=1) over a number of rows known only at run time."""

import tilelang.language as T


def softmax(N, dtype="float16", block_M=4, threads=128):
    M = T.dynamic("m")

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
