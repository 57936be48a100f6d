"""Sharded builds for CI matrices: ``build --shard K/N -o PART`` on N machines, ``link PART... -o OUT`` on one.

A shard is a build's plan filtered by shard: it plans the whole library (every variant's key,
from the sources read once), keeps the K-th of N deterministic shares (variant ``i`` of the
plan's order goes to shard ``i % N + 1``: :meth:`~tl_aot.pipeline.plan.Plan.shard`) and makes them
as any build makes its variants (:func:`~tl_aot.pipeline.run.build_variants`: here, or on a
cluster, through the same caches). Where a one-machine build then links, a shard writes its part
(:class:`~tl_aot.pipeline.part.Part`).

``link`` checks that the parts are one library's: the same toolset (naming the difference: versions,
the host compilers by name and version), the same library key (same sources and specs:
"different sources" otherwise), every shard 1..N exactly once (a missing or duplicate one named);
then it runs the stages a one-machine build ends with: the manifest, the launcher
(:meth:`~tl_aot.pipeline.stages.Stages.launcher_of`), link and publish. The same bytes.

Image packs (``link --image-packs``) are made here, where the whole library is linked, by the
same :func:`~tl_aot.pipeline.image_packs.pack_built` a one-machine ``build --image-packs`` runs:
parts hold the images as built, never packs, so one set of parts links either way.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

from ..capture.record_specs import choices_of, recorded_calls, recorded_tunings
from ..common.arch import parse_arch
from ..common.destinations import ensure_folder
from ..common.errors import SpecError
from ..common.metadata import LeftOut, LoweredEntry, LoweredVariant
from ..config.kernel_spec import LibrarySpec
from .cache import VariantCache, default_cache_dir
from .image_packs import ImagePacks
from .job_slots import in_threads
from .launcher_faults import ISSUES, LauncherCodeError
from .link import image_files_of_heads, link_and_publish, with_image_sizes
from .manifest import compiler_or_none, entry_head, manifest_from
from .options import BuildOptions, Log
from .part import PART_FORMAT, Part, PartError, PartTask
from .plan import Plan, plan_build, shard_of
from .progress import Progress
from .run import build_variants
from .scheduler import default_jobs
from .stages import Stages
from .stamp import Provenance
from .toolset import differences, local_toolset
from .variant_run import VariantRun
from .workspace import Outputs, workspace

__all__ = ["parse_shard", "shard_of", "build_part", "check_parts", "link_parts", "Part", "PartError", "PART_FORMAT"]


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> (2, 4); an error names what is wrong."""
    try:
        k, n = (int(x) for x in str(text).split("/"))
    except ValueError:
        msg = f"--shard {text!r}: expected K/N, e.g. 1/4 (shard K of N, counted from 1)"
        raise SpecError(msg) from None
    if n < 1 or not 1 <= k <= n:
        msg = f"--shard {text!r}: K must be between 1 and N (N at least 1)"
        raise SpecError(msg)
    return k, n


def build_part(
    lib: LibrarySpec,
    *,
    shard: str,
    out_dir: str | os.PathLike,
    jobs: int | None = None,
    cache_dir: str | os.PathLike | None = None,
    log: Log = print,
    force: bool = False,
    keep_going: bool = False,
    report_all: bool = False,
    cluster: str | None = None,
    cache_url: str | None = None,
) -> Part:
    """Build shard ``K/N`` of ``lib`` into the part folder ``out_dir``; returns the part written.

    The keywords are :func:`~tl_aot.pipeline.library.build_library`'s (read as it reads them, the
    environment included); the part holds the shard's variants and what ``link`` needs of the library.
    """
    k, n = parse_shard(shard)
    t0 = time.perf_counter()
    opts = BuildOptions.settled(
        jobs=jobs,
        cache_dir=cache_dir,
        cache_url=cache_url,
        cluster=cluster,
        log=log,
        force=force,
        keep_going=keep_going,
        report_all=report_all,
    )
    ws = workspace(lib.name, out_dir, opts, what="part folder")
    if ws.unwritable is not None:
        raise ws.unwritable
    with ws.held(f"building shard {k}/{n} of {lib.name} in {ws.work.parent.parent}", log):
        whole = plan_build(lib, ws.cache, force=force)
        plan = whole.shard(k, n)
        if log:
            log(f"shard {k}/{n} of {lib.name}: {len(plan.tasks)} of {len(whole.tasks)} variants ({len(plan.todo)} to build)")
        run = build_variants(plan, ws, opts, launcher=False)
        part = _part_of(whole, plan, run, ws.work.parent.parent, k, n)
        part.write(run.lowered, run.images)
    if log:
        log(f"shard {k}/{n}: wrote {len(part.variants)} variant(s) to {part.folder} in {time.perf_counter() - t0:.1f} s")
    return part


