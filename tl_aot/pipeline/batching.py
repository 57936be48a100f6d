"""Which lowered variants compile together: one nvcc front end per batch of one arch and flags.

A batch parses the headers every TileLang kernel includes once (most of a small kernel's nvcc
time), so larger batches cost less CPU; but a batch runs in one job slot, its variants' ptxas one
after the other, so one large batch left at the end of a build keeps one core busy while the
others idle. :class:`Batcher` gathers the variants as they are lowered, one group per arch, nvcc
flags and backend (what :func:`~tl_aot.pipeline.images.images_of` compiles in one run), hands
out a group as a batch once it holds :func:`batch_size` variants, and at the end cuts what is
left into as many batches as the build has slots (:meth:`Batcher.drain`): the slots the last
lowering leaves take them as they free.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["MAX_BATCH", "batch_size", "Batcher"]

#: The most variants one nvcc job compiles together: bounds its memory and how long it runs.
MAX_BATCH = 24

T = TypeVar("T")


def batch_size(jobs: int, variants: int) -> int:
    """How many lowered variants of one group fill a batch: the build's share per job slot, at most :data:`MAX_BATCH`.

    Every slot may compile (from ``-j 3`` every slot may lower too: they take turns,
    :mod:`tl_aot.pipeline.job_slots`); with ``-j 2`` or less the build lowers in its own process,
    which holds one slot, and the other compiles.
    """
    slots = max(1, jobs - 1) if jobs <= 2 else jobs
    return max(1, min(MAX_BATCH, -(-variants // slots)))


class Batcher(Generic[T]):
    """Lowered variants (any item) gathered by group key into batches of :func:`batch_size`."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._groups: dict[Hashable, list[T]] = {}

    def __len__(self) -> int:
        """How many variants wait for a batch."""
        return sum(len(g) for g in self._groups.values())

    def add(self, group: Hashable, item: T) -> list[T] | None:
        """Add ``item`` to ``group``; the group as a batch once it is full, else None."""
        members = self._groups.setdefault(group, [])
        members.append(item)
        if len(members) < self.size:
            return None
        del self._groups[group]
        return members

    def drain(self, slots: int) -> list[list[T]]:
        """Every waiting variant, as batches for ``slots`` free job slots: at least ``slots`` batches where the variants allow.

        Each group is cut into parts of at most ``ceil(waiting / slots)`` (and :attr:`size`),
        dealt out so the parts' sizes differ by one at most; a group is never mixed with another.
        """
        waiting = len(self)
        if not waiting:
            return []
        cap = max(1, min(self.size, -(-waiting // max(1, slots))))
        out: list[list[T]] = []
        for members in self._groups.values():
            parts = -(-len(members) // cap)
            out += [members[k::parts] for k in range(parts)]
        self._groups.clear()
        return out
