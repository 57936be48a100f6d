"""tl_aot: ahead-of-time TileLang kernels in self-contained TVM-FFI shared libraries.

Importing this package is cheap: the build pipeline (TileLang, nvcc) loads only when a build runs,
and :func:`load` needs only ``apache-tvm-ffi``.
"""

from __future__ import annotations

from .common.versions import __version__

__all__ = ["__version__", "load", "Library", "serve"]


def __getattr__(name: str):
    if name in ("load", "Library"):
        from .runtime import loader as runtime

        return getattr(runtime, name)
    if name == "serve":
        from .serving.server import serve

        return serve
    raise AttributeError(f"module 'tl_aot' has no attribute {name!r}")
