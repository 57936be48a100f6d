"""The per-variant stages of a build: lower → compile images → launcher (then :mod:`tl_aot.pipeline.link` links and publishes).

Each stage is a function that takes what the one before produced, says what it returns and what
it may raise, and knows nothing of threads (:mod:`tl_aot.pipeline.scheduler` runs them in parallel).

* :meth:`Stages.lower`: a task → its :class:`~tl_aot.common.metadata.LoweredVariant`; raises
  :class:`LoweringError`, also when a kernel file or local module changed while it was lowered
  (the variant would not be the one its key names).
* :meth:`Stages.compile_many`: lowered variants → their images
  (:mod:`tl_aot.pipeline.images`; several at once share one nvcc front end), stored in the cache;
  raises :class:`CompileError`, also when a header its flags name changed during nvcc.
* :meth:`Stages.launcher`: the lowered variants → a :class:`Launcher`: the launcher object and the
  header's text, the torch companion's source written beside them (a big
  library's launcher is several units, compiled as independent jobs the caller runs: ``each``);
  raises :class:`~tl_aot.pipeline.launcher_faults.LauncherCodeError` naming the entries whose
  generated code fails to compile (a tl_aot bug: found by compiling the failing units' entries apart).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..capture.record_specs import origin_of_spec
from ..codegen import launcher_units
from ..codegen.launcher_context import library_code
from ..codegen.render import LauncherUnit, render_header, render_launcher_sources, render_launcher_units
from ..codegen.torch_native import companion_source_name, render_companion
from ..common.destinations import disk_full_note
from ..common.errors import CompileError, LoweringError, TlAotError
from ..common.fileutil import write_if_different
from ..common.metadata import LoweredVariant, Manifest
from ..common.versions import __version__
from ..config.kernel_spec import KernelSpec, LibrarySpec
from ..config.user_code import display_path, function_line, snapshot_files
from ..cuda.host_objects import combined_object, compile_apart, generated_object, runtime_object
from ..cuda.image_check import variant_image_problem
from .cache import VariantCache
from .images import image_of, images_of
from .launcher_faults import LauncherCodeError, code_fault, find_bad_code
from .manifest import manifest_of
from .relabel import Hit, walked_again
from .variant_run import Launcher

if TYPE_CHECKING:
    from .plan import Task
    from .progress import Progress
    from .shared_cache import SharedCache
    from .variant_run import VariantRun

__all__ = ["Each", "Launcher", "Stages", "objects_key", "one_by_one", "image_of"]

#: Runs independent jobs and returns their results in order (the first error raised): the
#: launcher's units. :func:`one_by_one` here; the scheduler runs them in its job slots.
Each = Callable[[Sequence[Callable[[], Any]]], list[Any]]


def one_by_one(jobs: Sequence[Callable[[], Any]]) -> list[Any]:
    """Run ``jobs`` one after another."""
    return [job() for job in jobs]


@dataclass
class Stages:
    """The per-variant stages of one build, bound to its work folder, cache and progress lines."""

    work: Path
    cache: VariantCache | SharedCache
    nvcc_version: str
    tvm_ffi_version: str
    progress: Progress
    force: bool = False
    #: How much of TileLang's C++ log lowering shows: off (quiet), warnings, raw (tl_aot.lower.native_log)
    native_log: str = "warnings"
    #: (kernel file, function) -> ``kernels.py:12 (matmul)``: each file parsed once per build, not once per variant
    locations: dict[tuple[str, str], str] = field(default_factory=dict, repr=False, compare=False)
    #: the cache hits another tl_aot walk labelled, by key (:func:`~tl_aot.pipeline.relabel.walk_again`): walked before lowered
    walk_again: Mapping[str, Hit] = field(default_factory=dict, repr=False, compare=False)
    #: those :meth:`lower` kept: the same kernel, relabelled
    relabelled: dict[str, LoweredVariant] = field(default_factory=dict, repr=False, compare=False)

    def lower(self, task, lower_fn=None) -> LoweredVariant:
        """Lower ``task`` (in a worker process through ``lower_fn``, else here) and check its sources did not move.

        A cache hit another tl_aot walk labelled (``walk_again``) is walked again first, here: the same
        request is the same kernel, returned with this walk's label and kept (:meth:`kept`), not lowered.
        """
        from ..lower.lower import lower_variant

        hit = self.walk_again.get(task.key)
        if hit is not None:
            again = walked_again(task, hit, native_log=self.native_log)
            if again is not None:
                self.relabelled[task.key] = again
                return again
        variant = lower_fn(task.spec, task.arch) if lower_fn else lower_variant(task.spec, task.arch, native_log=self.native_log)
        changed = task.sources.changed()
        if changed:
            files = ", ".join(display_path(f) for f in changed)
            msg = (
                f"entry {task.spec.name!r} ({task.arch}): {files} changed while the build was lowering it; "
                "nothing was built from it. Build again once the file is saved."
            )
            raise LoweringError(msg, entry=task.spec.name, arch=task.arch.sm, location=files)
        return variant

    def kept(self, task, variant: LoweredVariant) -> bytes | None:
        """The cached image of ``variant`` when :meth:`lower` kept a hit walked again (stored relabelled); None: compile it."""
        if self.relabelled.get(task.key) is not variant:
            return None
        image = self.walk_again[task.key][1]
        with contextlib.suppress(TlAotError):  # a cache that cannot be written: walked again next time
            self.cache.store(task.key, variant, image, task.project, replace=True)
        self.progress.step(f"kept {task.spec.name} {task.arch} (walked again: the same kernel)")
        return image

    def compile_many(self, pairs: list) -> list:
        """Images of several (task, variant) pairs, each checked and stored in the cache; each item an image or its error.

        Variants of one arch compile together (:func:`~tl_aot.pipeline.images.images_of`): nvcc parses
        the headers every TileLang kernel includes once for the batch, not once per variant.
        """
        out: list = [None] * len(pairs)
        by_arch: dict[str, list[int]] = {}
        for i, (task, _) in enumerate(pairs):
            by_arch.setdefault(str(task.arch), []).append(i)
        for members in by_arch.values():
            headers = [snapshot_files([p for p, _ in pairs[i][1].inputs]) for i in members]
            t0 = time.perf_counter()

            def done(k: int, image, members=members, headers=headers, t0=t0) -> None:
                task, variant = pairs[members[k]]
                took = f"{time.perf_counter() - t0:.1f} s" + (f" into a batch of {len(members)}" if len(members) > 1 else "")
                try:
                    if isinstance(image, TlAotError):
                        raise image
                    self._store(task, variant, image, headers[k], took)
                    out[members[k]] = image
                except TlAotError as e:
                    out[members[k]] = e

            located = [(pairs[i][1], self.user_location(pairs[i][0].spec)) for i in members]
            images_of(located, pairs[members[0]][0].arch, self.work, done)
        return out

    def user_location(self, spec: KernelSpec) -> str:
        """Where nvcc's errors on ``spec``'s code point: ``kernels.py:12 (matmul)``, or a captured kernel's origin.

        A captured entry's source is its capture record (megabytes of JSON for a library's
        suite): its origin (the jit call and the caller's line) is read from the kernel as
        recorded, and a kernel file is parsed once per build, not once per variant.
        """
        if spec.capture is not None:
            return origin_of_spec(spec)
        where = (str(spec.source), spec.function)
        if where not in self.locations:
            self.locations[where] = _user_location(spec)
        return self.locations[where]

    def _store(self, task, variant: LoweredVariant, image: bytes, headers, took: str) -> None:
        """Check the image and the headers it was compiled from, then keep it in the cache."""
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
        self.cache.store(task.key, variant, image, task.project, replace=self.force)
        tool = "cutedsl" if variant.backend == "cutedsl" else "nvcc"
        self.progress.step(f"{tool} {task.spec.name} {task.arch} ({len(image) / 1024:.0f} KiB, {took})")

    def launcher(self, run: VariantRun, each: Each = one_by_one) -> Launcher | None:
        """Render the header and launcher of what was lowered and compile the launcher (None: a stage set without one)."""
        lib = LibrarySpec(name=run.lib_name, entries=_entries_of(run.tasks))
        return self.launcher_of(manifest_of(lib, run.tasks, run.lowered, self.nvcc_version), each)

    def launcher_of(self, signatures: Manifest, each: Each = one_by_one) -> Launcher:
        """The launcher of a library whose entries and variants ``signatures`` holds: its pieces, header text, object.

        What a one-machine build and ``link`` (from the parts' entry heads) both run. A big
        library's launcher is several units (:mod:`tl_aot.codegen.launcher_units`: the same cut
        whatever ``-j``), compiled as ``each`` runs them and joined into the one object the link
        stage takes. Each object comes from the cache when a build (of this library or another,
        into any folder) compiled the same text with the same toolchain: editing one kernel
        usually leaves the launcher's text unchanged (same signatures and launch shapes), and
        otherwise recompiles its unit alone (each unit includes a header of its own exports, so
        another entry's signature, or an entry added, recompiles only its own unit and the
        library-wide one); a fresh output folder with a warm cache needs no compile at all.
        """
        name = signatures.library
        code = library_code(signatures, f"{name}.h")  # rendered into the header, the units and the torch companion
        units = render_launcher_sources(signatures, header_name=f"{name}.h", code=code)
        header_text = units[0].header_text  # the library-wide unit (or the only one) includes the library's header
        files = [f"{name}.cc", *(f"{name}.unit{k}.cc" for k in range(1, len(units)))]
        companion = render_companion(signatures, header_name=f"{name}.h", code=code)
        write_if_different(self.work / companion_source_name(name), companion)  # compiled when torch ops are wanted
        for file, unit in zip(files, units):  # kept to read, and named in compile errors
            write_if_different(self.work / file, unit.text)
            write_if_different(self.work / unit.header_name, unit.header_text)
        kept = {self.work / f for f in files} | {self.work / u.header_name for u in units}
        for stale in {*self.work.glob(f"{name}.unit*.cc"), *self.work.glob(f"{name}.unit*.h")} - kept:
            stale.unlink(missing_ok=True)  # a unit of a bigger build of this library, read by nobody
        t0 = time.perf_counter()
        objs = [f"{name}.launcher.o"] if len(units) == 1 else [f"{name}.unit{k}.o" for k in range(len(units))]

        def job(file: str, unit: LauncherUnit, obj: str) -> Callable[[], tuple[Path, bool]]:
            # keyed by the unit's text and its own header's: another unit's entries never recompile it
            return lambda: generated_object(
                self.cache.root,
                {file: unit.text, unit.header_name: unit.header_text},
                file,
                obj,
                extra_key=self.objects_key,
                what=f"compiling the launcher of {name} ({self.work / file})",
                force=self.force,
            )

        made = each([_attempt(job(f, unit, o)) for f, unit, o in zip(files, units, objs)])
        refused = [(k, m) for k, m in enumerate(made) if isinstance(m, BaseException)]
        if refused:
            raise self._launcher_fault(signatures, refused, files, each)
        compiled = sum(c for _, c in made)
        if len(made) == 1:
            obj = made[0][0]
        else:
            what = f"joining the {len(made)} units of the launcher of {name}"
            parts = [o for o, _ in made]
            obj, _ = combined_object(self.cache.root, parts, f"{name}.launcher.o", extra_key=self.objects_key, what=what, force=self.force)
        took = f"{time.perf_counter() - t0:.1f} s"
        done = (f"{took}" if compiled else "unchanged, reused") if len(made) == 1 else f"{len(made)} units, {compiled} compiled, {took}"
        exports = len(dict.fromkeys(e.export or e.name for e in signatures.entries))
        self.progress.step(f"launcher {name}.cc ({exports} entries, {done})")
        return Launcher(signatures, header_text, obj)

    def _launcher_fault(
        self, signatures: Manifest, refused: list[tuple[int, BaseException]], files: list[str], each: Each
    ) -> BaseException:
        """The error of launcher units that did not compile: a :class:`LauncherCodeError` naming the entries at fault, else the first.

        The compiler refusing a unit (not a missing tool, a signal or a full disk) is generated code
        at fault: the unit's entries (every entry, where the library-wide unit failed) are compiled
        apart (:func:`~tl_aot.pipeline.launcher_faults.find_bad_code`) to name which. When none
        fails apart, the unit's own error is raised.
        """
        faults = [(k, code_fault(e)) for k, e in refused]
        if any(out is None for _, out in faults):
            return next(e for (_, e), (_, out) in zip(refused, faults) if out is None)
        plans = launcher_units.unit_plans(signatures, launcher_units.UNIT_WEIGHT) if len(files) > 1 else ()  # as rendered
        everything = tuple(range(len(signatures.entries)))
        groups = [(everything if k == 0 else plans[k - 1].entries, out or "") for k, out in faults]
        if groups[0][0] == everything:
            groups = groups[:1]  # the library-wide unit (or the only one) holds every entry's declarations: one search
        exports = {name: j for j, name in enumerate(signatures.exports())}
        t0 = time.perf_counter()
        bad = find_bad_code(
            [exports[e.exported] for e in signatures.entries],
            groups,
            lambda members: self._compiles_apart(signatures, members),
            each,
            names=[e.name for e in signatures.entries],
        )
        if not bad:
            return refused[0][1]
        units = [str(self.work / files[k]) for k, _ in refused]
        return LauncherCodeError(signatures.library, bad, units, seconds=time.perf_counter() - t0)

    def _compiles_apart(self, signatures: Manifest, members: tuple[int, ...]) -> str | None:
        """The compiler's output if a launcher of ``signatures``' entries at ``members`` alone fails to compile, else None."""
        part = replace(signatures, entries=tuple(signatures.entries[i] for i in members))
        name = part.library
        files = {f"{name}.cc": render_launcher_units(part, header_name=f"{name}.h", target=0)[0], f"{name}.h": render_header(part)}
        try:
            compile_apart(files, f"{name}.cc", what=f"compiling {len(members)} entries of the launcher of {name} apart")
        except TlAotError as e:
            out = code_fault(e)
            if out is None:
                raise
            return out
        return None

    def runtime(self) -> Path:
        """The launcher runtime's object (compiled once per toolchain into the cache; again with ``force``)."""
        obj, _ = runtime_object(self.cache.root, extra_key=self.objects_key, force=self.force)
        return obj

    @property
    def objects_key(self) -> str:
        """See :func:`objects_key`."""
        return objects_key(self.nvcc_version, self.tvm_ffi_version)

    @staticmethod
    def without_failures(run: VariantRun) -> list[Task]:
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


def _attempt(job: Callable[[], Any]) -> Callable[[], Any]:
    """``job``, answering its :class:`TlAotError` as its value: every unit is compiled, and every one that fails is known."""

    def attempt() -> Any:
        try:
            return job()
        except TlAotError as e:
            return e

    return attempt


def _digest_of(snapshot, path: str) -> str:
    return next((d for p, _, _, d in snapshot.files if p == path), "missing")


def _entries_of(tasks: Iterable[Task]) -> tuple[KernelSpec, ...]:
    """The entries the tasks cover, in the library's order."""
    seen: dict[str, KernelSpec] = {}
    for t in tasks:
        seen.setdefault(t.spec.name, t.spec)
    return tuple(seen.values())


def _user_location(spec: KernelSpec) -> str:
    """``kernels.py:12 (matmul)``: where the user's kernel function is defined."""
    line = function_line(spec.source, spec.function)
    return f"{display_path(spec.source)}:{line or '?'} ({spec.function})"
