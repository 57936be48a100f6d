"""What a Dask worker runs for a tl_aot build: one :class:`~tl_aot.pipeline.variant_task.VariantTask` per call.

TileLang is not thread safe and a Dask worker runs tasks in threads, so lowering goes to a pool of
lowering processes (:class:`~tl_aot.lower.lower_worker.LoweringPool`), one per worker thread, started on
the first task and kept for the worker's life: later builds pay no ``import tilelang``. nvcc runs
from the task's thread. A worker killed mid-task leaves nothing behind that a build reads (its
lowering processes end when their pipe closes; its nvcc dies with it under the reaper).
"""

from __future__ import annotations

import atexit
import threading

from .variant_task import VariantResult, VariantTask, build_variant_task

__all__ = ["run_task"]

_POOL = None
_POOL_LOCK = threading.Lock()


def _pool(size: int):
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            from ..lower.lower_worker import LoweringPool

            _POOL = LoweringPool(size)
            atexit.register(_POOL.close)
        return _POOL


def _worker() -> tuple[str, int]:
    """The address and thread count of the worker running this (``("", 1)`` outside a Dask worker)."""
    try:
        from distributed import get_worker

        w = get_worker()
        return w.address, int(getattr(w.state, "nthreads", 0) or getattr(w, "nthreads", 1) or 1)
    except (ImportError, ValueError, AttributeError):
        return "", 1


def run_task(task: VariantTask) -> VariantResult:
    """Build ``task`` here: lowered in this worker's lowering processes, compiled, and sent back as bytes."""
    address, threads = _worker()
    return build_variant_task(task, worker=address, lower_fn=_pool(threads).lower)
