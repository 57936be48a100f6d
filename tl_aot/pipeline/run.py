"""Run the variant stages of a plan (lower, compile images, launcher) here or on a cluster.

Shared by a one-machine build (:mod:`tl_aot.pipeline.library`) and a shard (:mod:`tl_aot.pipeline.shards`).
"""

from __future__ import annotations

from dataclasses import fields

from ..lower.cutedsl import close_workers
from .cluster import run_on_cluster
from .options import BuildOptions
from .plan import Plan, Task
from .progress import Progress
from .relabel import walk_again
from .scheduler import run_variants
from .stages import Each, Stages, one_by_one
from .variant_run import VariantRun
from .workspace import Workspace

__all__ = ["build_variants", "VariantsOnly"]


class VariantsOnly(Stages):
    """The stages of a shard: variants lowered, compiled and cached; no launcher, no runtime object."""

    def launcher(self, run: VariantRun, each: Each = one_by_one) -> None:
        """No launcher: a shard holds variants only."""
        return None

    def runtime(self):
        """No runtime object: a shard holds variants only."""
        return None

    @staticmethod
    def without_failures(run: VariantRun) -> list[Task]:
        """The tasks left once failed variants are dropped: none is no error (a shard of N may hold no variant)."""
        return [t for t in run.tasks if t.key in run.lowered]


def build_variants(plan: Plan, ws: Workspace, opts: BuildOptions, *, launcher: bool = True) -> VariantRun:
    """Stages lower, compile images and launcher over the plan's misses, in parallel (here, or on the cluster's workers).

    The one place every kind of build makes its variants, in the workspace ``ws`` (its work folder
    and cache; with variants to make, the cache's write problem found when ``ws`` was made is raised
    here, before minutes of lowering); ``launcher=False`` (a shard): the variants only. A failed
    variant stops the build, or in a tolerant one (:meth:`BuildOptions.tolerant`) is recorded in
    the run's ``failures`` while the others build; then, unless ``keep_going``, one error names
    every failure and nothing is written.
    """
    plan, stale = walk_again(plan)  # hits another tl_aot walk labelled: lowering walks them again first
    todo, log, work, cache = plan.todo, opts.log, ws.work, ws.cache
    if todo and ws.cache_unwritable is not None:
        raise ws.cache_unwritable
    shared = [t for t in plan.tasks if t.key in plan.hits and t.key in getattr(cache, "adopted", ())]
    if log and shared:
        log(f"{len(shared)} of {len(plan.tasks)} variant(s) from the shared cache {getattr(cache, 'url', '')}")
    progress = Progress((1 if opts.cluster else 2) * len(todo) + 2 * launcher, log)
    stages = Stages(
        work, cache, plan.nvcc_version, plan.tvm_ffi_version, progress, opts.force, native_log=opts.native_log, walk_again=stale
    )
    run = VariantRun(
        lib_name=plan.lib.name,
        lowered={k: hit[0] for k, hit in plan.hits.items()},
        images={k: hit[1] for k, hit in plan.hits.items()},
        tasks=list(plan.tasks),
        progress=progress,
    )
    tolerant = opts.tolerant(plan.lib)
    try:
        if opts.cluster and todo:
            run_on_cluster(todo, run, stages, address=opts.cluster, log=log, keep_going=tolerant, launcher=launcher)
        else:
            if not launcher:
                stages = VariantsOnly(**{f.name: getattr(stages, f.name) for f in fields(Stages)})
            run_variants(todo, run, stages, jobs=opts.jobs, keep_going=tolerant, progress=progress)
    finally:
        close_workers()  # a build's CuTeDSL workers do not outlive it (each holds TileLang and CuTeDSL)
    if log and stale:
        log(_relabel_line(len(stale), len(stages.relabelled), cluster=bool(opts.cluster)))
    if run.failures and not opts.keep_going:
        raise run.error()
    return run


def _relabel_line(stale: int, kept: int, *, cluster: bool) -> str:
    """What the build says of the cached variants another tl_aot walk labelled."""
    if cluster:
        return f"tl_aot's factory walk changed: {stale} cached variant(s) lowered again on the cluster"
    tail = f"; {stale - kept} reached another kernel and were lowered again" if kept < stale else ""
    return f"tl_aot's factory walk changed: {kept} cached variant(s) walked again and kept{tail}"
