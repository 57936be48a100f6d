"""The stages of a build after the plan: lower → compile images → launcher → link → publish.

Each stage is a function that takes what the one before produced, says what it returns and what
it may raise, and knows nothing of threads (:mod:`tl_aot.scheduler` runs them in parallel).

* :meth:`Stages.lower`: a task → its :class:`~tl_aot.metadata.LoweredVariant`; raises
  :class:`LoweringError`, also when a kernel file or local module changed while it was lowered
  (the variant would not be the one its key names).
* :meth:`Stages.compile`: a lowered variant → its image, stored in the cache; raises
  :class:`CompileError`, also when a header its flags name changed during nvcc.
* :meth:`Stages.launcher`: the lowered variants → the launcher object and the header's text.
* :func:`link`: the manifest, images, launcher and runtime objects → ``lib<name>.so`` in the work folder.
* :func:`publish`: that library, its header, stamp and depfile moved into place.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from .cache import VariantCache
from .captured import recorded_calls
from .codegen import image_symbol, render_header, render_launcher
from .cuda_compat import image_floor, library_floor
from .destinations import StagedFiles, disk_full_note, filesystem_errors
from .errors import CompileError, FailedProcessError, LoweringError, ToolchainNotFound, tool_signal
from .escaping import depfile_path, encode_text
from .fileutil import atomic_write, file_digest, write_if_different
from .host_objects import generated_object, runtime_object
from .image_check import variant_image_problem
from .metadata import ABI_VERSION, ArchVariant, LoweredEntry, LoweredVariant, Manifest, to_json
from .source import display_path, function_line, project_root, snapshot_files
from .spec import KernelSpec, LibrarySpec
from .toolchain import compiler_description
from .tuning import recorded_tunings
from .values import spell
from .versions import __version__, package_version

__all__ = [
    "Stages",
    "link",
    "publish",
    "manifest_of",
    "objects_key",
    "project_of",
    "sweep_debris",
    "image_of",
    "entry_head",
    "manifest_from",
    "image_files",
    "image_files_by_symbol",
]


def project_of(spec: KernelSpec) -> Path | None:
    """The project root of the entry's kernel file (cache entries store paths relative to it)."""
    src = Path(spec.source)
    return None if spec.capture or not src.is_file() else project_root(src)


