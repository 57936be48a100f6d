"""The one build pipeline every front end calls: specs → lib<name>.so, in named stages.

1. **plan** (:mod:`tl_aot.pipeline.plan`): the spec read once (capture records as entries, the
   compiler checked), each entry's sources read once, every (entry, arch) variant keyed and looked
   up in the cache; stop here if the library on disk is up to date (:mod:`tl_aot.pipeline.stamp`),
   without importing TileLang. The folders, cache and lock: :mod:`tl_aot.pipeline.workspace`; the
   knobs, checked once: :class:`~tl_aot.pipeline.options.BuildOptions`.
2. **lower**, 3. **compile images**, 4. **launcher** (:mod:`tl_aot.pipeline.stages`), run in parallel
   by :mod:`tl_aot.pipeline.scheduler` within the ``-j`` job slots.
5. **link** and 6. **publish** (:mod:`tl_aot.pipeline.link`): the library, header, stamp and
   depfile moved into place. What was built, and its summary: :mod:`tl_aot.pipeline.build_result`.

A shard (:func:`tl_aot.pipeline.shards.build_part`) runs the same stages 1-3 over its share of the
plan and writes a part; ``link`` runs stages 4-6 over the parts.

Every file a build reads back (cache entries, runtime and launcher objects, the stamp) is checked
first; a damaged one is rebuilt, never used.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace

from ..codegen.torch_native import update_companion
from ..common.fs_errors import filesystem_errors
from ..common.tilelang_compat import warn_if_untested
from ..config.kernel_spec import LibrarySpec
from .build_result import BuildResult, VariantReport, log_summary
from .image_packs import ImagePacks
from .link import image_files, link_and_publish, with_image_sizes
from .options import BuildOptions, Log
from .plan import Plan, plan_build
from .run import build_variants
from .scheduler import default_jobs
from .stages import objects_key
from .stamp import Provenance, up_to_date
from .variant_run import VariantRun, first_error_line
from .workspace import Workspace, workspace

__all__ = ["build_library", "BuildResult", "default_jobs", "first_error_line"]


def build_library(
    lib: LibrarySpec,
    *,
    out_dir: str | os.PathLike,
    jobs: int | None = None,
    cache_dir: str | os.PathLike | None = None,
    header_dir: str | os.PathLike | None = None,
    depfile: str | os.PathLike | None = None,
    log: Log = print,
    force: bool = False,
    keep_going: bool = False,
    torch_ops: bool | None = None,
    report_all: bool = False,
    cluster: str | None = None,
    cache_url: str | None = None,
    image_packs: ImagePacks | None = None,
    native_log: str | None = None,
) -> BuildResult:
    """Build ``lib`` into ``out_dir/lib<name>.so`` (+ ``<name>.h``); return what was built.

    Parameters
    ----------
    lib : LibrarySpec
        The library name and its entries (each with its archs); its ``captures`` become entries here.
    out_dir : path
        Where ``lib<name>.so`` goes. Intermediate files live in ``out_dir/.tl_aot/<name>/``.
    jobs : int, optional
        Job slots shared by lowering, nvcc and host compiles; default :func:`default_jobs` (reads ``MAX_JOBS``).
    cache_dir : path, optional
        Variant cache; default ``$TL_AOT_CACHE_DIR`` or ``out_dir/.tl_aot/cache`` (relative: from the working folder).
    header_dir, depfile : path, optional
        Where the C++ header goes (default ``out_dir``); a Makefile depfile to write (every kernel file and local module).
    log : callable or None
        Receives one progress line per step and the summary.
    force : bool
        Rebuild every variant, the launcher and the runtime object, ignoring (and overwriting) the cache.
    keep_going : bool
        Leave out variants that fail to lower or compile, entries left with no arch, and entries whose generated
        launcher fails to compile (found apart: :mod:`tl_aot.pipeline.launcher_faults`), instead of stopping:
        listed in ``failures``, the log and the manifest's ``left_out``; no up-to-date stamp, so the next build retries.
    report_all : bool
        Without ``keep_going``: try every variant even after one failed, then raise one :class:`LoweringError`
        naming each (its first error line and origin) and write nothing. Captured kernels always build this way.
    torch_ops : bool, optional
        Also build ``lib<name>_torch.so``, the entries as native torch operators (needs torch's
        headers, torch >= 2.10); default: the spec's ``torch_ops``. Without, a stale one is removed.
    cluster, cache_url : str, optional
        A Dask scheduler making the variants (default ``$TL_AOT_CLUSTER``), a shared cache's fsspec URL
        (default ``$TL_AOT_CACHE_URL``). One shard of the library: :func:`tl_aot.pipeline.shards.build_part`.
    image_packs : ImagePacks, optional
        Keep the images beside the library, compressed, stored once, in one ``lib<name>.<arch>.tlpack`` per arch
        (:mod:`tl_aot.pipeline.image_packs`; ``docs/wheels.md``), so a wheel splits by arch. Default: embedded.
    native_log : {"off", "warnings", "raw"}, optional
        TileLang's own C++ log while a variant lowers: none, all but its ``Fatal:`` records (the build reports
        those once, with entry, arch and file:line), or all. Default: ``off`` with ``log=None``, else ``warnings``.

    """
    t_start = time.perf_counter()
    opts = BuildOptions.settled(jobs=jobs, cache_dir=cache_dir, cache_url=cache_url, cluster=cluster, header_dir=header_dir,
                                depfile=depfile, log=log, force=force, keep_going=keep_going, report_all=report_all,
                                native_log=native_log)  # fmt: skip
    torch_ops = lib.torch_ops if torch_ops is None else torch_ops
    ws = workspace(lib.name, out_dir, opts)
    warn_if_untested(log)
    with ws.held(f"building {ws.out.library}", log), filesystem_errors("write", None):
        plan = plan_build(lib, ws.cache, force=force, packs=image_packs)
        current = up_to_date(plan, ws.out, force=force, packs=image_packs, companion=torch_ops)
        if current is not None:
            if log:
                log(f"lib{plan.lib.name}.so is up to date ({time.perf_counter() - t_start:.2f} s)")
            result = BuildResult(ws.out.library, ws.out.header, current.manifest, True, (), (), ws.out.depfile, plan.deps)
        else:
            if ws.unwritable is not None:
                raise ws.unwritable
            run = build_variants(plan, ws, opts)
            result = _link_and_publish(plan, run, ws, opts, image_packs)
            log_summary(opts.log, result, run, plan, opts.jobs, t_start)
        companion = update_companion(result.manifest, result.library, result.header, wanted=torch_ops, log=log)
        return replace(result, torch_companion=companion)


def _link_and_publish(plan: Plan, run: VariantRun, ws: Workspace, opts: BuildOptions, packs: ImagePacks | None) -> BuildResult:
    """Stages link and publish over what the run made (:func:`~tl_aot.pipeline.link.link_and_publish`); what was built."""
    assert run.launcher is not None and run.runtime_obj is not None  # a whole build compiled both
    images = image_files(run.tasks, run.images)
    manifest = replace(with_image_sizes(run.launcher.manifest, images), left_out=tuple(run.left_out))
    inputs = tuple(sorted({(p, d) for t in run.tasks for p, d in run.lowered[t.key].inputs}))
    run.spent.link = link_and_publish(
        manifest,
        images,
        run.launcher,
        run.runtime_obj,
        work=ws.work,
        out=ws.out,
        cache=ws.cache.root,
        key=objects_key(plan.nvcc_version, plan.tvm_ffi_version),
        provenance=Provenance(plan.lib_key, inputs, plan.deps),
        stamp=not run.failures,
        packs=packs,
        jobs=opts.jobs,
        force=opts.force,
        progress=run.progress,
        log=opts.log,
    )
    reports = tuple(
        VariantReport(t.spec.name, str(t.arch), len(run.images[t.key]), run.seconds.get(t.key, 0.0), t.key not in run.seconds)
        for t in run.tasks
    )
    out = ws.out
    return BuildResult(out.library, out.header, manifest, False, tuple(run.rebuilt), reports, out.depfile, plan.deps, tuple(run.failures))


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m tl_aot build ...")
