"""Parameter names that collide with C++ keywords and with the identifiers a launcher is tempted
to use (``x``, ``stream``, ``new``, ...): every one is a valid TileLang name."""

import tilelang.language as T


def hostile(N=4096, block=256):
    @T.prim_func
    def main(
        x: T.Tensor((N,), "float32"),
        X: T.Tensor((N,), "float32"),
        stream: T.Tensor((N,), "float32"),
        new: T.Tensor((N,), "float32"),
        this: T.Tensor((N,), "float32"),
        result: T.Tensor((N,), "float32"),
        args: T.Tensor((N,), "float32"),
        a: T.Tensor((N,), "float32"),
        t: T.Tensor((N,), "float32"),
        device: T.Tensor((N,), "float32"),
        entry: T.Tensor((N,), "float32"),
        has_stream: T.Tensor((N,), "float32"),
        delete: T.float32,
        default: T.float32,
        register: T.int32,
        int: T.int32,
    ):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                j = bx * block + i
                result[j] = (
                    x[j]
                    + X[j] * delete
                    + stream[j]
                    + new[j]
                    + this[j]
                    + args[j]
                    + a[j]
                    + t[j]
                    + device[j]
                    + entry[j]
                    + has_stream[j] * default
                    + register
                    + int
                )

    return main


def rms_norm(M, N, eps=1e-6, block_M=4, threads=128, dtype="float16"):
    """The usual norm spelling: input ``x``, weight ``w``, output ``y``."""

    @T.prim_func
    def norm(x: T.Tensor((M, N), dtype), w: T.Tensor((N,), dtype), y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            xs = T.alloc_shared((block_M, N), dtype)
            xf = T.alloc_fragment((block_M, N), "float32")
            sq = T.alloc_fragment((block_M, N), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            T.copy(x[bx * block_M, 0], xs)
            T.copy(xs, xf)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = xf[i, j] * xf[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                xf[i, j] = xf[i, j] * ss[i] * w[j]
            T.copy(xf, y[bx * block_M, 0])

    return norm