@dataclass
class Stages:
    """The per-variant stages of one build, bound to its work folder, cache and progress lines."""

    work: Path
    cache: VariantCache
    nvcc_version: str
    tvm_ffi_version: str
    progress: object
    force: bool = False

    def lower(self, task, lower_fn=None) -> LoweredVariant:
        """Lower ``task`` (in a worker process through ``lower_fn``, else here) and check its sources did not move."""
        from .lower import lower_variant

        variant = (lower_fn or lower_variant)(task.spec, task.arch)
        changed = task.sources.changed()
        if changed:
            files = ", ".join(display_path(f) for f in changed)
            msg = (
                f"entry {task.spec.name!r} ({task.arch}): {files} changed while the build was lowering it; "
                "nothing was built from it. Build again once the file is saved."
            )
            raise LoweringError(msg, entry=task.spec.name, arch=task.arch.sm, location=files)
        return variant

    def compile(self, task, variant: LoweredVariant) -> bytes:
        """Run nvcc for one variant and store it in the cache, unless a header it includes changed meanwhile."""
        headers = snapshot_files([p for p, _ in variant.inputs])
        t0 = time.perf_counter()
        image = image_of(variant, task.arch, self.work, _user_location(task.spec))
        moved = headers.changed() or tuple(p for p, d in variant.inputs if headers.files and _digest_of(headers, p) != d)
        if moved:
            msg = (
                f"entry {task.spec.name!r} ({task.arch}): {', '.join(moved)} changed while nvcc compiled it; "
                "nothing was stored. Build again."
            )
            raise CompileError(msg, entry=task.spec.name, arch=task.arch.sm, location=", ".join(moved))
        problem = variant_image_problem(variant, image)
        if problem:
            tool = "CuTeDSL" if variant.backend == "cutedsl" else "nvcc"
            disk = disk_full_note(self.work, tempfile.gettempdir())
            cause = f"; {disk}: free some space and build again" if disk else " (a tool that ran out of space, or was killed?)"
            msg = f"entry {task.spec.name!r} ({task.arch}): {tool} made a damaged image, {problem}; nothing was stored{cause}"
            raise CompileError(msg, entry=task.spec.name, arch=task.arch.sm)
        self.cache.store(task.key, variant, image, project_of(task.spec), replace=self.force)
        tool = "cutedsl" if variant.backend == "cutedsl" else "nvcc"
        self.progress.step(f"{tool} {task.spec.name} {task.arch} ({len(image) / 1024:.0f} KiB, {time.perf_counter() - t0:.1f} s)")
        return image

    def launcher(self, run) -> tuple[str, Path]:
        """Render the header and launcher of what was lowered and compile the launcher; returns the header text and the object.

        The object comes from the cache when a build (of this library or another, into any folder)
        compiled the same text with the same toolchain: editing one kernel usually leaves the
        launcher's text unchanged (same signatures and launch shapes), and a fresh output folder
        with a warm cache needs no compile at all.
        """
        lib = LibrarySpec(name=run.lib_name, entries=_entries_of(run.tasks))
        signatures = manifest_of(lib, run.tasks, run.lowered, self.nvcc_version)
        header_text = render_header(signatures)
        launcher_text = render_launcher(signatures, header_name=f"{lib.name}.h")
        write_if_different(self.work / f"{lib.name}.h", header_text)  # kept to read, and named in compile errors
        write_if_different(self.work / f"{lib.name}.cc", launcher_text)
        t0 = time.perf_counter()
        obj, compiled = generated_object(
            self.cache.root,
            {f"{lib.name}.cc": launcher_text, f"{lib.name}.h": header_text},
            f"{lib.name}.cc",
            f"{lib.name}.launcher.o",
            extra_key=self.objects_key,
            what=f"compiling the launcher of {lib.name} ({self.work / (lib.name + '.cc')})",
            force=self.force,
        )
        done = f"{time.perf_counter() - t0:.1f} s" if compiled else "unchanged, reused"
        self.progress.step(f"launcher {lib.name}.cc ({len(lib.exports)} entries, {done})")
        return header_text, obj

    def runtime(self) -> Path:
        """The launcher runtime's object (compiled once per toolchain into the cache; again with ``force``)."""
        obj, _ = runtime_object(self.cache.root, extra_key=self.objects_key, force=self.force)
        return obj

    @property
    def objects_key(self) -> str:
        """See :func:`objects_key`."""
        return objects_key(self.nvcc_version, self.tvm_ffi_version)

    @staticmethod
    def without_failures(run) -> list:
        """The tasks left once failed variants are dropped (an error if none is left)."""
        kept = [t for t in run.tasks if t.key in run.lowered]
        if not kept:
            shown = "\n".join(f"  {e} {a}: {err}" for e, a, err in run.failures[:5])
            msg = f"library {run.lib_name!r}: every variant failed; nothing to link:\n{shown}"
            raise LoweringError(msg)
        return kept


def objects_key(nvcc_version: str, tvm_ffi_version: str) -> str:
    """The versions the host objects kept in the cache are keyed by, beside their text and command."""
    return f"tl_aot {__version__}, tvm-ffi {tvm_ffi_version}, nvcc {nvcc_version}"


def _digest_of(snapshot, path: str) -> str:
    return next((d for p, _, _, d in snapshot.files if p == path), "missing")


def _entries_of(tasks) -> tuple:
    """The entries the tasks cover, in the library's order."""
    seen: dict = {}
    for t in tasks:
        seen.setdefault(t.spec.name, t.spec)
    return tuple(seen.values())


def _user_location(spec: KernelSpec) -> str:
    """``kernels.py:12 (matmul)``: where the user's kernel function is defined."""
    line = function_line(spec.source, spec.function)
    return f"{display_path(spec.source)}:{line or '?'} ({spec.function})"


def image_of(variant: LoweredVariant, arch, work: Path, source: str, *, path_map=()) -> bytes:
    """The image of one lowered variant (nvcc, or CuTeDSL for a ``cutedsl`` variant), compiled under ``work``.

    ``source`` (``kernels.py:12 (matmul)``) is where errors point; ``path_map`` ((old, new) folder
    pairs) respells paths in the image's line table: a cluster worker's copy of the sources as the
    driver's folder, so the image is the driver's own.
    """
    if variant.backend == "cutedsl":
        return _cutedsl(variant, arch, work)
    return _nvcc(variant, arch, work, source, path_map)


