"""The seam between a build and whatever machine builds one variant: a task in, verified bytes out.

* :class:`VariantTask` (frozen, picklable): the entry, the arch, its cache key, the driver's
  :class:`~tl_aot.pipeline.toolset.Toolset`, and the kernel's sources as **bytes** (:class:`ShippedSources`,
  read from the plan's :class:`~tl_aot.config.user_code.SourceSnapshot` and checked against its digests), so
  a worker needs no shared file system.
* :func:`build_variant_tasks` runs on the worker (a batch of one arch, :mod:`~tl_aot.pipeline.cluster_batch`):
  refuses a task whose toolset differs from its own, writes the sources into a private folder,
  lowers each variant there and compiles the lowered ones together as a local build does (one nvcc
  run), and moves every path back to the driver's (the image's line table included), so the bytes
  equal a local build's. :func:`build_variant_task` is the batch of one.
* :class:`VariantResult` (frozen): the variant's metadata as JSON and its image, each with its
  SHA-256, or the error the worker raised (its class, message and fields).
* :func:`~tl_aot.pipeline.result_check.accept_result` runs on the driver: checks the digests, the
  image's format and the headers the flags named before anything reaches the cache (the driver alone writes it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import resource
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..common.errors import LoweringError, TlAotError, ToolsetMismatch
from ..common.fileutil import write_file
from .toolset import Toolset, differences, local_toolset

if TYPE_CHECKING:
    from ..common.arch import Arch
    from ..common.metadata import LoweredVariant
    from ..config.kernel_spec import KernelSpec

#: A variant lowered on a worker: (its task's index, the variant, the worker's copy of its sources, lowering seconds).
_Lowered = tuple[int, "LoweredVariant", str, float]

__all__ = [
    "ShippedSources",
    "VariantTask",
    "VariantResult",
    "pack_task",
    "build_variant_task",
    "build_variant_tasks",
    "ToolsetMismatch",
]


@dataclass(frozen=True)
class ShippedSources:
    """A kernel's Python sources and the headers its flags name, as bytes, relative to ``base`` on the driver."""

    base: str  # the driver's folder the files are relative to (their project, or the capture record's folder)
    files: tuple[tuple[str, bytes], ...]  # (relative posix path, bytes)

    def materialise(self, root: Path) -> Path:
        """Write the files under ``root/<digest>/`` (reused when already there, intact); returns that folder."""
        h = hashlib.sha256()
        for rel, data in self.files:
            h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
        folder = root / h.hexdigest()[:20]
        done = folder / ".complete"
        if done.is_file():
            with contextlib.suppress(OSError):
                os.utime(folder)  # in use: a sweep of day-old folders leaves it
            return folder
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=root))
        for rel, data in self.files:
            dest = tmp / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            write_file(dest, data)
        (tmp / "setup.cfg").touch(exist_ok=True)  # a project marker: paths display as they do on the driver
        (tmp / ".complete").touch()
        try:
            os.replace(tmp, folder)
        except OSError:  # another thread of this worker placed the same sources first
            shutil.rmtree(tmp, ignore_errors=True)
        return folder


@dataclass(frozen=True)
class VariantTask:
    """One variant to build elsewhere: everything it needs, nothing of the driver's state."""

    spec: KernelSpec  # its paths the driver's
    arch: Arch
    key: str
    toolset: Toolset
    sources: ShippedSources

    @property
    def label(self) -> str:
        return f"{self.spec.name} {self.arch}"


@dataclass(frozen=True)
class VariantResult:
    """What a worker gives back for a task: the variant and image with their digests, or its error."""

    key: str
    worker: str
    variant_json: str = ""
    variant_sha256: str = ""
    image: bytes = b""
    image_sha256: str = ""
    lower_s: float = 0.0
    compile_s: float = 0.0
    cpu_s: float = 0.0  # CPU-seconds of the worker's tools (nvcc, ptxas) while it compiled (other threads' too)
    batch: int = 1  # variants of the task it was built in (its compile_s and cpu_s are its share)
    shared: int = 1  # variants whose images came from the one nvcc run this image came from (1: compiled alone)
    error_class: str = ""  # "LoweringError", ...: the tl_aot error the worker raised
    error: str = ""
    error_fields: tuple[tuple[str, Any], ...] = ()  # (name, value) of the error's plain fields

    @property
    def ok(self) -> bool:
        return not self.error_class


def _under(path: Path, base: Path) -> bool:
    try:
        path.relative_to(base)
        return True
    except ValueError:
        return False


def _base_of(spec) -> Path:
    from ..config.user_code import project_root

    src = Path(spec.source).resolve()
    return src.parent if spec.capture else project_root(src)


