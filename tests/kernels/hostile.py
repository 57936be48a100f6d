"""Kernels with names and launch shapes a careful user might not expect to work (or to be refused)."""

import tilelang
import tilelang.language as T


def macro_names(dtype="float32", block=128):
    """Parameters, a dynamic dim, a scalar and locals named after C/C++ macros (NULL, EOF, SIZE_MAX, errno, INFINITY)."""
    EOF = T.dynamic("EOF")

    @T.prim_func
    def main(NULL: T.Tensor((EOF,), dtype), SIZE_MAX: T.Tensor((EOF,), dtype), errno: T.float32):
        with T.Kernel(T.ceildiv(EOF, block), threads=block) as bx:
            INFINITY = T.alloc_fragment((block,), dtype)
            stdout = T.alloc_shared((block,), dtype)
            for i in T.Parallel(block):
                stdout[i] = T.if_then_else(bx * block + i < EOF, NULL[bx * block + i], T.cast(0, dtype))
            for i in T.Parallel(block):
                INFINITY[i] = stdout[i] * errno
            for i in T.Parallel(block):
                if bx * block + i < EOF:
                    SIZE_MAX[bx * block + i] = INFINITY[i]

    return main


def shared(nbytes, threads=128):
    """A kernel holding ``nbytes`` of shared memory (float32 elements)."""
    n = nbytes // 4

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            S = T.alloc_shared((n,), "float32")
            T.copy(X, S)
            T.copy(S, Y)

    return main


def launch(gx=1, gy=1, gz=1, threads=128, cluster=None):
    """An empty-ish kernel launched on a (gx, gy, gz) grid of ``threads`` threads, optionally in clusters."""
    from tl_aot.common.tilelang_compat import cluster_kernel

    def kernel():
        if cluster:  # the spelling every supported TileLang release accepts
            return cluster_kernel(gx, gy, gz, threads=threads, cluster_dims=cluster)
        return T.Kernel(gx, gy, gz, threads=threads)

    @T.prim_func
    def main(Y: T.Tensor((4,), "int32")):
        with kernel() as (bx, by, bz):
            if bx == 0 and by == 0 and bz == 0:
                for i in T.serial(4):
                    Y[i] = i

    return main


def unicode_names(block=128):
    """Parameters with non-ASCII names: TileLang takes them, tl_aot's C++ cannot spell them (refused, naming the fix)."""
    n = T.dynamic("n")

    @T.prim_func
    def main(ядро: T.Tensor((n,), "float32"), núcleo: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    núcleo[bx * block + i] = ядро[bx * block + i]

    return main


@tilelang.jit(out_idx=-1)
def jit_last_out(n: int = 256, block: int = 128):
    """``out_idx=-1``, a bare index, as TileLang's examples spell it: the last parameter is returned."""

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i]

    return main


class Ops:
    """Kernels grouped in a class, as operator libraries write them: reached as ``hostile.py:Ops.<method>``."""

    scale = 3.0

    @staticmethod
    @tilelang.jit(out_idx=-1)
    def doubled(n: int = 256, block: int = 128):
        """``@staticmethod`` over ``@tilelang.jit``."""

        @T.prim_func
        def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
                for i in T.Parallel(block):
                    Y[bx * block + i] = X[bx * block + i] * 2.0

        return main

    @classmethod
    @tilelang.jit(out_idx=-1)
    def scaled(cls, n: int = 256, block: int = 128):
        """``@classmethod`` over ``@tilelang.jit``: the class is its first argument (``cls.scale``)."""

        @T.prim_func
        def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
                for i in T.Parallel(block):
                    Y[bx * block + i] = X[bx * block + i] * cls.scale

        return main
