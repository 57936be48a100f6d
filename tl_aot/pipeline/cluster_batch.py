"""Cluster tasks of several variants: which variants share a task, and what a task is.

A local build compiles the lowered variants of one arch and flags in one nvcc run
(:func:`~tl_aot.pipeline.batching.batch_size`), parsing the headers every TileLang kernel includes
once per batch: about a quarter of the nvcc CPU of compiling each alone. A cluster build does the
same per task: :func:`batches_of` groups the variants the way the local build's compile stage does
(arch, then nvcc flags; CuTeDSL apart) and cuts each group into its share of the worker threads
(:func:`tasks_for`): about one task per thread, as large as that allows. A :class:`BatchTask` carries its
variants' :class:`~tl_aot.pipeline.variant_task.VariantTask` s; the worker lowers each and compiles
the lowered ones together (:func:`~tl_aot.pipeline.variant_task.build_variant_tasks`), answering one
verified result per variant. A task retried (its worker died, or refused it) is retried whole.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .batching import MAX_BATCH

if TYPE_CHECKING:
    from .plan import Task
    from .variant_task import VariantTask

__all__ = ["BatchTask", "batches_of", "tasks_for", "group_key", "label_of"]


@dataclass(frozen=True)
class BatchTask:
    """Variants of one arch and flags to build in one cluster task: their tasks, in order."""

    members: tuple[VariantTask, ...]  # each with the driver's toolset and its sources as bytes

    @property
    def key(self) -> str:
        """See :func:`group_key`."""
        return group_key(self.members)


def group_key(tasks) -> str:
    """A digest of the tasks' cache keys: names their cluster task (with the build and the attempt)."""
    return hashlib.sha256("\0".join(t.key for t in tasks).encode()).hexdigest()


def tasks_for(group: int, total: int, threads: int) -> int:
    """How many tasks a group of ``group`` of the build's ``total`` variants is cut into: its share of the threads.

    As the local scheduler gives each compile slot one batch (:func:`~tl_aot.pipeline.batching.batch_size`),
    each worker thread gets about one task: every thread busy, and each task as large as that
    allows, since its variants share one nvcc front end. At least one task, none of more than
    :data:`MAX_BATCH` variants, none empty.
    """
    share = round(max(1, threads) * group / max(1, total))
    return min(group, max(1, share, -(-group // MAX_BATCH)))


def batches_of(todo: list[Task], threads: int) -> list[tuple[Task, ...]]:
    """``todo`` (plan tasks) as tuples of tasks that build together: same arch, flags and backend.

    Each group is dealt into :func:`tasks_for` parts (sizes within one): consecutive variants, often one
    entry's specialisations of like cost, go to different tasks, so the tasks take about as long.
    """
    groups: dict[tuple[str, tuple[str, ...], bool], list[Task]] = {}  # (arch, flags, CuTeDSL?) -> its tasks
    for t in todo:
        groups.setdefault((str(t.arch), tuple(t.spec.compile_flags or ()), t.spec.backend == "cutedsl"), []).append(t)
    out: list[tuple[Task, ...]] = []
    for members in groups.values():
        parts = tasks_for(len(members), len(todo), threads)
        out += [tuple(members[k::parts]) for k in range(parts)]  # dealt out: an entry's heavy variants spread over tasks
    return out


def label_of(group) -> str:
    """``gemm sm_90a``, or ``gemm, softmax, rms_norm +2 sm_90a`` for a task of several (its arch once)."""
    names = [t.spec.name for t in group]
    shown = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
    return f"{shown} {group[0].arch}"
