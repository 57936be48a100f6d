"""The one build pipeline every front end calls: specs → lib<name>.so, in named stages.

1. **plan** (:mod:`tl_aot.pipeline.plan`): read each entry's sources once, key every (entry, arch)
   variant, look the keys up in the cache, and stop here if the library on disk is up to date
   (without importing TileLang).
2. **lower**, 3. **compile images**, 4. **launcher** (:mod:`tl_aot.pipeline.stages`), run in parallel
   by :mod:`tl_aot.pipeline.scheduler` within the ``-j`` job slots.
5. **link** and 6. **publish** (:mod:`tl_aot.pipeline.stages`): the library, header, stamp and
   depfile moved into place.

Every file a build reads back (cache entries, runtime and launcher objects, the stamp) is checked
first; a damaged one is rebuilt, never used.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..common.cpp_spelling import image_symbol
from ..common.destinations import check_file_destination, ensure_folder, filesystem_errors, fs_error
from ..common.errors import FilesystemError, SpecError
from ..common.escaping import depfile_path
from ..common.fileutil import exclusive_lock
from ..common.metadata import Manifest
from ..config.kernel_spec import LibrarySpec
from ..jit.captured import with_captures
from ..jit.tilelang_compat import warn_if_untested
from .cache import VariantCache, default_cache_dir
from .cluster import CLUSTER_ENV
from .image_packs import ImagePacks, PackedLibrary, pack_label, pack_library, pack_name
from .link import Outputs, link, publish, sweep_debris, write_depfile
from .manifest import image_files, manifest_of
from .plan import Plan, check_toolchain, plan_build, read_stamp
from .run import all_failed, build_variants, first_error_line, left_out_of
from .scheduler import VariantRun, default_jobs
from .shards import build_shard
from .shared_cache import CACHE_URL_ENV, SharedCache
from .stages import objects_key

__all__ = ["build_library", "BuildResult", "default_jobs", "first_error_line"]


@dataclass(frozen=True)
class VariantReport:
    """One line of the build summary."""

    entry: str
    arch: str
    image_bytes: int
    seconds: float
    cached: bool


@dataclass(frozen=True)
class BuildResult:
    """What a build produced."""

    library: Path
    header: Path
    manifest: Manifest
    up_to_date: bool = False
    rebuilt: tuple = ()  # (entry, arch) pairs lowered and compiled in this run
    reports: tuple = field(default=())
    depfile: Path | None = None
    deps: tuple = ()
    failures: tuple = ()  # (entry, arch, error) left out by a keep-going build
    torch_companion: Path | None = None  # lib<name>_torch.so, when built with torch ops

    def summary(self) -> str:
        """A table: entry, arch, image size, seconds (cached variants marked)."""
        rows = [("entry", "arch", "image", "seconds")]
        for r in self.reports:
            rows.append((r.entry, r.arch, f"{r.image_bytes / 1024:.1f} KiB", "cached" if r.cached else f"{r.seconds:.1f}"))
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)


def build_library(
    lib: LibrarySpec,
    *,
    out_dir: str | os.PathLike,
    jobs: int | None = None,
    cache_dir: str | os.PathLike | None = None,
    header_dir: str | os.PathLike | None = None,
    depfile: str | os.PathLike | None = None,
    log=print,
    force: bool = False,
    keep_going: bool = False,
    torch_ops: bool | None = None,
    report_all: bool = False,
    cluster: str | None = None,
    cache_url: str | None = None,
    shard: str | None = None,
    image_packs: ImagePacks | None = None,
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
    header_dir : path, optional
        Where the C++ header goes; default ``out_dir``.
    depfile : path, optional
        Write a Makefile-style depfile (the library depends on every kernel file and local module).
    log : callable or None
        Receives one progress line per step and the summary.
    force : bool
        Rebuild every variant, the launcher and the runtime object, ignoring (and overwriting) the cache.
    keep_going : bool
        Leave out variants that fail to lower or compile (listed in ``failures`` and the log)
        instead of stopping; entries left with no arch are left out. A library with failures
        writes no up-to-date stamp, so the next build tries them again. What was left out is
        recorded in the manifest (``left_out``: ``inspect`` lists it).
    report_all : bool
        Without ``keep_going``: try every variant even after one failed, then raise one
        :class:`~tl_aot.common.errors.LoweringError` naming each failed variant (its first error line and
        where it came from) and write nothing. Libraries with captured kernels always build this way.
    torch_ops : bool, optional
        Also build ``lib<name>_torch.so``, the entries as native torch operators (needs torch's
        headers, torch >= 2.10); default: the spec's ``torch_ops``. Without, a stale one is removed.
    cluster, cache_url, shard : str, optional
        Past one machine: a Dask scheduler building the variants (default ``$TL_AOT_CLUSTER``; :mod:`tl_aot.pipeline.cluster`); a shared
        cache, an fsspec URL (:mod:`tl_aot.pipeline.shared_cache`); ``K/N``: shard K of N to ``out_dir`` (:mod:`tl_aot.pipeline.shards`).
    image_packs : ImagePacks, optional
        Keep the images beside the library, compressed and stored once by content, in one
        ``lib<name>.<arch>.tlpack`` per arch (:mod:`tl_aot.pipeline.image_packs`; ``docs/wheels.md``),
        so a wheel splits by arch. Default: the images are embedded in the library.

    """
    t_start = time.perf_counter()
    lib = with_captures(lib).bound()
    torch_ops = lib.torch_ops if torch_ops is None else torch_ops
    cluster, cache_url = _settled(jobs, cluster, cache_url)
    if shard and image_packs is not None:
        msg = "image packs are made when a whole library is linked: build without --shard, or link the shards and build again"
        raise SpecError(msg)
    if shard:
        opts = dict(jobs=jobs, cache_dir=cache_dir, cache_url=cache_url, cluster=cluster, log=log, force=force, report_all=report_all)
        return build_shard(lib, shard, out_dir=out_dir, keep_going=keep_going, **opts)
    work, out, cache, lock, unwritable = _destinations(lib.name, out_dir, header_dir, depfile, cache_dir, (cache_url, log))
    warn_if_untested(log)
    with exclusive_lock(lock, holder=f"building {out.library}", log=log), filesystem_errors("write", None):
        if unwritable is None:
            sweep_debris(work, out)
        plan = plan_build(lib, cache, check_toolchain(lib), force=force)
        plan = replace(plan, lib_key=_packs_key(plan.lib_key, image_packs))
        current = _current(plan, out, force, image_packs)
        if current is not None:
            return _up_to_date(plan, current, out, torch_ops, log, t_start)
        if unwritable is not None:
            raise unwritable
        if plan.todo:
            cache.check_writable()  # before minutes of lowering, not after
        tolerant = keep_going or report_all or any(e.capture for e in lib.entries)  # a record's kernels: every failure named
        run = build_variants(plan, work, cache, jobs or default_jobs(), log, force=force, keep_going=tolerant, cluster=cluster)
        if run.failures and not keep_going:
            raise all_failed(plan, run)
        result = _publish(plan, run, work, out, log, t_start, jobs or default_jobs(), cache=cache, force=force, packs=image_packs)
        return _with_companion(result, torch_ops, log)