def _nvcc(variant: LoweredVariant, arch, work: Path, source: str, path_map=()) -> bytes:
    """The image of one variant; nvcc's error says which entry and user code it came from."""
    from .toolchain import compile_image

    stem = f"{variant.entry}__{arch.sm}{'_ptx' if arch.ptx else ''}"
    try:
        return compile_image(
            arch,
            work / "kernels",
            stem,
            variant.cuda_source,
            variant.nvcc_options,
            what=f"nvcc ({variant.entry}, {arch})",
            path_map=path_map,
        )
    except FailedProcessError as e:
        crash = _crash_of(e, work)
        if crash:
            raise CompileError(f"entry {variant.entry!r} ({arch}): {crash}", entry=variant.entry, arch=arch.sm, location=source) from e
        hint = ""
        if variant.nvcc_options and re.search(r"Unknown option|unknown option|Unsupported|invalid", e.stderr + e.stdout):
            hint = (
                f"\n  the extra nvcc flags ({' '.join(variant.nvcc_options)}) come from the entry's compile_flags / "
                "--nvcc-flag, or the kernel's TL_DEVICE_COMPILE_FLAGS pass config"
            )
        msg = (
            f"entry {variant.entry!r} ({arch}): nvcc failed on the CUDA code TileLang generated from {source}\n"
            f"  generated source: {work / 'kernels' / (stem + '.cu')}{hint}\n{e}"
        )
        raise CompileError(msg, entry=variant.entry, arch=arch.sm, location=source) from e


def _crash_of(e: FailedProcessError, work: Path) -> str:
    """For a tool that died of a signal on a nearly full disk: what happened, in words ("" otherwise).

    cicc and ptxas crash (SIGSEGV, SIGBUS) rather than report a failed write when the disk fills
    under them; the CUDA code is not at fault then, and saying so would send the user the wrong way.
    """
    sig = tool_signal(e.returncode)
    if sig is None or sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL, signal.SIGHUP):
        return ""
    disk = disk_full_note(work, tempfile.gettempdir())
    tool = Path(e.cmd[0]).name if e.cmd else "the tool"
    if disk:
        return f"{tool} died of {sig.name} with the {disk}; free some space and build again"
    return ""


def _cutedsl(variant: LoweredVariant, arch, work: Path) -> bytes:
    """The cubin CuTeDSL compiles from the variant's generated module; every launch's kernel pattern matched once in it."""
    from .cutedsl import compile_cubin, match_kernels

    image, module = compile_cubin(variant, arch, work)
    match_kernels(variant.kernels, image, entry=variant.entry, arch=arch.sm)
    shutil.rmtree(module.parent, ignore_errors=True)
    return image


def link(
    name: str, work: Path, manifest: Manifest, images: dict, objects: tuple[Path, Path], *, cache: Path, key: str, force: bool = False
) -> Path:
    """Link ``lib<name>.so`` in the work folder from the images (symbol -> bytes) and the objects.

    Writes the images, compiles the manifest unit (or takes its object from ``cache``, keyed with
    ``key``: :func:`objects_key`), embeds the images into a copy of the launcher object and links
    it with the runtime object. ``objects``: the launcher's and the runtime's, both in the cache
    (read, never modified).
    """
    from .codegen import render_manifest
    from .toolchain import embed_images, link_library

    launcher_obj, runtime_obj = objects
    files = {}
    for sym, image in images.items():
        path = work / f"{sym}.bin"
        if _read_bytes(path) != image:
            atomic_write(path, image)
        files[sym] = path
    text = render_manifest(manifest)
    write_if_different(work / f"{name}.manifest.cc", text)
    manifest_obj, _ = generated_object(
        cache,
        {f"{name}.manifest.cc": text},
        f"{name}.manifest.cc",
        f"{name}.manifest.o",
        extra_key=key,
        what=f"compiling the manifest of {name}",
        force=force,
    )
    embed_images(work, str(launcher_obj), files, f"{name}.o")
    link_library(work, [f"{name}.o", str(manifest_obj), str(runtime_obj)], f"lib{name}.so", what=f"linking lib{name}.so")
    return work / f"lib{name}.so"


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


