"""Run the variant stages of a plan (lower, compile images, launcher) here or on a cluster; name what failed.

Shared by a one-machine build (:mod:`tl_aot.pipeline.library`) and a shard (:mod:`tl_aot.pipeline.shards`).
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

from ..common.errors import LoweringError
from ..common.metadata import LeftOut
from ..jit.captured import origin_of_spec
from ..lower.cutedsl import close_workers
from .cache import VariantCache
from .cluster import run_on_cluster
from .plan import Plan
from .scheduler import Progress, VariantRun, run_variants
from .stages import Stages

__all__ = ["build_variants", "VariantsOnly", "left_out_of", "first_error_line", "all_failed"]


class VariantsOnly(Stages):
    """The stages of a shard: variants lowered, compiled and cached; no launcher, no runtime object."""

    def launcher(self, run) -> tuple[str, None]:
        """No launcher: a shard holds variants only."""
        return "", None

    def runtime(self):
        """No runtime object: a shard holds variants only."""
        return None


def build_variants(
    plan: Plan, work: Path, cache: VariantCache, jobs: int, log, *, force: bool, keep_going: bool, cluster: str = "", launcher: bool = True
) -> VariantRun:
    """Stages lower, compile images and launcher over the plan's misses, in parallel (here, or on ``cluster``'s workers)."""
    todo = plan.todo
    shared = sum(1 for t in plan.tasks if t.key in getattr(cache, "adopted", ()))  # a shard's plan: its own variants only
    if log and shared:
        log(f"{shared} of {len(plan.tasks)} variant(s) from the shared cache {cache.url}")
    progress = Progress((1 if cluster else 2) * len(todo) + 2 * launcher, log)
    stages = Stages(work, cache, plan.nvcc_version, plan.tvm_ffi_version, progress, force)
    run = VariantRun(
        lib_name=plan.lib.name,
        lowered={k: hit[0] for k, hit in plan.hits.items()},
        images={k: hit[1] for k, hit in plan.hits.items()},
        tasks=list(plan.tasks),
        progress=progress,
    )
    try:
        if cluster and todo:
            return run_on_cluster(todo, run, stages, address=cluster, log=log, keep_going=keep_going, progress=progress, launcher=launcher)
        if not launcher:
            stages = VariantsOnly(**{f.name: getattr(stages, f.name) for f in fields(Stages)})
        return run_variants(todo, run, stages, jobs=jobs, keep_going=keep_going, progress=progress)
    finally:
        close_workers()  # a build's CuTeDSL workers do not outlive it (each holds TileLang and CuTeDSL)


def left_out_of(plan: Plan, run: VariantRun) -> tuple:
    """The failed variants of a build as :class:`~tl_aot.common.metadata.LeftOut`: first error line and origin of each."""
    specs = {s.name: s for s in plan.lib.entries}
    out = []
    for entry, arch, msg in run.failures:
        text = first_error_line(msg).removeprefix(f"entry {entry!r} ({arch}): ")
        out.append(LeftOut(entry, arch, text, origin_of_spec(specs.get(entry))))
    return tuple(out)


def first_error_line(message: str) -> str:
    """The line of an error that says what went wrong: the underlying exception's (``ValueError: ...``), else the first."""
    lines = [ln.strip() for ln in str(message).strip().splitlines() if ln.strip()]
    if not lines:
        return "unknown error"
    cause = next((ln for ln in lines[1:] if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Failure)\b.*:", ln)), None)
    return (cause or lines[0])[:300]


def all_failed(plan: Plan, run: VariantRun) -> LoweringError:
    """The error of a build whose variants failed: each named, nothing written."""
    left = left_out_of(plan, run)
    listing = "\n".join(f"  {x.spelled()}" for x in left)
    msg = (
        f"{len(left)} of {len(run.tasks) + len(left)} variant(s) of lib{plan.lib.name}.so failed to build; nothing was written "
        f"(--keep-going builds the rest and records what it left out):\n{listing}"
    )
    return LoweringError(msg, entry=left[0].entry if len(left) == 1 else None, arch=left[0].arch if len(left) == 1 else None)
