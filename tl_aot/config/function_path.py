"""The function an entry names: ``matmul``, or a method of a class in the kernel file, ``Ops.matmul``.

Operator libraries group kernels in classes (``@staticmethod`` over ``@tilelang.jit``, a
``@classmethod`` factory); an entry reaches them as ``FILE.py:Class.method`` on the command line or
``function = "Class.method"`` in a spec. The path is looked up attribute by attribute, as Python
would, so a classmethod comes bound to its class and a staticmethod as the function it wraps.
"""

from __future__ import annotations

import keyword
from typing import Any

__all__ = ["is_function_path", "function_leaf", "lookup_function", "NOT_FOUND"]

#: What :func:`lookup_function` returns when a name on the path is missing.
NOT_FOUND: Any = object()


def is_function_path(text: object) -> bool:
    """Whether ``text`` is a Python name or dotted names (``gemm``, ``Ops.gemm``), none of them a keyword."""
    if not isinstance(text, str) or not text:
        return False
    return all(part.isidentifier() and not keyword.iskeyword(part) for part in text.split("."))


def function_leaf(path: str) -> str:
    """The last name of ``path``: ``Ops.gemm`` -> ``gemm`` (the default entry name of ``FILE.py:Ops.gemm``)."""
    return path.rpartition(".")[2]


def lookup_function(module: Any, path: str) -> Any:
    """``module.<path>`` read attribute by attribute, else :data:`NOT_FOUND`."""
    obj = module
    for part in path.split("."):
        obj = getattr(obj, part, NOT_FOUND)
        if obj is NOT_FOUND:
            return NOT_FOUND
    return obj