@dataclass(frozen=True)
class Outputs:
    """Where a build puts what it publishes."""

    library: Path
    header: Path
    stamp: Path
    depfile: Path | None


def publish(
    built: Path, out: Outputs, manifest: Manifest, header_text: str, *, lib_key: str, inputs: list, deps: tuple, stamp: bool
) -> None:
    """Swap the linked library and its header into place together, after writing the stamp and the depfile.

    The stamp names the new library's digest, so written first it cannot make the library that
    is still in place look up to date; a fault before the swap leaves library and header as they
    were. Without ``stamp`` (a build that left variants out) the stamp is removed: the next build
    tries again.
    """
    staged = StagedFiles()
    try:
        staged.stage(out.library, source=built, role="library")
        header = header_text.encode()
        if _read_bytes(out.header) != header:  # an unchanged header keeps its timestamp
            with filesystem_errors("create the header folder", out.header.parent):
                out.header.parent.mkdir(parents=True, exist_ok=True)
            staged.stage(out.header, data=header, role="header")
        with filesystem_errors("read the linked library", built):
            library_sha256 = file_digest(built)
        with filesystem_errors("write the build stamp", out.stamp):
            if stamp:
                data = {
                    "key": lib_key,
                    "library_sha256": library_sha256,
                    "header_sha256": hashlib.sha256(header).hexdigest(),
                    "manifest": json.loads(to_json(manifest)),
                    "inputs": inputs,
                }
                atomic_write(out.stamp, json.dumps(data))
            else:
                out.stamp.unlink(missing_ok=True)
        if out.depfile:
            with filesystem_errors("write the depfile", out.depfile):
                write_depfile(out.depfile, out.library, tuple(sorted({*deps, *(Path(p) for p, _ in inputs)})))
    except BaseException:
        staged.discard()
        raise
    staged.publish()


def write_depfile(path: Path, target: Path, deps) -> None:
    """A Makefile depfile: the library depends on the kernel files, local modules, headers and tl_aot's templates."""
    from .build_plan import generator_files

    lines = [f"{depfile_path(target)}: \\"] + [f"  {depfile_path(d)} \\" for d in [*deps, *generator_files()]]
    lines[-1] = lines[-1][:-2]
    write_if_different(path, encode_text("\n".join(lines) + "\n"))


def sweep_debris(work: Path, out: Outputs | None = None) -> None:
    """Remove what killed builds of this library left in its work folder and beside its outputs (the caller holds its lock)."""
    beside = [p for f in (out.library, out.header) for p in f.parent.glob(f".{f.name}.*") if p.suffix in (".part", ".old")] if out else []
    for p in [*work.glob(".lib*.part"), *beside]:
        with contextlib.suppress(OSError):
            p.unlink()
    kernels = work / "kernels"
    if kernels.is_dir():
        for p in kernels.iterdir():
            if p.name.startswith(".") and p.is_dir():
                shutil.rmtree(p, ignore_errors=True)


def manifest_of(lib: LibrarySpec, tasks, lowered: dict, nvcc_version: str, image_sizes: dict | None = None) -> Manifest:
    """The library's manifest from each task's lowered variant; image sizes are 0 until nvcc is done."""
    heads = [(entry_head(spec), [(t.arch, t.key) for t in tasks if t.spec is spec]) for spec in lib.entries]
    manifest = manifest_from(lib.name, heads, lowered, nvcc_version, package_version("tilelang"), image_sizes)
    records = {spec.capture[0] for spec in lib.entries if spec.capture}
    if records:  # the autotuner's recorded choices and the served call keys whose kernels the library holds
        held = {e.capture_key for e in manifest.entries}
        manifest = replace(manifest, tunings=recorded_tunings(records, held), calls=recorded_calls(records, held))
    return manifest


def entry_head(spec: KernelSpec) -> LoweredEntry:
    """The part of an entry's manifest record its spec decides (no params, symbols or variants yet)."""
    return LoweredEntry(
        name=spec.name,
        source=display_path(spec.source),
        function=spec.function,
        args=_spelled_args(spec),
        params=(),
        symbols=(),
        variants=(),
        export=spec.export,
        when=spec.when,
        fallback=spec.fallback,
        capture_key=spec.capture[1] if spec.capture else "",
        capture_name=spec.capture[2] if spec.capture else "",
    )


