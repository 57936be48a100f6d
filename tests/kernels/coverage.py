"""Kernels whose launch needs host expressions beyond plain dims, and kernels that only write outputs.

Dims TileLang solves: ``pair_sum`` (``n * 2``), ``stencil3`` (``n + 2``: a halo), ``paged_gather``
(a paged KV cache ``(num_pages * page_size, heads, dim)`` with a static page size).
``paged_two_dynamic``: both factors of that product dynamic, which TileLang cannot bind (a build error).
Bit operations in launch bounds: ``tile_copy`` (a shifted grid, dynamic shared memory ``1 << log_tile``).
Every tensor an output: ``alibi_slopes`` and ``sinusoidal`` (static shapes), ``arange`` (its length a
scalar argument, bound by ``T.match_buffer`` as TileLang's JIT binds it).
Names TileLang's builder gives: ``gated_scale`` (``alpha = alpha_lo`` in the body renames both scalar
parameters ``alpha``, as TileOPs' mHC kernels do), ``two_lengths`` (two ``T.dynamic("n")``: two symbols
of one name, which TileLang's JIT binds apart), ``sized_by_its_name`` (``X`` sized by ``T.dynamic("X")``:
a symbol named like its tensor, numbered ``X_1`` as TileLang's CUDA names it).
"""

import tilelang.language as T


def pair_sum(block=128):
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n * 2,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                j = bx * block + i
                if j < n:
                    Y[j] = X[j * 2] + X[j * 2 + 1]

    return main


def stencil3(block=128):
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n + 2,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                j = bx * block + i
                if j < n:
                    Y[j] = X[j] + X[j + 1] + X[j + 2]

    return main


def paged_gather(heads=4, dim=64, page_size=16, dtype="float16"):
    num_pages, batch, max_pages = T.dynamic("num_pages"), T.dynamic("batch"), T.dynamic("max_pages")

    @T.prim_func
    def main(
        K: T.Tensor((num_pages * page_size, heads, dim), dtype),
        table: T.Tensor((batch, max_pages), "int32"),
        out: T.Tensor((batch, max_pages * page_size, heads, dim), dtype),
    ):
        with T.Kernel(max_pages, batch, threads=128) as (p, b):
            page = table[b, p]
            for t, h, d in T.Parallel(page_size, heads, dim):
                out[b, p * page_size + t, h, d] = K[page * page_size + t, h, d]

    return main


def paged_two_dynamic(heads=4, dim=64, dtype="float16"):
    num_pages, page_size = T.dynamic("num_pages"), T.dynamic("page_size")

    @T.prim_func
    def main(K: T.Tensor((num_pages * page_size, heads, dim), dtype), V: T.Tensor((num_pages * page_size, heads, dim), dtype)):
        with T.Kernel(T.ceildiv(num_pages * page_size, 128), threads=128) as bx:
            for i, h, d in T.Parallel(128, heads, dim):
                r = bx * 128 + i
                if r < num_pages * page_size:
                    V[r, h, d] = K[r, h, d]

    return main


def tile_copy(block=128):
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32"), log_tile: T.int32):
        with T.Kernel(T.shift_right(n + (block - 1), 7), threads=block) as bx:
            tile = T.alloc_shared((T.shift_left(1, log_tile),), "float32")
            for i in T.Parallel(block):
                j = bx * block + i
                if j < n:
                    tile[T.bitwise_and(i, T.shift_left(1, log_tile) - 1)] = X[j]
                    Y[j] = tile[T.bitwise_and(i, T.shift_left(1, log_tile) - 1)] * 2.0

    return main


def alibi_slopes(heads=8):
    @T.prim_func
    def main(slopes: T.Tensor((heads,), "float32")):
        with T.Kernel(1, threads=32) as _:
            for h in T.Parallel(heads):
                slopes[h] = T.exp2(T.cast(h + 1, "float32") * (-8.0 / heads))

    return main


def sinusoidal(seq=64, dim=32):
    half = dim // 2

    @T.prim_func
    def main(table: T.Tensor((seq, dim), "float32")):
        with T.Kernel(seq, threads=32) as pos:
            for i in T.Parallel(half):
                angle = T.cast(pos, "float32") * T.exp2(T.cast(i, "float32") * (-13.287712379549449 / half))
                table[pos, i] = T.sin(angle)
                table[pos, i + half] = T.cos(angle)

    return main


def arange(block=128):
    @T.prim_func
    def main(out_handle: T.handle, n: T.int32, start: T.int32, step: T.int32):
        out = T.match_buffer(out_handle, (n,), "int32")
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                j = bx * block + i
                if j < n:
                    out[j] = start + j * step

    return main


def gated_scale(block=128, split=64):
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), alpha_lo: T.float32, alpha_hi: T.float32, Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                j = bx * block + i
                if j < n:
                    if i < split:
                        alpha = alpha_lo
                        Y[j] = X[j] * alpha
                    else:
                        alpha = alpha_hi
                        Y[j] = X[j] * alpha

    return main


def two_lengths(block=128):
    @T.prim_func
    def main(X: T.Tensor((T.dynamic("n"),), "float32"), Y: T.Tensor((T.dynamic("n"),), "float32")):
        with T.Kernel(1, threads=block) as _:
            for i in T.Parallel(block):
                if i < X.shape[0]:
                    if i < Y.shape[0]:
                        Y[i] = X[i] * 2.0

    return main


def sized_by_its_name(block=128):
    """``X`` sized by ``T.dynamic("X")``: a symbol and a tensor of one name, which TileLang's JIT binds apart."""
    length = T.dynamic("X")

    @T.prim_func
    def main(X: T.Tensor((length,), "float32"), Y: T.Tensor((length,), "float32")):
        with T.Kernel(T.ceildiv(length, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < length:
                    Y[bx * block + i] = X[bx * block + i] + 1.0

    return main