def _current(plan: Plan, out: Outputs, force: bool, packs: ImagePacks | None = None):
    """The stamp's (manifest, inputs) when the library on disk is what ``plan`` builds, else None.

    A path the depfile cannot spell is refused first, before anything is replaced. With image
    packs, a pack missing beside the library makes it out of date.
    """
    if out.depfile:
        for p in (out.library, *plan.deps):
            depfile_path(p)
    current = None if force or not out.header.is_file() else read_stamp(out.stamp, plan, out.library, out.header)
    if current is not None and packs is not None:
        labels = {pack_label(t.arch) for t in plan.tasks}
        if not all(out.library.with_name(pack_name(plan.lib.name, label)).is_file() for label in labels):
            return None
    return current


def _packs_key(key: str, packs: ImagePacks | None) -> str:
    """The library key, changed by the choice of image packs (and their hint), which the library embeds."""
    return key if packs is None else hashlib.sha256(f"{key}\0{packs!r}".encode()).hexdigest()


def _settled(jobs, cluster: str | None, cache_url: str | None) -> tuple[str, str]:
    """``jobs`` checked; the cluster and shared cache, from ``TL_AOT_CLUSTER`` / ``TL_AOT_CACHE_URL`` where not given."""
    if jobs is not None and (type(jobs) is not int or jobs < 1):
        msg = f"jobs must be a whole number of at least 1 (or None for MAX_JOBS / the CPU count), got {jobs!r}"
        raise SpecError(msg)
    cluster = os.environ.get(CLUSTER_ENV, "") if cluster is None else cluster
    cache_url = os.environ.get(CACHE_URL_ENV, "") if cache_url is None else cache_url
    return cluster.strip(), cache_url.strip()


