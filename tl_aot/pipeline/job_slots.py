"""A build's ``-j`` job slots: at most ``jobs`` tools at once, handed out by priority, then in the order asked.

Like make's jobserver, one budget for every kind of work (lowering, nvcc, host compiles). Unlike a
plain semaphore, a freed slot goes straight to the longest-waiting job of the most urgent kind:
a thread that frees a slot and asks again at once (a lowering worker's thread taking its next
variant) cannot take it back from a compile that was waiting, so compiles are never starved by
lowering that fills every slot, and the images keep pace with the lowered variants.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import heapq
import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["JobSlots", "COMPILE", "LOWER", "in_threads"]

#: Priorities, most urgent first: a compile (nvcc, the launcher) finishes variants that are already lowered.
COMPILE = 0
LOWER = 1


class JobSlots:
    """``jobs`` slots; :meth:`held` waits for one (``priority``: :data:`COMPILE` before :data:`LOWER`, then first come)."""

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, jobs)
        self._free = self.jobs
        self._lock = threading.Lock()
        self._waiting: list[tuple[int, int, threading.Event]] = []  # heap of (priority, ticket, wake-up)
        self._tickets = itertools.count()

    def acquire(self, priority: int = COMPILE) -> None:
        """Wait for a slot."""
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return
            wake = threading.Event()
            heapq.heappush(self._waiting, (priority, next(self._tickets), wake))
        wake.wait()  # the slot is handed over by release(): nobody can take it in between

    def release(self) -> None:
        """Give the slot to the most urgent waiting job, or back to the pool."""
        with self._lock:
            if self._waiting:
                heapq.heappop(self._waiting)[2].set()
            else:
                self._free += 1

    @contextlib.contextmanager
    def held(self, priority: int = COMPILE) -> Iterator[None]:
        """A slot for the duration of the ``with`` block."""
        self.acquire(priority)
        try:
            yield
        finally:
            self.release()


def in_threads(jobs: int) -> Callable[[Sequence[Callable[[], Any]]], list[Any]]:
    """A runner of independent jobs on at most ``jobs`` threads, results in order: where no build's slots are shared.

    What the launcher stage is given (:data:`tl_aot.pipeline.stages.Each`) where it runs alone:
    ``link`` of shards, the driver of a cluster build.
    """

    def each(work: Sequence[Callable[[], Any]]) -> list[Any]:
        if len(work) <= 1 or jobs <= 1:
            return [job() for job in work]
        with cf.ThreadPoolExecutor(max_workers=min(jobs, len(work))) as pool:
            return list(pool.map(lambda job: job(), work))

    return each