def _part_of(whole: Plan, plan: Plan, run: VariantRun, folder: Path, k: int, n: int) -> Part:
    """The part shard ``k`` of ``n`` writes: the variants it made (and those the cache had), and the library's heads and keys."""
    lib = whole.lib
    records = choices_of(lib.entries)
    held = {spec.capture.key for spec in lib.entries if spec.capture}  # link keeps those whose kernel it holds
    return Part(
        folder=folder,
        library=lib.name,
        shard=k,
        of=n,
        lib_key=whole.lib_key,
        toolset=local_toolset().as_dict(),
        tasks=tuple(PartTask(t.spec.name, str(t.arch), t.key) for t in whole.tasks),
        nvcc_version=whole.nvcc_version,
        tvm_ffi_version=whole.tvm_ffi_version,
        tilelang_version=local_toolset(nvcc=False).tilelang,
        compiler=compiler_or_none(),
        entries=tuple(entry_head(spec) for spec in lib.entries),
        variants={t.key: f"variants/{t.key}.tlv" for t in plan.tasks if t.key in run.images},
        left_out=tuple(run.left_out),
        tunings=recorded_tunings(records, held) if records else (),
        calls=recorded_calls(records, held) if records else (),
    )


def check_parts(parts: list[Part]) -> tuple[int, dict[int, Part]]:
    """N and {K: part} of parts of one library; a mismatch, missing or duplicate shard is an error naming it."""
    first = parts[0]
    by_k: dict[int, Part] = {}
    for part in parts:
        if part.library != first.library:
            msg = f"{part.folder} is a part of library {part.library!r}, {first.folder} of {first.library!r}"
            raise PartError(msg)
        # tools first: other tools (nvcc) make other keys too, and the tools are what differs
        diff = differences(first.toolset, part.toolset, here_name=f"in {first.folder}", there_name=f"in {part.folder}")
        if diff:
            msg = f"{part.folder} and {first.folder} were built with different tools: {'; '.join(diff)}"
            raise PartError(msg)
        if part.lib_key != first.lib_key or part.tasks != first.tasks:
            msg = (
                f"{part.folder} and {first.folder} were built from different sources or specs of library {part.library!r} "
                "(their variant keys differ): build every shard from the same commit"
            )
            raise PartError(msg)
        if part.of != first.of:
            msg = f"{part.folder} is shard {part.spelled}, {first.folder} shard {first.spelled}: one N for every shard"
            raise PartError(msg)
        if part.shard in by_k:
            msg = f"shard {part.spelled} given twice: {by_k[part.shard].folder} and {part.folder}"
            raise PartError(msg)
        by_k[part.shard] = part
    n = first.of
    missing = [f"{k}/{n}" for k in range(1, n + 1) if k not in by_k]
    if missing:
        msg = f"library {first.library!r}: shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing (given: " + (
            ", ".join(f"{k}/{n} in {p.folder}" for k, p in sorted(by_k.items())) + ")"
        )
        raise PartError(msg)
    return n, by_k


def _left_out(first: Part, by_k: dict[int, Part], bad_code: tuple[LeftOut, ...] = ()) -> tuple[LeftOut, ...]:
    """The variants the shards left out (``--keep-going``) and those ``link --keep-going`` did, in the library's order."""
    found = {(x.entry, x.arch): x for part in by_k.values() for x in part.left_out}
    found.update({(x.entry, x.arch): x for x in bad_code})
    return tuple(found[(t.entry, t.arch)] for t in first.tasks if (t.entry, t.arch) in found)


def _launcher_of(first: Part, heads: list, lowered: dict, stages: Stages, *, jobs: int, keep_going: bool, log: Log):
    """The launcher of ``heads``; with ``keep_going``, without the entries whose generated code fails.

    Returns the heads kept, the launcher and a :class:`LeftOut` per variant left
    out (the compiler's first error line, named a tl_aot bug, as ``build --keep-going`` records it).
    """
    name, nvcc, tilelang = first.library, first.nvcc_version, first.tilelang_version
    left: list[LeftOut] = []
    while True:
        signatures = manifest_from(name, heads, lowered, nvcc, tilelang, compiler=first.compiler)
        try:
            launcher = stages.launcher_of(signatures, in_threads(jobs))  # its units on the job slots
            return heads, launcher, tuple(left)
        except LauncherCodeError as e:
            bad = set(e.entries)
            if not keep_going or not bad & {head.name for head, _ in heads}:
                raise
            for fault in e.bad:
                for head, arch_keys in heads:
                    if head.name in fault.entries:
                        left += [LeftOut(head.name, str(arch), fault.reason(head.name)) for arch, _ in arch_keys]
                if log:
                    lines = "".join(f"\n    {ln}" for ln in fault.errors)
                    log(f"link: left out {' + '.join(map(repr, fault.entries))}: its generated C++ does not compile, a tl_aot bug: "
                        f"please report it at {ISSUES} with these lines:{lines}")  # fmt: skip
            heads = [(head, arch_keys) for head, arch_keys in heads if head.name not in bad]
            if not heads:
                raise


