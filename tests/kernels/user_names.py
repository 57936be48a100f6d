"""Kernels with parameters named like the generated code's own identifiers, under the decorators users stack.

Every parameter name here is one the launcher (C++), the loader (Python) or TileLang's own host code
is tempted to use (``x``, ``stream``, ``NULL``, ``args``, ``self``, ``device``, ``out``, ``kernel``,
``tensor``, ``int``, ``float``, ``half``, ``rt``, ``tvm``, ``ffi``, ``main``), and one scalar shares
its name with a dynamic dimension. Each kernel takes two float16 tensors, a float16 scalar and an
int32 scalar and computes ``out = x * scale + shift`` elementwise: what changes is the spelling and
the decorators around it (a ``functools.wraps`` wrapper over ``@tilelang.jit(out_idx=...)`` over a
factory, ``@autotune`` over ``@tilelang.jit``, ``functools.wraps`` over ``functools.lru_cache``, a
``@T.prim_func`` returned from a closure with defaults).
"""

import functools

import tilelang
import tilelang.language as T
from tilelang.autotuner import autotune


def _logged(fn):
    """A pass-through wrapper as users write them (timing, logging), named after what it wraps by ``functools.wraps``."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


@_logged
@tilelang.jit(out_idx=[-1])
def jit_out(block=128):
    """A wrapper over ``@tilelang.jit(out_idx=[-1])`` over a factory: ``out`` returned, its length a dim also named ``out``."""
    length = T.dynamic("out")

    @T.prim_func
    def main(x: T.Tensor((length,), "float16"), half: T.float16, int: T.int32, out: T.Tensor((length,), "float16")):
        with T.Kernel(T.ceildiv(length, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < length:
                    out[bx * block + i] = x[bx * block + i] * half + T.cast(int, "float16")

    return main


@autotune(configs=[{"block": 64}, {"block": 128}], warmup=1, rep=1)
@tilelang.jit(out_idx=[1])
def tuned(n=256, block=128):
    """``@autotune`` over ``@tilelang.jit``: tensors ``NULL`` and ``self``, scalars ``float`` and ``rt``."""

    @T.prim_func
    def main(NULL: T.Tensor((n,), "float16"), self: T.Tensor((n,), "float16"), float: T.float16, rt: T.int32):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                self[bx * block + i] = NULL[bx * block + i] * float + T.cast(rt, "float16")

    return main


@_logged
@functools.lru_cache(maxsize=16)
def cached(block=128):
    """``functools.wraps`` over ``functools.lru_cache``: ``tvm`` in, ``ffi`` out, scalars ``kernel`` and ``device``; dim ``args``."""
    args = T.dynamic("args")

    @T.prim_func
    def main(tvm: T.Tensor((args,), "float16"), ffi: T.Tensor((args,), "float16"), kernel: T.float16, device: T.int32):
        with T.Kernel(T.ceildiv(args, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < args:
                    ffi[bx * block + i] = tvm[bx * block + i] * kernel + T.cast(device, "float16")

    return main


def _closure(block=128, dtype="float16"):
    """A ``@T.prim_func`` made in a closure whose defaults it reads: tensors ``tensor`` and ``main``, scalars ``stream``
    and ``n``, ``n`` also the name of the dim."""
    rows = T.dynamic("n")

    @T.prim_func
    def main(tensor: T.Tensor((rows,), dtype), main: T.Tensor((rows,), dtype), stream: T.float16, n: T.int32):
        with T.Kernel(T.ceildiv(rows, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < rows:
                    main[bx * block + i] = tensor[bx * block + i] * stream + T.cast(n, dtype)

    return main


closure_prim = _closure()