def _up_to_date(plan: Plan, current: tuple, out: Outputs, torch_ops: bool, log, t_start: float) -> BuildResult:
    """The result of a build that finds the library on disk is what ``plan`` builds (its depfile written again)."""
    if out.depfile:
        write_depfile(out.depfile, out.library, tuple(sorted({*plan.deps, *(Path(p) for p, _ in current[1])})))
    if log:
        log(f"lib{plan.lib.name}.so is up to date ({time.perf_counter() - t_start:.2f} s)")
    return _with_companion(BuildResult(out.library, out.header, current[0], True, (), (), out.depfile, plan.deps), torch_ops, log)


def _with_companion(result: BuildResult, torch_ops: bool, log) -> BuildResult:
    """``result`` with the library's native torch companion built beside it (or a stale one removed)."""
    from ..codegen.torch_native import build_companion, companion_path

    if not torch_ops:
        stale = companion_path(result.library)
        if os.path.lexists(stale):  # never touch a read-only folder (an up-to-date build there) for nothing
            with filesystem_errors("remove the stale torch companion", stale):
                stale.unlink()
        return result
    return replace(result, torch_companion=build_companion(result.manifest, result.library, result.header, log=log))


def _destinations(name: str, out_dir, header_dir, depfile, cache_dir, shared=("", None)) -> tuple:
    """The work folder, outputs, cache and lock file of a build, each checked before any work.

    A work folder that cannot be created (a read-only output folder) is not an error yet: the
    library may be up to date. Its lock is then taken in the temporary folder, and the error is
    returned for the build to raise if it has to write. ``shared`` (URL, log): a shared cache behind the local one.
    """
    out_dir = ensure_folder(Path(out_dir).resolve(), "output folder")
    work = out_dir / ".tl_aot" / name
    header_dir = ensure_folder(Path(header_dir).resolve(), "header folder") if header_dir else out_dir
    out = Outputs(out_dir / f"lib{name}.so", header_dir / f"{name}.h", work / "stamp.json", Path(depfile).resolve() if depfile else None)
    check_file_destination(out.library, "library")
    check_file_destination(out.header, "header")
    cache_root = Path(cache_dir).resolve() if cache_dir else default_cache_dir(out_dir)
    if cache_root.exists() and not cache_root.is_dir():
        msg = f"cache folder {cache_root} is a file, not a folder; remove it or pass another --cache-dir / TL_AOT_CACHE_DIR"
        raise FilesystemError(msg)
    try:
        ensure_folder(work, "work folder")
        (work / "build.lock").touch()
        return work, out, _cache(cache_root, *shared), work / "build.lock", None
    except (FilesystemError, OSError) as e:
        problem = e if isinstance(e, FilesystemError) else fs_error(e, "write in the output folder", out_dir)
        locks = Path(tempfile.gettempdir()) / f"tl_aot-{os.getuid()}" / "locks"
        with filesystem_errors("create the lock folder", locks, "set TMPDIR to a writable folder"):
            locks.mkdir(parents=True, exist_ok=True)
        lock = locks / (hashlib.sha256(str(work).encode()).hexdigest()[:16] + ".lock")
        return work, out, _cache(cache_root, *shared), lock, problem


def _cache(root: Path, url: str, log) -> VariantCache | SharedCache:
    return SharedCache(VariantCache(root), url, log=log) if url else VariantCache(root)


