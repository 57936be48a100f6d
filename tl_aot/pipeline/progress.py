"""A build's progress lines: ``[3/22 4.1 s, ~20 s left] lower gemm_bf16 sm_90a``, one per step, from any thread.

Every part of a build that finishes a step says so here (the scheduler, the stages, the cluster
driver, the link stage), so it stands on nothing of the pipeline: any of them may import it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Progress"]


class Progress:
    """``[3/22 4.1 s, ~20 s left] lower gemm_bf16 sm_90a``: one numbered line per step, from any thread."""

    def __init__(self, total: int, log: Callable[[str], object] | None) -> None:
        self.total = total
        self.n = 0
        self.log = log
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()

    def step(self, text: str) -> None:
        """One line: step count, time since the build started and, past a few steps, an estimate of what is left."""
        with self._lock:
            self.n += 1
            if self.log:
                elapsed = time.perf_counter() - self._t0
                left = elapsed / self.n * (self.total - self.n)
                eta = f", ~{left:.0f} s left" if self.n >= 3 and self.total - self.n > 1 else ""
                self.log(f"[{self.n}/{self.total} {elapsed:.1f} s{eta}] {text}")
