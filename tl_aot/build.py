"""The one build pipeline every front end calls: specs → lower → nvcc → launcher → lib<name>.so.

Lowering runs in this process (one entry/arch at a time, TileLang is not thread safe) while nvcc
compiles run concurrently; lowering and nvcc share one budget of ``jobs`` slots, like make's
jobserver, so ``-j 1`` is strictly serial and ``-j N`` never runs more than N tools at once. A
content-addressed cache skips unchanged variants, and an up-to-date library is detected without
importing TileLang at all.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .arch import Arch
from .cache import VariantCache, default_cache_dir, package_version, variant_key
from .codegen import image_symbol, render_header, render_launcher
from .errors import CompileError, FailedProcessError, LoweringError, TlAotError
from .fileutil import atomic_write, exclusive_lock, file_digest, write_if_different
from .lower_worker import LoweringPool
from .metadata import ABI_VERSION, ArchVariant, LoweredEntry, LoweredVariant, Manifest
from .options import inputs_unchanged
from .source import project_root
from .spec import KernelSpec, LibrarySpec
from .values import spell

__all__ = ["build_library", "BuildResult", "default_jobs"]

_TEMPLATES = Path(__file__).parent / "templates"


#: Memory one job may take: nvcc of a big TileLang kernel peaks near 1.5 GB; a lowering worker holds
#: TileLang, TVM and torch (about 0.4 GB for a GEMM, more for attention kernels).
JOB_MEMORY_GB = 1.5


def available_memory_gb() -> float | None:
    """MemAvailable from /proc/meminfo (None where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return None


def default_jobs() -> int:
    """Parallel jobs: ``MAX_JOBS`` if set (as torch users expect), else the CPU count within memory.

    At most one job per :data:`JOB_MEMORY_GB` of available memory (as flashinfer's builds derive
    theirs), so ``-j`` left to its default never makes a small machine swap.
    """
    env = os.environ.get("MAX_JOBS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, _jobs_in_memory(cpus)))


def _jobs_in_memory(otherwise: int) -> int:
    """How many :data:`JOB_MEMORY_GB` jobs available memory holds (``otherwise`` where it cannot be read)."""
    mem = available_memory_gb()
    return int(mem // JOB_MEMORY_GB) if mem is not None else otherwise


def lowering_workers(jobs: int, variants: int) -> int:
    """Lowering processes for a build of ``variants`` with ``jobs`` slots: a share of the slots, within memory.

    A variant spends about as long lowering as in nvcc once 16 jobs share the machine (2.0 s and
    2.1 s per variant in bench/scaling.py on the 16-core GPU machine; 1.3 s and 1.9 s alone), so
    half the slots lower and the rest compile: 0.4 measured 43 s, 0.5 40 s for 104 variants.
    One means this process, no worker: with ``-j 2`` or less, one lowering at a time keeps nvcc
    busy and no second TileLang import is paid for.
    """
    return max(1, min(variants, _jobs_in_memory(jobs), round(jobs * LOWERING_SHARE)))


#: The share of a build's job slots that lower (the rest run nvcc); see :func:`lowering_workers`.
LOWERING_SHARE = 0.5


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

    def summary(self) -> str:
        """A table: entry, arch, image size, seconds (cached variants marked)."""
        rows = [("entry", "arch", "image", "seconds")]
        for r in self.reports:
            rows.append((r.entry, r.arch, f"{r.image_bytes / 1024:.1f} KiB", "cached" if r.cached else f"{r.seconds:.1f}"))
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()


def _display_source(path: Path) -> str:
    """The kernel path as recorded in the library: relative to its project, whatever the working dir."""
    from .source import display_path

    return display_path(path)


def _what(lib: LibrarySpec) -> str:
    """``library 'x' (entries a, b for sm_80, sm_90a)``: the subject of errors raised before any entry runs."""
    archs = sorted({str(a) for e in lib.entries for a in e.archs})
    names = ", ".join(e.name for e in lib.entries)
    return f"library {lib.name!r} (entr{'y' if len(lib.entries) == 1 else 'ies'} {names} for {', '.join(archs)})"


def _check_toolchain(lib: LibrarySpec):
    """Find nvcc and check that it can target every arch asked for; errors name the library and entries."""
    from .errors import SpecError, ToolchainNotFound
    from .toolchain import find_nvcc, nvcc_version, supported_archs

    try:
        nvcc = find_nvcc()
    except ToolchainNotFound as e:
        msg = f"{_what(lib)}: {e}"
        raise ToolchainNotFound(msg) from None
    nv_version = nvcc_version(nvcc)
    known = supported_archs(nvcc)
    for spec in lib.entries:
        for arch in spec.archs:
            if known and arch.number not in known:
                msg = (
                    f"entry {spec.name!r} ({arch}) in {_display_source(spec.source)}: nvcc {nv_version} cannot build "
                    f"{arch.sm}; it targets sm_{', sm_'.join(str(n) for n in sorted(known))}"
                )
                raise SpecError(msg)
    return nvcc, nv_version


def _lib_key(lib: LibrarySpec, keys: list[str], tvm_ffi_version: str) -> str:
    templates = "".join(sorted(_digest(f.name, f.read_text()) for f in _generator_files()))
    return _digest(__version__, str(ABI_VERSION), lib.name, tvm_ffi_version, templates, *keys)


def _generator_files() -> list[Path]:
    """Files whose content shapes every library besides the kernels: templates and the launcher runtime."""
    from .toolchain import RUNTIME_SOURCES

    return sorted([*_TEMPLATES.glob("*.j2"), *RUNTIME_SOURCES])


class _Progress:
    """``[3/22] lower gemm_bf16 sm_90a``: one numbered line per step, from any thread."""

    def __init__(self, total: int, log) -> None:
        self.total = total
        self.n = 0
        self.log = log
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()

    def step(self, text: str) -> None:
        """One line: step count, time since the build started and, past a few steps, an estimate of what is left."""
        with self._lock:
            self.n += 1
            if self.log:
                elapsed = time.perf_counter() - self._t0
                left = elapsed / self.n * (self.total - self.n)
                eta = f", ~{left:.0f} s left" if self.n >= 3 and self.total - self.n > 1 else ""
                self.log(f"[{self.n}/{self.total} {elapsed:.1f} s{eta}] {text}")


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
) -> BuildResult:
    """Build ``lib`` into ``out_dir/lib<name>.so`` (+ ``<name>.h``); return what was built.

    Parameters
    ----------
    lib : LibrarySpec
        The library name and its entries (each with its archs).
    out_dir : path
        Where ``lib<name>.so`` goes. Intermediate files live in ``out_dir/.tl_aot/``.
    jobs : int, optional
        Concurrent nvcc compiles; default :func:`default_jobs` (reads ``MAX_JOBS``).
    cache_dir : path, optional
        Variant cache; default ``$TL_AOT_CACHE_DIR`` or ``out_dir/.tl_aot/cache``.
    header_dir : path, optional
        Where the C++ header goes; default ``out_dir``.
    depfile : path, optional
        Write a Makefile-style depfile (the library depends on every kernel file and local module).
    log : callable or None
        Receives one progress line per step and the summary.
    force : bool
        Rebuild every variant, ignoring the cache.
    keep_going : bool
        Leave out variants that fail to lower or compile (listed in ``failures`` and the log)
        instead of stopping; entries left with no arch are left out. A library with failures
        writes no up-to-date stamp, so the next build tries them again.

    """
    t_start = time.perf_counter()
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    header_dir = Path(header_dir).resolve() if header_dir else out_dir
    work = out_dir / ".tl_aot" / lib.name
    work.mkdir(parents=True, exist_ok=True)
    cache = VariantCache(Path(cache_dir) if cache_dir else default_cache_dir(out_dir))
    jobs = jobs or default_jobs()
    library = out_dir / f"lib{lib.name}.so"
    header = header_dir / f"{lib.name}.h"
    stamp = work / "stamp.json"

    with exclusive_lock(work / "build.lock"):
        _, nv_version = _check_toolchain(lib)
        tasks: list[tuple[KernelSpec, Arch, str]] = []
        all_deps: set[Path] = set()
        for spec in lib.entries:
            for arch in spec.archs:
                key, deps = variant_key(spec, arch, nvcc_version=nv_version)
                tasks.append((spec, arch, key))
                all_deps.add(Path(spec.source).resolve())
                all_deps.update(deps)
        tvm_ffi_version = package_version("apache-tvm-ffi")
        lib_key = _lib_key(lib, [t[2] for t in tasks], tvm_ffi_version)
        deps_sorted = tuple(sorted(all_deps))
        dep_path = Path(depfile) if depfile else None

        if not force and library.is_file() and header.is_file():
            try:
                old = json.loads(stamp.read_text())
            except (OSError, ValueError):
                old = {}
            inputs = [tuple(i) for i in old.get("inputs", []) if isinstance(i, list) and len(i) == 2]
            if old.get("key") == lib_key and old.get("library_sha256") == file_digest(library) and inputs_unchanged(inputs):
                from .metadata import from_json

                manifest = from_json(Manifest, old["manifest"])
                if dep_path:
                    _write_depfile(dep_path, library, tuple(sorted({*deps_sorted, *(Path(p) for p, _ in inputs)})))
                if log:
                    log(f"lib{lib.name}.so is up to date ({time.perf_counter() - t_start:.2f} s)")
                return BuildResult(library, header, manifest, True, (), (), dep_path, deps_sorted)

        cached: dict[str, tuple[LoweredVariant, bytes]] = {}
        todo = []
        for spec, arch, key in tasks:
            hit = None if force else cache.load(key, _project(spec))
            if hit is not None:
                cached[key] = hit
            else:
                todo.append((spec, arch, key))
        progress = _Progress(2 * len(todo) + 2, log)
        lowered: dict[str, LoweredVariant] = {key: hit[0] for key, hit in cached.items()}
        images: dict[str, bytes] = {key: hit[1] for key, hit in cached.items()}
        timings: dict[str, float] = {}
        rebuilt = []
        failures: list = []
        slots = threading.BoundedSemaphore(max(1, jobs))  # lowering, the launcher and nvcc share them
        workers = lowering_workers(jobs, len(todo))
        spent = {"lowering": 0.0, "nvcc": 0.0, "host": 0.0, "link": 0.0}
        with (
            cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool,
            cf.ThreadPoolExecutor(max_workers=workers) as lowering,
            LoweringPool(workers) if workers > 1 else contextlib.nullcontext() as processes,
        ):
            futures: dict[cf.Future, tuple[KernelSpec, Arch, str, LoweredVariant, float]] = {}
            pending: dict[cf.Future, tuple[KernelSpec, Arch, str]] = {}
            runtime = pool.submit(_runtime_object, cache.root, tvm_ffi_version, slots)

            def lower_one(spec: KernelSpec, arch: Arch) -> tuple[LoweredVariant, float]:
                from .lower import lower_variant

                progress.step(f"lower {spec.name} {arch}")
                with slots:
                    t0 = time.perf_counter()
                    variant = processes.lower(spec, arch) if processes else lower_variant(spec, arch)
                    return variant, time.perf_counter() - t0

            try:
                # In worker processes when several lowerings can run at once (TileLang is not thread
                # safe); each nvcc starts the moment its variant is lowered.
                pending.update({lowering.submit(lower_one, spec, arch): (spec, arch, key) for spec, arch, key in todo})
                for fut in cf.as_completed(pending):
                    spec, arch, key = pending[fut]
                    try:
                        variant, t_lower = fut.result()
                    except TlAotError as e:
                        if not keep_going:
                            raise
                        failures.append((spec.name, str(arch), str(e)))
                        continue
                    lowered[key] = variant
                    spent["lowering"] += t_lower
                    fut2 = pool.submit(_compile, variant, arch, work, spec, slots, cache, key, progress)
                    futures[fut2] = (spec, arch, key, variant, t_lower)
                # Everything the launcher and header say is known once lowering is done: compile the
                # launcher now, while nvcc still runs (image sizes go into the manifest's own unit).
                lib, tasks = _without_failures(lib, tasks, lowered, failures)
                header_text = _launcher(lib, tasks, lowered, nv_version, work, tvm_ffi_version, slots, spent, progress)
                nvcc_failed = False
                for fut in cf.as_completed(futures):
                    spec, arch, key, variant, t_lower = futures[fut]
                    try:
                        image, t_nvcc = fut.result()
                    except TlAotError as e:
                        if not keep_going:
                            raise
                        failures.append((spec.name, str(arch), str(e)))
                        lowered.pop(key, None)
                        nvcc_failed = True
                        continue
                    images[key] = image
                    timings[key] = t_lower + t_nvcc
                    spent["nvcc"] += t_nvcc
                    rebuilt.append((spec.name, str(arch)))
                if nvcc_failed:  # the launcher named images that failed: render and compile it without them
                    lib, tasks = _without_failures(lib, tasks, lowered, failures)
                    header_text = _launcher(lib, tasks, lowered, nv_version, work, tvm_ffi_version, slots, spent, progress)
                runtime_obj = runtime.result()
            except BaseException:  # leaving the `with` also kills the lowering workers
                for f in [*futures, *pending]:
                    f.cancel()
                raise

        manifest = _manifest(lib, tasks, lowered, nv_version, {key: len(image) for key, image in images.items()})
        image_files = {}
        for spec, arch, key in tasks:
            sym = image_symbol(spec.name, arch.sm, arch.ptx)
            path = work / f"{sym}.bin"
            if not path.is_file() or path.read_bytes() != images[key]:
                atomic_write(path, images[key])
            image_files[sym] = path
        t0 = time.perf_counter()
        _link(lib, work, manifest, image_files, runtime_obj)
        spent["link"] = time.perf_counter() - t0
        progress.step(f"link lib{lib.name}.so")
        tmp_lib = work / f"lib{lib.name}.so"
        shutil.copyfile(tmp_lib, work / f".lib{lib.name}.so.part")
        os.replace(work / f".lib{lib.name}.so.part", library)
        write_if_different(header, header_text)
        from .metadata import to_json

        inputs = sorted({tuple(i) for _, _, key in tasks for i in lowered[key].inputs})
        stamp_data = {"key": lib_key, "library_sha256": file_digest(library), "manifest": json.loads(to_json(manifest)), "inputs": inputs}
        if failures:
            stamp.unlink(missing_ok=True)  # the next build tries the failed variants again
        else:
            atomic_write(stamp, json.dumps(stamp_data))
        if dep_path:
            _write_depfile(dep_path, library, tuple(sorted({*deps_sorted, *(Path(p) for p, _ in inputs)})))
        reports = tuple(
            VariantReport(spec.name, str(arch), len(images[key]), timings.get(key, 0.0), key not in timings) for spec, arch, key in tasks
        )
        result = BuildResult(library, header, manifest, False, tuple(rebuilt), reports, dep_path, deps_sorted, tuple(failures))
        if log and failures:
            log(f"left out {len(failures)} variant(s) that failed (--keep-going):")
            for entry, arch, error in failures:
                log(f"  {entry} {arch}: {error.splitlines()[0][:300]}")
        if log:
            log(result.summary())
            if todo:
                where = f"{workers} worker processes" if workers > 1 else "this process"
                log(
                    f"job time: lowering {spent['lowering']:.1f} s ({where}), nvcc {spent['nvcc']:.1f} s, "
                    f"host compile {spent['host']:.1f} s, link {spent['link']:.1f} s; -j {jobs}"
                )
            log(f"built {library} in {time.perf_counter() - t_start:.1f} s")
        return result


def _user_location(spec: KernelSpec) -> str:
    """``kernels.py:12 (matmul)``: where the user's kernel function is defined."""
    from .source import function_line

    line = function_line(spec.source, spec.function)
    return f"{_display_source(spec.source)}:{line or '?'} ({spec.function})"


def _project(spec: KernelSpec) -> Path | None:
    """The project root of the entry's kernel file (cache entries store paths relative to it)."""
    src = Path(spec.source)
    return None if spec.capture or not src.is_file() else project_root(src)


def _compile(variant: LoweredVariant, arch: Arch, work: Path, spec: KernelSpec, slots, cache, key, progress) -> tuple[bytes, float]:
    """Run nvcc for one variant, holding one of the build's job slots; cached the moment it is done.

    Storing here, not when the build collects it, keeps finished work if the build is killed later.
    """
    with slots:
        image, seconds = _compile_now(variant, arch, work, _user_location(spec))
    cache.store(key, variant, image, _project(spec))
    progress.step(f"nvcc {variant.entry} {arch} ({len(image) / 1024:.0f} KiB, {seconds:.1f} s)")
    return image, seconds


def _compile_now(variant: LoweredVariant, arch: Arch, work: Path, source: str) -> tuple[bytes, float]:
    from .toolchain import compile_image

    t0 = time.perf_counter()
    stem = f"{variant.entry}__{arch.sm}{'_ptx' if arch.ptx else ''}"
    try:
        image = compile_image(
            arch, work / "kernels", stem, variant.cuda_source, variant.nvcc_options, what=f"nvcc ({variant.entry}, {arch})"
        )
    except FailedProcessError as e:
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
        raise CompileError(msg) from e
    return image, time.perf_counter() - t0


def _manifest(lib: LibrarySpec, tasks, lowered: dict, nv_version: str, image_sizes: dict | None = None) -> Manifest:
    """The library's manifest from each task's lowered variant; image sizes are 0 until nvcc is done."""
    entries = []
    for spec in lib.entries:
        variants = []
        first: LoweredVariant | None = None
        for s, arch, key in tasks:
            if s is not spec:
                continue
            v = lowered[key]
            if first is None:
                first = v
            elif (v.params, v.symbols) != (first.params, first.symbols):
                msg = (
                    f"entry {spec.name!r}: its signature differs between {first.arch} and {v.arch} "
                    f"({_sig(first)} vs {_sig(v)}); one entry must take the same arguments on every arch"
                )
                raise LoweringError(msg)
            variants.append(
                ArchVariant(
                    arch=arch.sm,
                    ptx=arch.ptx,
                    kernels=v.kernels,
                    tma_descriptors=v.tma_descriptors,
                    image_bytes=(image_sizes or {}).get(key, 0),
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
                )
            )
        entries.append(
            LoweredEntry(
                name=spec.name,
                source=_display_source(spec.source),
                function=spec.function,
                args=_spelled_args(spec),
                params=first.params,
                symbols=first.symbols,
                variants=tuple(variants),
                export=spec.export,
                when=spec.when,
                fallback=spec.fallback,
                capture_key=spec.capture[1] if spec.capture else "",
                capture_name=spec.capture[2] if spec.capture else "",
            )
        )
    return Manifest(
        abi_version=ABI_VERSION,
        library=lib.name,
        entries=tuple(entries),
        tl_aot_version=__version__,
        tilelang_version=package_version("tilelang"),
        nvcc_version=nv_version,
    )


def _without_failures(lib: LibrarySpec, tasks: list, lowered: dict, failures: list) -> tuple[LibrarySpec, list]:
    """The library and tasks left once failed variants are dropped (entries with no arch left go too)."""
    kept = [t for t in tasks if t[2] in lowered]
    if len(kept) == len(tasks):
        return lib, tasks
    names = {t[0].name for t in kept}
    entries = tuple(e for e in lib.entries if e.name in names)
    if not entries:
        shown = "\n".join(f"  {e} {a}: {err}" for e, a, err in failures[:5])
        msg = f"library {lib.name!r}: every variant failed; nothing to link:\n{shown}"
        raise LoweringError(msg)
    return LibrarySpec(name=lib.name, entries=entries), kept


def _launcher(lib, tasks, lowered, nv_version, work: Path, tvm_ffi_version: str, slots, spent: dict, progress) -> str:
    """Render the header and launcher of what was lowered and compile the launcher; returns the header text."""
    signatures = _manifest(lib, tasks, lowered, nv_version)
    header_text = render_header(signatures)
    write_if_different(work / f"{lib.name}.h", header_text)
    write_if_different(work / f"{lib.name}.cc", render_launcher(signatures, header_name=f"{lib.name}.h"))
    with slots:
        t0 = time.perf_counter()
        compiled = _compile_launcher(lib, work, tvm_ffi_version)
        spent["host"] += time.perf_counter() - t0
    done = f"{time.perf_counter() - t0:.1f} s" if compiled else "unchanged, reused"
    progress.step(f"launcher {lib.name}.cc ({len(lib.exports)} entries, {done})")
    return header_text


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


def _compile_launcher(lib: LibrarySpec, work: Path, tvm_ffi_version: str) -> bool:
    """Compile ``<lib>.cc`` unless the object of this very text and command is already there; True if compiled.

    Editing one kernel usually leaves the launcher's text unchanged (same signatures and launch
    shapes), so such a rebuild skips this 2-3 s compile. The key file is removed before compiling
    and written after, so a compile killed half way is never taken for a finished one.
    """
    from .toolchain import compiler_launcher, host_command, run

    source, obj = f"{lib.name}.cc", f"{lib.name}.launcher.o"
    cmd = host_command(work, source, obj)
    key = _digest((work / source).read_text(), *cmd, tvm_ffi_version)
    key_file = work / f"{obj}.key"
    with contextlib.suppress(OSError):
        if (work / obj).is_file() and key_file.read_text() == key:
            return False
    key_file.unlink(missing_ok=True)
    run([*compiler_launcher(), *cmd], what=f"compiling the launcher of {lib.name}", cwd=work)
    atomic_write(key_file, key)
    return True


def _runtime_object(cache_root: Path, tvm_ffi_version: str, slots) -> Path:
    """The launcher runtime's object (compiled once per toolchain into the cache), holding a job slot if compiling."""
    from .toolchain import runtime_object

    with slots:
        obj, _ = runtime_object(cache_root, extra_key=f"tl_aot {__version__}, tvm-ffi {tvm_ffi_version}")
    return obj


def _link(lib: LibrarySpec, work: Path, manifest: Manifest, images: dict[str, Path], runtime_obj: Path) -> None:
    """Compile the manifest unit, embed the images into the launcher object and link lib<name>.so with the runtime."""
    from .codegen import render_manifest
    from .toolchain import compile_host, embed_images, link_library

    write_if_different(work / f"{lib.name}.manifest.cc", render_manifest(manifest))
    compile_host(work, f"{lib.name}.manifest.cc", f"{lib.name}.manifest.o", what=f"compiling the manifest of {lib.name}")
    embed_images(work, f"{lib.name}.launcher.o", {k: Path(v) for k, v in images.items()}, f"{lib.name}.o")
    link_library(work, [f"{lib.name}.o", f"{lib.name}.manifest.o", str(runtime_obj)], f"lib{lib.name}.so", what=f"linking lib{lib.name}.so")


def _write_depfile(path: Path, target: Path, deps) -> None:
    def esc(p) -> str:
        return str(p).replace("\\", "\\\\").replace(" ", "\\ ").replace("#", "\\#").replace("$", "$$")

    templates = _generator_files()
    lines = [f"{esc(target)}: \\"] + [f"  {esc(d)} \\" for d in [*deps, *templates]]
    lines[-1] = lines[-1][:-2]
    write_if_different(path, "\n".join(lines) + "\n")


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m tl_aot build ...")
