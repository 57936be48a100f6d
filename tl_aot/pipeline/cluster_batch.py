"""Cluster tasks of several variants: which variants share a task, and what a task is.

A local build compiles the lowered variants of one arch and flags in one nvcc run
(:func:`~tl_aot.pipeline.scheduler.batch_size`), parsing the headers every TileLang kernel includes
once per batch: about a quarter of the nvcc CPU of compiling each alone. A cluster build does the
same per task: :func:`batches_of` groups the variants the way the local build's compile stage does
(arch, then nvcc flags; CuTeDSL apart) and cuts each group into tasks of :func:`cluster_batch_size`
variants, few enough per task that every worker thread has one. A :class:`BatchTask` carries its
variants' :class:`~tl_aot.pipeline.variant_task.VariantTask` s; the worker lowers each and compiles
the lowered ones together (:func:`~tl_aot.pipeline.variant_task.build_variant_tasks`), answering one
verified result per variant. A task retried (its worker died, or refused it) is retried whole.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .scheduler import MAX_BATCH

__all__ = ["BatchTask", "batches_of", "cluster_batch_size", "group_key", "label_of"]


@dataclass(frozen=True)
class BatchTask:
    """Variants of one arch and flags to build in one cluster task: their tasks, in order."""

    members: tuple  # VariantTask, each with the driver's toolset and its sources as bytes

    @property
    def key(self) -> str:
        """See :func:`group_key`."""
        return group_key(self.members)


def group_key(tasks) -> str:
    """A digest of the tasks' cache keys: names their cluster task (with the build and the attempt)."""
    return hashlib.sha256("\0".join(t.key for t in tasks).encode()).hexdigest()


def cluster_batch_size(variants: int, threads: int) -> int:
    """Variants per cluster task: the build's variants shared out over the workers' threads, at most :data:`MAX_BATCH`.

    One task per thread at least (a thread without a task idles while others work through long
    batches); each task as large as that allows, since each shares one nvcc front end.
    """
    return max(1, min(MAX_BATCH, variants // max(1, threads)))


def batches_of(todo: list, threads: int) -> list[tuple]:
    """``todo`` (plan tasks) as tuples of tasks that build together: same arch, flags and backend, in ``todo``'s order.

    Each group is cut into near-equal parts of at most :func:`cluster_batch_size` tasks.
    """
    size = cluster_batch_size(len(todo), threads)
    groups: dict = {}
    for t in todo:
        groups.setdefault((str(t.arch), tuple(t.spec.compile_flags or ()), t.spec.backend == "cutedsl"), []).append(t)
    out: list = []
    for members in groups.values():
        parts = -(-len(members) // size)
        step, extra = divmod(len(members), parts)
        start = 0
        for k in range(parts):
            end = start + step + (1 if k < extra else 0)
            out.append(tuple(members[start:end]))
            start = end
    return out


def label_of(group) -> str:
    """``gemm sm_90a``, or ``gemm, softmax, rms_norm +2 sm_90a`` for a task of several (its arch once)."""
    names = [t.spec.name for t in group]
    shown = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
    return f"{shown} {group[0].arch}"
