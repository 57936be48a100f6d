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
definition) changes nothing the function does. Code compiled without debug ranges (``python -X
no_debug_ranges``: no columns, and each end line is its instruction's first line, so a multi-line
string's last lines would be left out) or whose file no longer holds those lines gets '': such a
function is not keyed (the caller serves it by its traced prim_func instead).

Each code object is read once (its source cannot change: a reloaded module has new code objects).
"""

from __future__ import annotations

import hashlib
import inspect
import linecache
import time
import types
from dataclasses import dataclass
from functools import partial
from operator import is_not, itemgetter
from typing import Any

__all__ = ["code_source_digest", "code_span", "SourceReads", "source_reads"]

_LIMIT = 4096  # code objects remembered (a process spells a few hundred)
#: id(code object) -> (it, the digest of its span's text, '' when it has none); by identity: equal code objects of
#: two files are two entries, and hashing a code object would hash its constants, nested code included, on every lookup
_DIGESTS: dict[int, tuple[types.CodeType, str]] = {}
_end_line, _column = itemgetter(1), itemgetter(2)  # co_positions(): (line, end line, column, end column)
_known = partial(is_not, None)


@dataclass
class SourceReads:
    """Source files :func:`code_source_digest` read from disk (not yet in :mod:`linecache`), and their wall time.

    A served process reads each kernel file once, in the first lookup of a function defined in it:
    a served process's report shows this part of the lookups' time (per process, not per request).
    """

    files: int = 0
    seconds: float = 0.0


#: This process's :class:`SourceReads`.
source_reads = SourceReads()


def code_span(code: types.CodeType) -> tuple[int, int] | None:
    """``(first, last)`` line numbers of ``code``'s source (1-based, inclusive), None when its positions do not say.

    ``first`` is ``co_firstlineno``; ``last`` the greatest end line of any instruction of ``code``.
    The functions, classes, lambdas and comprehensions defined in it need not be read: the
    instructions that make them carry the whole definition's position (a ``def``'s ends with its
    body's last line), and everything they run lies within it. Reading only ``code``'s own
    positions is what makes a kernel factory cheap: its nested prim_func holds most of its
    instructions (TileOPs' factories: 43,000 positions in all, 9,000 of them their own).
    ``tests/unit/test_code_source.py`` checks the spans equal the walk over every nested code
    object, for every function of tl_aot. Before Python 3.11 code objects carry no end lines:
    ``last`` is then the end of the block ``inspect`` finds by tokenizing (it holds every line of
    code too).
    """
    if not hasattr(code, "co_positions"):  # Python < 3.11
        return _block_span(code)
    positions = list(code.co_positions())  # type: ignore[attr-defined,unused-ignore]
    if next(filter(_known, map(_column, positions)), None) is None:
        # no columns: compiled without debug ranges (-X no_debug_ranges, PYTHONNODEBUGRANGES), where each
        # instruction's end line is its first line, so a multi-line string's or call's last lines are not seen
        return None
    # None for an instruction with no location (a cache entry, generated code); dropped with filter
    last = max(filter(None, map(_end_line, positions)), default=0)
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
        if filename in linecache.cache:
            linecache.checkcache(filename)  # a file edited and reloaded since it was last read: read again
        if filename in linecache.cache:
            lines = linecache.getlines(filename, module_globals)
        else:  # read from disk now: counted
            t0 = time.perf_counter()
            lines = linecache.getlines(filename, module_globals)
            source_reads.files += 1
            source_reads.seconds += time.perf_counter() - t0
        first, last = span
        if len(lines) >= last:
            digest = hashlib.sha256("".join(lines[first - 1 : last]).encode()).hexdigest()[:16]
    if len(_DIGESTS) < _LIMIT:
        _DIGESTS[id(code)] = (code, digest)  # holds the code alive: its id is not reused while remembered
    return digest