def manifest_from(
    name: str,
    heads,
    lowered: dict,
    nvcc_version: str,
    tilelang_version: str,
    image_sizes: dict | None = None,
    *,
    compiler: str | None = None,
) -> Manifest:
    """The manifest of library ``name``: ``heads`` are (:func:`entry_head`, [(arch, key), ...]) in the library's order.

    Also what ``python -m tl_aot link`` makes from build shards, which hold heads and variants, not
    specs; ``compiler`` (default: this machine's) is then the one the shards recorded.
    """
    entries = []
    for head, arch_keys in heads:
        first = lowered[arch_keys[0][1]]
        for _, key in arch_keys[1:]:
            v = lowered[key]
            if (v.params, v.symbols) != (first.params, first.symbols):
                msg = (
                    f"entry {head.name!r}: its signature differs between {first.arch} and {v.arch} "
                    f"({_sig(first)} vs {_sig(v)}); one entry must take the same arguments on every arch"
                )
                raise LoweringError(msg)
        sizes = image_sizes or {}
        variants = tuple(_arch_variant(arch, lowered[key], sizes.get(key, 0), nvcc_version) for arch, key in arch_keys)
        entries.append(replace(head, params=first.params, symbols=first.symbols, variants=variants))
    floor = library_floor(_pair(v.min_driver_cuda) for e in entries for v in e.variants)
    return Manifest(
        abi_version=ABI_VERSION,
        library=name,
        entries=tuple(entries),
        tl_aot_version=__version__,
        tilelang_version=tilelang_version,
        nvcc_version=nvcc_version,
        compiler=_compiler() if compiler is None else compiler,
        driver_min_cuda=floor.min_cuda,
        driver_min_version=floor.min_version,
    )


def _compiler() -> str:
    """The compiler's description, or "" where none is found (a manifest made without building images)."""
    try:
        return compiler_description()
    except ToolchainNotFound:
        return ""


def _pair(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def _arch_variant(arch, v: LoweredVariant, image_bytes: int, compiler_version: str) -> ArchVariant:
    cuda = compiler_version.split()[0] if v.backend == "cuda" else ""  # CuTeDSL images come from its own compiler
    floor = image_floor(cuda or "12.0", ptx=arch.ptx, backend=v.backend)
    return ArchVariant(
        arch=arch.sm,
        ptx=arch.ptx,
        kernels=v.kernels,
        tma_descriptors=v.tma_descriptors,
        image_bytes=image_bytes,
        image_kind="fatbin" if arch.ptx else "cubin",
        workspaces=v.workspaces,
        device=v.device,
        config=v.config,
        config_source=v.config_source,
        pass_configs=v.pass_configs,
        compile_flags=v.compile_flags,
        nvcc_options=v.nvcc_options,
        func_hash=v.func_hash,
        resolved=v.resolved,
        request_key=v.request_key,
        request=v.request,
        backend=v.backend,
        cuda_version=cuda,
        min_driver_cuda=f"{floor[0]}.{floor[1]}",
        device_code=v.device_code,
    )


def _spelled_args(spec: KernelSpec) -> tuple:
    """The entry's arguments as the manifest shows them; pinned ones as ``factory_args.x`` / ``jit_args.x``."""
    if spec.capture:
        return tuple(spec.capture[3])  # the captured call's arguments, as recorded
    out = [(k, spell(v)) for k, v in spec.args]
    out += [(f"factory_args.{k}", spell(v)) for k, v in spec.factory_args]
    out += [(f"jit_args.{k}", spell(v)) for k, v in spec.jit_args]
    if spec.select:
        out.append(("select", repr(spec.select)))
    return tuple(out)


def _sig(v: LoweredVariant) -> str:
    return ", ".join(f"{p.name}:{p.dtype}{list(p.shape) if p.is_tensor else ''}" for p in v.params)


def image_files(tasks, images: dict) -> dict:
    """Image symbol -> bytes for the tasks' variants."""
    return {image_symbol(t.spec.name, t.arch.sm, t.arch.ptx): images[t.key] for t in tasks}


def image_files_by_symbol(heads, images: dict) -> dict:
    """Image symbol -> bytes for :func:`manifest_from`'s heads ((entry head, [(arch, key), ...]))."""
    return {image_symbol(head.name, arch.sm, arch.ptx): images[key] for head, arch_keys in heads for arch, key in arch_keys}
