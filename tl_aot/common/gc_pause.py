"""Python's cyclic garbage collector held off while a bulk of acyclic objects is made: a library's index loaded.

Parsing a 2,000-entry manifest index makes ~10^5 dicts, lists, tuples and strings. The collector
runs every 700 allocations and, every hundred runs or so, walks every object the process holds
(torch alone holds ~10^6): on the CPU machine 80 of the 110 ms that ``tl_aot.load`` took in a
process that had imported torch (``bench/load_scale.py``, ``load_cold_gc_ms``). What loading makes
holds no reference cycles, so the collector finds nothing there; held off, the new objects are
looked at once, young, the next time it runs.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Meanwhile the cyclic collector does not run; it is enabled again after, unless it was off before (nested, or the user's)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
