"""How a library's launcher is cut into translation units, so a big library's launcher compiles in parallel.

The launcher of a 2,000-entry library built for four archs is about 70 CPU-s of host compiler in
one file, and it compiles at the end of a build, after every kernel is lowered: one file would
be the build's tail. Cut into units of whole exports (an export and its specialisations, so a
picker and what it picks stay together), the units compile in the build's free job slots, and
editing one kernel recompiles only its unit (each unit is its own cached object,
:mod:`tl_aot.cuda.host_objects`). A unit of its own holds what is library-wide (the entry table,
the library's exports: :func:`tl_aot.codegen.render.render_launcher_units`).

The cut depends on the entry list alone (never on ``-j`` or the machine), so a library's bytes are
the same however it is built. Each unit re-parses the runtime's headers (about 0.65 CPU-s with
tvm-ffi's), so a unit is only cut once it holds enough work to be worth that: a library under
one and a half units' worth (some 100 entries of four archs) stays one unit, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..common.metadata import Manifest

__all__ = ["ENTRY_WEIGHT", "UNIT_WEIGHT", "UnitPlan", "cut", "entry_weight", "unit_plans"]

#: An entry's compile cost in launch functions: its check tables, argument reads and C++ API
#: overloads cost about as much as eight of its per-arch launch functions (measured with g++ 12 at
#: -O2: ~18 ms an entry, ~2 ms more for each arch it has; bench/launcher_units.py).
ENTRY_WEIGHT = 8

#: The work one unit holds: about 66 entries of four archs, ~1.8 CPU-s of compile besides the
#: ~0.65 CPU-s every unit pays for the headers. Measured (bench/launcher_units.py, 2 cores): 1,000
#: entries of four archs take 27 CPU-s as one unit, 36 CPU-s as 16 units (+34%): on 16 cores one
#: wave of ~2.5 s instead of 27 s. The launcher is a sliver of a big build's CPU (~70 of ~48,000
#: CPU-s at 2,000 kernels x 4 archs, lowering ~6 CPU-s a kernel-arch): its wall is what counts.
UNIT_WEIGHT = 800


@dataclass(frozen=True)
class UnitPlan:
    """One translation unit of a launcher: its exports (by position in ``Manifest.exports()``) and their entries."""

    exports: tuple[int, ...]
    entries: tuple[int, ...]  # positions in ``Manifest.entries``, ascending


def entry_weight(variants: int) -> int:
    """What one entry of ``variants`` images weighs in :data:`UNIT_WEIGHT`."""
    return ENTRY_WEIGHT + variants


def cut(weights: Sequence[int], target: int = UNIT_WEIGHT) -> tuple[range, ...]:
    """Consecutive runs of ``weights`` (whole items), each closed once it reaches ``target``; a short last run joins the one before.

    A run's bounds depend only on the items up to it, so a library that grows at its end changes
    its last units only. Nothing is cut below ``target``: a total under ``1.5 * target`` is one run.
    """
    runs: list[range] = []
    start, held = 0, 0
    for i, w in enumerate(weights):
        held += w
        if held >= target:
            runs.append(range(start, i + 1))
            start, held = i + 1, 0
    if start < len(weights):
        if runs and held < target // 2:
            runs[-1] = range(runs[-1].start, len(weights))
        else:
            runs.append(range(start, len(weights)))
    return tuple(runs) or (range(0),)


def unit_plans(manifest: Manifest, target: int = UNIT_WEIGHT) -> tuple[UnitPlan, ...]:
    """The per-entry units of ``manifest``'s launcher, in library order: one for a small library."""
    index = {e.name: i for i, e in enumerate(manifest.entries)}
    members = [[index[m.name] for m in ms] for ms in manifest.exports().values()]
    weights = [sum(entry_weight(len(manifest.entries[i].variants)) for i in ms) for ms in members]
    return tuple(UnitPlan(tuple(run), tuple(sorted(i for j in run for i in members[j]))) for run in cut(weights, target))