def _publish(
    plan: Plan,
    run: VariantRun,
    work: Path,
    out: Outputs,
    log,
    t_start: float,
    jobs: int,
    *,
    cache: VariantCache,
    force: bool,
    packs: ImagePacks | None = None,
) -> BuildResult:
    """Stages link and publish, then the summary."""
    lib = LibrarySpec(name=plan.lib.name, entries=tuple(e for e in plan.lib.entries if any(t.spec is e for t in run.tasks)))
    manifest = manifest_of(lib, run.tasks, run.lowered, plan.nvcc_version, {t.key: len(run.images[t.key]) for t in run.tasks})
    manifest = replace(manifest, left_out=left_out_of(plan, run))
    t0 = time.perf_counter()
    objects = (run.launcher_obj, run.runtime_obj)
    key = objects_key(plan.nvcc_version, plan.tvm_ffi_version)
    images = image_files(run.tasks, run.images)
    packed = None
    if packs is not None:
        packed = _packed(manifest, run, packs, plan.nvcc_version, cache.root, jobs)
        images = packed.refs
    built = link(lib.name, work, manifest, images, objects, cache=cache.root, key=key, force=force)
    run.spent["link"] = time.perf_counter() - t0
    run.progress.step(f"link lib{lib.name}.so")
    inputs = sorted({tuple(i) for t in run.tasks for i in run.lowered[t.key].inputs})
    publish(
        built,
        out,
        manifest,
        run.header_text,
        lib_key=plan.lib_key,
        inputs=inputs,
        deps=plan.deps,
        stamp=not run.failures,
        packs=packed.packs if packed else None,
    )
    if packed and log:
        log(packs_line(packed))
    reports = tuple(
        VariantReport(t.spec.name, str(t.arch), len(run.images[t.key]), run.timings.get(t.key, 0.0), t.key not in run.timings)
        for t in run.tasks
    )
    result = BuildResult(out.library, out.header, manifest, False, tuple(run.rebuilt), reports, out.depfile, plan.deps, tuple(run.failures))
    if log:
        _log_summary(log, result, run, plan, jobs, t_start)
    return result


def _log_summary(log, result: BuildResult, run: VariantRun, plan: Plan, jobs: int, t_start: float) -> None:
    if result.manifest.left_out:
        log(f"left out {len(result.manifest.left_out)} variant(s) that failed (--keep-going):")
        for x in result.manifest.left_out:
            log(f"  {x.spelled()}")
    log(result.summary())
    if plan.todo:
        where = f"{run.workers} worker processes" if run.workers > 1 else "this process"
        if run.cluster:
            where = f"on {run.workers} cluster worker(s)"
        spent = run.spent
        log(
            f"job time: lowering {spent['lowering']:.1f} s ({where}), nvcc {spent['nvcc']:.1f} s, "
            f"host compile {spent['host']:.1f} s, link {spent['link']:.1f} s; -j {jobs}"
        )
    log(f"built {result.library} in {time.perf_counter() - t_start:.1f} s with TileLang {result.manifest.tilelang_version}")
    m = result.manifest
    if m.compiler:
        driver = f" ({m.driver_min_version}+)" if m.driver_min_version else ""
        log(f"compiler: {m.compiler}; loads on NVIDIA drivers supporting CUDA {m.driver_min_cuda} or newer{driver}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m tl_aot build ...")


def _packed(manifest, run: VariantRun, packs: ImagePacks, nvcc_version: str, cache_root: Path, jobs: int) -> PackedLibrary:
    """The library's image packs (:func:`tl_aot.pipeline.image_packs.pack_library`) from the run's images."""
    images = {image_symbol(t.spec.name, t.arch): (t.arch, run.images[t.key]) for t in run.tasks}
    major, minor = (int(x) for x in (nvcc_version.split()[0].split(".") + ["0"])[:2])
    return pack_library(manifest, images, packs, cuda_version=(major, minor), cache=cache_root, jobs=jobs)


def packs_line(packed: PackedLibrary) -> str:
    """The summary line of a build with image packs: how many images, stored how, in how many bytes."""
    how = "compressed" if packed.compressed else "uncompressed (no fatbinary beside the compiler)"
    return (
        f"image packs: {len(packed.packs)} ({', '.join(sorted(packed.packs))}); {packed.images} images, "
        f"{packed.stored} stored once each, {how}: {packed.raw_bytes / 1024:.0f} KiB -> {packed.stored_bytes / 1024:.0f} KiB"
    )
