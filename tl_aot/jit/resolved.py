"""What the build lowers for one variant: a prim_func and the options TileLang's JIT would compile it with.

Made by :func:`tl_aot.jit.resolve.resolve_kernel` from the user's factory, or by
:func:`tl_aot.jit.captured.resolve_captured` from a capture record; read by :mod:`tl_aot.lower.lower`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Resolved"]


@dataclass(frozen=True)
class Resolved:
    """What the build lowers for one variant: the prim_func and the options it is compiled with."""

    func: object
    pass_configs: dict
    compile_flags: tuple
    out_idx: object  # the kernel's own (None: no returned outputs declared)
    choice: object  # autotune.Choice or None
    path: str  # how it was reached, e.g. "make_gemm(M=1024) -> kernel(block_m=128)"
    execution_backend: object = None  # the request's, as the library passed it
    target: object = None
    captured: object = None  # a captured kernel's record item (its device code digests are checked after lowering)
    stale: bool = False  # a stand-in from an earlier build step came back (a cache in user code): import afresh
