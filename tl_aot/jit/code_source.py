"""The digest of a function's source, read off its code object: what a call key names the function's code by.

``inspect.getsource`` finds where a function ends by tokenizing its text (``inspect.getblock``):
1.3 ms on average for the first key of each of TileOPs' kernel functions, and most of a served
lookup's time in a test process, where most functions are called a few times. The code object
already says which lines it came from: it starts at ``co_firstlineno`` (its first decorator's line)
and every instruction, of it and of the functions, classes and comprehensions defined in it, has a
source position whose end line is at most the function's last line of code. The digest is of
those lines, from the file's text as :mod:`linecache` holds it (each file read once).

Every line holding something the function runs is in the span, so an edit that changes what it
runs changes the digest. What lies outside (trailing comments, a blank line, the next
definition) changes nothing the function does. A process whose code objects carry no end
positions (``python -X no_debug_ranges``) or whose file no longer holds those lines gets '':
such a function is not keyed (the caller serves it by its traced prim_func instead).

Each code object is read once (its source cannot change: a reloaded module has new code objects).
"""

from __future__ import annotations

import hashlib
import inspect
import linecache
import types
from operator import itemgetter
from typing import Any

__all__ = ["code_source_digest", "code_span"]

_LIMIT = 4096  # code objects remembered (a process spells a few hundred)
#: id(code object) -> (it, the digest of its span's text, '' when it has none); by identity: equal code objects of
#: two files are two entries, and hashing a code object would hash its constants, nested code included, on every lookup
_DIGESTS: dict[int, tuple[types.CodeType, str]] = {}
_end_line = itemgetter(1)  # co_positions(): (line, end line, column, end column)


def code_span(code: types.CodeType) -> tuple[int, int] | None:
    """``(first, last)`` line numbers of ``code``'s source (1-based, inclusive), None when its positions do not say.

    ``first`` is ``co_firstlineno``; ``last`` the greatest end line of any instruction of ``code`` or
    of a code object defined in it. Before Python 3.11 code objects carry no end lines: ``last`` is
    then the end of the block ``inspect`` finds by tokenizing (it holds every line of code too).
    """
    if not hasattr(code, "co_positions"):  # Python < 3.11
        return _block_span(code)
    last = 0
    stack = [code]
    while stack:
        c = stack.pop()
        ends = set(map(_end_line, c.co_positions()))  # type: ignore[attr-defined,unused-ignore]
        ends.discard(None)  # an instruction with no location (a cache entry, generated code)
        if not ends and c.co_code:
            return None  # no end positions at all (-X no_debug_ranges): the span cannot be known
        if ends:
            last = max(last, max(ends))
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    first = code.co_firstlineno
    return (first, last) if last >= first else None


def _block_span(code: types.CodeType) -> tuple[int, int] | None:
    try:
        block, start = inspect.getsourcelines(code)
    except (OSError, TypeError, IndexError):
        return None
    return (code.co_firstlineno, start + len(block) - 1) if block else None


def code_source_digest(code: types.CodeType, module_globals: dict[str, Any] | None = None) -> str:
    """16 hex digits of the SHA-256 of ``code``'s source lines (:func:`code_span`), '' when they cannot be read."""
    have = _DIGESTS.get(id(code))
    if have is not None and have[0] is code:
        return have[1]
    digest = ""
    span = code_span(code)
    if span is not None:
        filename = code.co_filename
        linecache.checkcache(filename)  # a file edited and reloaded since it was last read: read again
        lines = linecache.getlines(filename, module_globals)
        first, last = span
        if len(lines) >= last:
            digest = hashlib.sha256("".join(lines[first - 1 : last]).encode()).hexdigest()[:16]
    if len(_DIGESTS) < _LIMIT:
        _DIGESTS[id(code)] = (code, digest)  # holds the code alive: its id is not reused while remembered
    return digest