def _variants_of(first: Part, by_k: dict[int, Part]) -> tuple[dict[str, LoweredVariant], dict[str, bytes], list[PartTask]]:
    """Every variant the parts hold, read and verified: (key -> variant, key -> image, the tasks not built)."""
    lowered: dict[str, LoweredVariant] = {}
    images: dict[str, bytes] = {}
    failed: list[PartTask] = []
    for i, task in enumerate(first.tasks):
        got = by_k[i % first.of + 1].variant(task)
        if got is None:
            failed.append(task)
            continue
        lowered[task.key], images[task.key] = got
    return lowered, images, failed


def _check_link_tools(first: Part) -> None:
    """The link's own tools must be the parts' (else the library would not be a one-machine build's)."""
    here = local_toolset().as_dict()
    # what the link itself runs: tl_aot's generator, tvm-ffi's headers, and the host compiler of the launcher and runtime
    mine = {f: here[f] for f in ("tl_aot", "tvm_ffi", "python", "cache_schema", "host_compiler")}
    theirs = {f: first.toolset.get(f, "") for f in mine}
    diff = differences(theirs, mine, here_name=f"in the parts ({first.folder})", there_name="here")
    if diff:
        msg = f"link: this machine's tools differ from the parts' (the library would not be a one-machine build's): {'; '.join(diff)}"
        raise PartError(msg)


def link_parts(
    folders: list[str | os.PathLike],
    *,
    out_dir: str | os.PathLike,
    header_dir: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    image_packs: ImagePacks | None = None,
    keep_going: bool = False,
    jobs: int | None = None,
    log: Log = print,
) -> Path:
    """Join the parts into ``out_dir/lib<name>.so`` (+ header): a one-machine build's last stages; returns the library's path.

    ``image_packs``: keep the images in one ``lib<name>.<arch>.tlpack`` per arch beside the library,
    as :func:`~tl_aot.pipeline.library.build_library` does with the same settings (the same bytes).
    ``keep_going``: entries whose generated launcher code does not compile are left out, every arch
    of them, and the rest linked (:func:`_launcher_of`). ``jobs``: what runs at once, as a build's
    ``-j``: the launcher's units compiled and the packs' images compressed; the library's bytes do not
    depend on it. Default: ``MAX_JOBS``, else the CPU count (:func:`~tl_aot.pipeline.scheduler.default_jobs`).

    Environment: ``MAX_JOBS`` (when ``jobs`` is None), ``TL_AOT_CACHE_DIR`` (when ``cache_dir`` is None).
    """
    t0 = time.perf_counter()
    if jobs is not None and (type(jobs) is not int or jobs < 1):
        msg = f"link: jobs must be a whole number of at least 1 (or None for MAX_JOBS / the CPU count), got {jobs!r}"
        raise SpecError(msg)
    if not folders:
        msg = "link: give the part folders (python -m tl_aot link PART... -o OUT)"
        raise PartError(msg)
    jobs = jobs or default_jobs()
    parts = [Part.read(Path(f).resolve()) for f in folders]
    _, by_k = check_parts(parts)
    first = parts[0]
    _check_link_tools(first)
    name = first.library
    lowered, images, failed = _variants_of(first, by_k)
    heads: list[tuple[LoweredEntry, list]] = []
    for head in first.entries:
        arch_keys = [(parse_arch(t.arch), t.key) for t in first.tasks if t.entry == head.name and t.key in lowered]
        if arch_keys:
            heads.append((head, arch_keys))
    if not heads:
        msg = f"link: no variant of library {name!r} was built in the parts"
        raise PartError(msg)
    out_dir = ensure_folder(Path(out_dir).resolve(), "output folder")
    work = ensure_folder(out_dir / ".tl_aot" / name, "work folder")
    header_dir = ensure_folder(Path(header_dir).resolve(), "header folder") if header_dir else out_dir
    out = Outputs(out_dir / f"lib{name}.so", header_dir / f"{name}.h", work / "stamp.json", None)
    cache = VariantCache(Path(cache_dir).resolve() if cache_dir else default_cache_dir(out_dir))
    nvcc = first.nvcc_version
    stages = Stages(work, cache, nvcc, first.tvm_ffi_version, Progress(2, None))
    heads, launcher, bad_code = _launcher_of(first, heads, lowered, stages, jobs=jobs, keep_going=keep_going, log=log)
    held = {head.capture_key for head, _ in heads}
    embedded = image_files_of_heads(heads, images)
    manifest = replace(
        with_image_sizes(launcher.manifest, embedded),
        left_out=_left_out(first, by_k, bad_code),
        tunings=tuple(t for t in first.tunings if t.request_key in held),
        calls=tuple(c for c in first.calls if c.request_key in held),
    )
    link_and_publish(
        manifest,
        embedded,
        launcher,
        stages.runtime(),
        work=work,
        out=out,
        cache=cache.root,
        key=stages.objects_key,
        provenance=Provenance(first.lib_key),
        stamp=False,
        packs=image_packs,
        jobs=jobs,
        log=log,
    )
    if log:
        if failed:
            log(f"left out {len(failed)} variant(s) the shards could not build: " + ", ".join(f"{t.entry} {t.arch}" for t in failed))
        log(f"linked {out.library} from {len(parts)} part(s) ({len(images)} variants) in {time.perf_counter() - t0:.1f} s; -j {jobs}")
    return out.library
