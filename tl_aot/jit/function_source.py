"""A user's function as the keys of its calls and tunings name it: the function behind TileLang's wrapper, its source's digest.

Tuning keys (:mod:`tl_aot.jit.tuning`) and call keys (:mod:`tl_aot.jit.call_key`) both name the function
a kernel comes from by its source, so an edited function is a miss, never another kernel.
"""

from __future__ import annotations

import hashlib
import inspect

__all__ = ["user_function", "source_digest"]


def user_function(fn):
    """The user's Python function behind ``fn`` (a ``@tilelang.jit`` body, a tuner's ``fn``, or a plain factory)."""
    return getattr(fn, "orig_func", None) or fn


def source_digest(fn) -> str:
    """16 hex digits of the SHA-256 of ``fn``'s source ('' when it has none)."""
    try:
        return hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()[:16]
    except (OSError, TypeError):
        return ""