def pack_task(task, toolset: Toolset) -> VariantTask:
    """The :class:`VariantTask` of a plan task: its sources read as bytes, checked against the plan's snapshot.

    A file edited since the plan read it is an error naming it (the variant would not be the one its
    key names). A captured kernel's recorded IR and options travel in its spec (:class:`~tl_aot.config.capture_ref.CaptureRef`):
    no record is read or shipped, nor the record's choices (the driver's manifest holds them).
    """
    from ..config.options import flag_inputs
    from ..lower.lower_worker import lowering_view

    spec = _driver_paths(lowering_view(task.spec))
    base = _base_of(spec)
    files: dict[str, bytes] = {}
    if spec.capture:  # the kernel travels in the spec; its recorded headers are checked here (written beside the record)
        from ..capture.record_specs import recorded_flags

        recorded_flags(spec.capture, where=spec.name)
    for path, _, _, digest in task.sources.files:
        data = Path(path).read_bytes() if digest != "missing" else None
        if data is None or hashlib.sha256(data).hexdigest() != digest:
            msg = f"entry {spec.name!r} ({task.arch}): {path} changed since the build read it; nothing was sent. Build again."
            raise LoweringError(msg, entry=spec.name, arch=task.arch.sm, location=str(path))
        files[Path(path).resolve().relative_to(base).as_posix()] = data
    for header, _ in flag_inputs(spec.compile_flags):  # headers the entry's own flags name, where they lie in the project
        p = Path(header).resolve()
        if _under(p, base) and p.is_file():
            files.setdefault(p.relative_to(base).as_posix(), p.read_bytes())
    return VariantTask(spec, task.arch, task.key, toolset, ShippedSources(str(base), tuple(sorted(files.items()))))


def _driver_paths(spec):
    """``spec`` with its source, capture record and flag paths resolved here, on the driver.

    A worker runs in a folder of its own (any folder, no checkout): a relative path the driver
    means from its working folder would be taken from the worker's. Resolved, every path lies
    under the shipped sources' base, which the worker moves onto its copy of them.
    """
    from ..config.options import map_flag_paths

    def here(v: str, _folder: bool) -> str:
        return str(Path(v).resolve())

    changes: dict[str, object] = {"source": Path(spec.source).resolve()}
    if spec.compile_flags:
        changes["compile_flags"] = tuple(map_flag_paths(spec.compile_flags, here))
    if spec.capture:
        changes["capture"] = replace(spec.capture, record=str(Path(spec.capture.record).resolve()))
    return replace(spec, **changes)


def _moved_spec(spec, old: str, new: str):
    """``spec`` with its source, record and flag paths under ``old`` moved under ``new``."""
    from ..config.options import map_flag_paths

    def move(s: str) -> str:
        return new + s[len(old) :] if s == old or s.startswith(old.rstrip("/") + "/") else s

    changes: dict[str, object] = {"source": Path(move(str(spec.source)))}
    if spec.compile_flags:
        changes["compile_flags"] = tuple(map_flag_paths(spec.compile_flags, lambda v, _folder: move(v)))
    if spec.capture:
        changes["capture"] = replace(spec.capture, record=move(spec.capture.record))
    return replace(spec, **changes)


_WORK_ROOT_LOCK = threading.Lock()
_SWEPT: set = set()

#: Sources a worker wrote for builds, and compile folders of killed tasks, are removed after this long unused.
_KEEP_S = 24 * 3600.0


def _work_root() -> Path:
    """The worker's folder (``TL_AOT_WORKER_DIR``, else the temporary folder): ``sources/`` and ``work/``."""
    root = Path(os.environ.get("TL_AOT_WORKER_DIR") or Path(tempfile.gettempdir()) / f"tl_aot-worker-{os.getuid()}")
    with _WORK_ROOT_LOCK:
        (root / "sources").mkdir(parents=True, exist_ok=True)
        (root / "work").mkdir(parents=True, exist_ok=True)
        if str(root) not in _SWEPT:  # once per process: what earlier builds (or killed workers) left a day ago
            _SWEPT.add(str(root))
            now = time.time()
            for p in [*(root / "sources").iterdir(), *(root / "work").iterdir()]:
                try:
                    if now - p.stat().st_mtime > _KEEP_S:
                        shutil.rmtree(p, ignore_errors=True)
                except OSError:
                    pass
    return root


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def build_variant_task(task: VariantTask, *, worker: str = "", lower_fn=None) -> VariantResult:
    """Build one variant on this machine (a cluster worker); never raises for the variant's own errors."""
    return build_variant_tasks((task,), worker=worker, lower_fn=lower_fn)[0]


