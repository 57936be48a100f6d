"""tl_aot: ahead-of-time TileLang kernels in self-contained TVM-FFI shared libraries.

Importing this package is cheap: the build pipeline (TileLang, nvcc) loads only when a build runs,
and :func:`load` needs only ``apache-tvm-ffi``. The error types are here too (``tl_aot.LibraryError``,
...), and in :mod:`tl_aot.errors`, their stable home.
"""

from __future__ import annotations

from . import errors
from .common.versions import __version__
from .errors import (
    ClusterError,
    CompileError,
    FailedProcessError,
    FilesystemError,
    KernelNotServed,
    LibraryError,
    LoweringError,
    PartError,
    SpecError,
    TlAotError,
    ToolchainNotFound,
    ToolsetMismatch,
    WheelCheckError,
)

__all__ = [
    "__version__",
    "load",
    "Library",
    "serve",
    "errors",
    # the error types (tl_aot.errors.__all__, kept equal by tests/unit/test_public_errors.py)
    "TlAotError",
    "SpecError",
    "LoweringError",
    "CompileError",
    "FailedProcessError",
    "ToolchainNotFound",
    "LibraryError",
    "FilesystemError",
    "KernelNotServed",
    "ClusterError",
    "ToolsetMismatch",
    "PartError",
    "WheelCheckError",
]


def __getattr__(name: str):
    if name in ("load", "Library"):
        from .runtime import loader as runtime

        return getattr(runtime, name)
    if name == "serve":
        from .serving.active import serve

        return serve
    raise AttributeError(f"module 'tl_aot' has no attribute {name!r}")
