"""What a Dask worker runs for a tl_aot build: one :class:`~tl_aot.pipeline.cluster_batch.BatchTask` per call.

TileLang is not thread safe and a Dask worker runs tasks in threads, so lowering goes to a pool of
lowering processes (:class:`~tl_aot.lower.lower_worker.LoweringPool`), one per worker thread, started on
the first task and kept for the worker's life: later builds pay no ``import tilelang``. nvcc runs
from the task's thread, once for the task's lowered variants (as a local build's batch). A worker
killed mid-task leaves nothing behind that a build reads (its lowering processes end when their
pipe closes; its nvcc dies with it under the reaper).
"""

from __future__ import annotations

import atexit
import threading

from .cluster_batch import BatchTask
from .variant_task import VariantResult, build_variant_tasks

__all__ = ["run_batch"]

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


def run_batch(batch: BatchTask) -> tuple[VariantResult, ...]:
    """Build ``batch`` here: one :class:`~tl_aot.pipeline.variant_task.VariantResult` per variant, sent back as bytes.

    Each variant is lowered in this worker's lowering processes; the lowered ones compile in one nvcc run.
    """
    address, threads = _worker()
    return build_variant_tasks(batch.members, worker=address, lower_fn=_pool(threads).lower)