def build_variant_tasks(tasks: Sequence[VariantTask], *, worker: str = "", lower_fn=None) -> tuple[VariantResult, ...]:
    """Build variants of one arch here: each lowered alone, the lowered ones compiled together; one result per task, in order.

    The compile is the local build's (:func:`~tl_aot.pipeline.images.images_of`: one nvcc run for
    the variants that share flags, each image split out of it, a failed batch compiled one by one),
    so every image is the bytes a local build makes. A variant's error (its lowering, its nvcc) is
    its result alone: the others are still built. Never raises for the variants' own errors.
    ``lower_fn(spec, arch)`` lowers (a worker process pool); default: in this process.
    """
    from ..lower.lower import lower_variant

    mine = local_toolset()
    out: dict[int, VariantResult] = {}
    lowered: list[_Lowered] = []  # (index, variant, the worker's copy of its sources, lowering seconds)
    for i, task in enumerate(tasks):
        diff = differences(task.toolset, mine, here_name="on the driver", there_name=f"on {worker or 'this worker'}")
        if diff:
            msg = f"worker {worker or '?'} refused entry {task.label}: its tools differ from the driver's: {'; '.join(diff)}"
            out[i] = _failure(task, worker, ToolsetMismatch(msg, entry=task.spec.name, arch=task.arch.sm))
            continue
        here = None
        try:
            here = str(task.sources.materialise(_work_root() / "sources"))
            t0 = time.perf_counter()
            variant = (lower_fn or lower_variant)(_moved_spec(task.spec, task.sources.base, here), task.arch)
            lowered.append((i, variant, here, time.perf_counter() - t0))
        except Exception as e:  # noqa: BLE001 (a worker-side surprise is still this variant's error, sent back whole)
            out[i] = _failure(task, worker, _as_error(task, e), moved=(here, task.sources.base))
    for arch in dict.fromkeys(str(tasks[i].arch) for i, *_ in lowered):  # one (a batch's); never one arch's code for another
        out.update(_compile_lowered(tasks, [m for m in lowered if str(tasks[m[0]].arch) == arch], worker))
    return tuple(out[i] for i in range(len(tasks)))


def _compile_lowered(tasks: Sequence[VariantTask], lowered: list[_Lowered], worker: str) -> dict[int, VariantResult]:
    """{index: result} of the lowered variants (one arch), compiled in one nvcc run where they share flags."""
    from ..common.metadata_json import to_json
    from .cache import relocate
    from .images import images_of

    first = tasks[lowered[0][0]]
    images: dict[int, bytes | TlAotError] = {}
    runs: list[list[int]] = []
    work = Path(tempfile.mkdtemp(prefix=f"{first.key}.", dir=_work_root() / "work"))
    path_map = tuple(dict.fromkeys((here, tasks[i].sources.base) for i, _, here, _ in lowered))
    cpu0, t0 = _children_cpu(), time.perf_counter()
    try:
        located = [(v, f"{tasks[i].spec.source}:{tasks[i].spec.function}") for i, v, _, _ in lowered]
        images_of(located, first.arch, work, images.__setitem__, path_map=path_map, on_batch=runs.append)
    except Exception as e:  # noqa: BLE001 (what nvcc did not answer for is each variant's error)
        for k, (i, _, _, _) in enumerate(lowered):
            images.setdefault(k, _as_error(tasks[i], e))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    compile_s, cpu_s = time.perf_counter() - t0, _children_cpu() - cpu0
    shared = {k: len(run) for run in runs for k in run}
    out: dict[int, VariantResult] = {}
    for k, (i, variant, here, lower_s) in enumerate(lowered):
        task, got = tasks[i], images.get(k)
        if not isinstance(got, bytes):
            err = got if isinstance(got, TlAotError) else _as_error(task, RuntimeError("the compile gave no image"))
            out[i] = _failure(task, worker, err, moved=(here, task.sources.base))
            continue
        text = to_json(relocate(variant, here, task.sources.base))
        out[i] = VariantResult(
            key=task.key,
            worker=worker,
            variant_json=text,
            variant_sha256=hashlib.sha256(text.encode()).hexdigest(),
            image=got,
            image_sha256=hashlib.sha256(got).hexdigest(),
            lower_s=lower_s,
            compile_s=compile_s / len(lowered),
            cpu_s=cpu_s / len(lowered),
            batch=len(tasks),
            shared=shared.get(k, 1),
        )
    return out


def _as_error(task: VariantTask, e: BaseException) -> TlAotError:
    """``e`` as this variant's tl_aot error (a surprise on the worker becomes a :class:`LoweringError` naming it)."""
    if isinstance(e, TlAotError):
        return e
    return LoweringError(f"entry {task.label}: {type(e).__name__}: {e}", entry=task.spec.name, arch=task.arch.sm)


def _failure(task: VariantTask, worker: str, e: TlAotError, moved=(None, "")) -> VariantResult:
    """The error as a result: its class name, message and plain fields, with the worker's paths spelled as the driver's."""
    old, new = moved

    def fix(v):
        return v.replace(old, new) if old and isinstance(v, str) else v

    cls = next(c for c in type(e).__mro__ if issubclass(c, TlAotError) and c.__module__.startswith("tl_aot."))
    plain = {k: fix(v) for k, v in vars(e).items() if isinstance(v, (str, int, float, bool, type(None)))}
    plain.setdefault("entry", task.spec.name)
    plain["entry"] = plain["entry"] or task.spec.name
    plain["arch"] = plain.get("arch") or task.arch.sm
    return VariantResult(
        key=task.key, worker=worker, error_class=cls.__name__, error=fix(str(e)), error_fields=tuple(sorted(plain.items()))
    )
