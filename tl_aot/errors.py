"""The public home of tl_aot's error types: catch these by this path (or as ``tl_aot.<Name>``).

Every error tl_aot raises on purpose is a :class:`TlAotError`; the subclasses say which stage
failed and carry ``entry``, ``arch`` and ``location`` as fields. This path is kept stable across
refactors (the classes live in ``tl_aot/common/errors.py`` and name this module as theirs), and
importing it loads nothing else of tl_aot::

    import tl_aot

    try:
        lib = tl_aot.load("build/libgemm.so")
    except tl_aot.errors.LibraryError as e:  # also: except tl_aot.LibraryError
        ...

The setuptools command's own errors subclass these too (``TileLangExtensionError`` is a
:class:`CompileError`, ``TileLangDeclarationError`` a :class:`SpecError`).
"""

from __future__ import annotations

from .common.errors import (
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
