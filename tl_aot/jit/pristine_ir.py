"""A prim_func's TVM JSON as this process first saw it: what request keys and capture records are made of.

TileLang's lowering renames the caller's variables **in place**. Its instruction generators written
in Python (the MMA macros of the sm_80/86/89 GEMMs, among others) bind the kernel's own thread
variable to a Python name (``thread_binding = self.get_thread_binding()``), and TileLang's eager
builder names whatever a Python name is bound to (``IRBuilder.name``: it sets ``Var.name_hint`` /
``Buffer.name`` on the object itself). The function being lowered shares its unchanged variables
with the prim_func it came from, and ``@tilelang.jit`` hands out the same prim_func object for the
same arguments. So a GEMM lowered once for sm_80 saves differently afterwards (its ``tx`` became
``thread_binding``), and its request key depended on what the process had lowered before: a build
whose lowering processes took the variants in another order (a Dask cluster, another ``-j``) keyed
one variant differently, and a served program would have missed it.

:func:`pristine_ir` is the prim_func saved the first time this process asks for it (before anything
lowers it: the JIT seam sees a request before TileLang compiles it, the build keys a variant before
lowering it) and the same text for that object ever after. The memo holds each prim_func alive, so
its address is never reused while remembered; it is bounded, oldest forgotten first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from .ir_record import save_ir

__all__ = ["pristine_ir", "LIMIT"]

LIMIT = 1024  # prim_funcs remembered (a build's lowering process sees one per variant it lowers)

_memo: OrderedDict = OrderedDict()  # address of the prim_func -> (prim_func, its TVM JSON when first seen)
_lock = threading.Lock()


def _address(func) -> int:
    handle = getattr(func, "__chandle__", None)
    return int(handle()) if callable(handle) else id(func)


def pristine_ir(func) -> str:
    """``func`` as TVM JSON, as it was the first time this process saved it here (TileLang's later renaming ignored)."""
    at = _address(func)
    with _lock:
        have = _memo.get(at)
        if have is not None and have[0].same_as(func):
            _memo.move_to_end(at)
            return have[1]
    text = save_ir(func)
    with _lock:
        have = _memo.get(at)
        if have is not None and have[0].same_as(func):  # another thread saved it first: its text stands
            return have[1]
        _memo[at] = (func, text)
        while len(_memo) > LIMIT:
            _memo.popitem(last=False)
    return text
