"""Building from a capture record: one entry per recorded kernel, resolved from its stored IR and options.

The record is read once, here (:func:`specs_from_record`): each entry holds its kernel and the
record's choices (:class:`~tl_aot.config.capture_ref.CaptureRef`), read by everything after.
A recorded kernel is built only if the capture found its IR faithful (:mod:`tl_aot.jit.ir_record`);
its IR is loaded through :func:`tl_aot.jit.ir_record.load_ir`, its headers are written beside the
record, and the build compares its device code with the digest the capture stored
(:mod:`tl_aot.capture.device_code`). Errors name the kernel and where its request came from.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

from ..common.arch import Arch
from ..common.errors import LoweringError
from ..common.fileutil import StrPath, atomic_write
from ..common.json_types import JsonMapping
from ..common.metadata import Call, Tuning
from ..common.versions import cutedsl_version
from ..config.capture_ref import CapturedKernel, CaptureRef, RecordChoices
from ..config.kernel_spec import KernelSpec, LibrarySpec
from ..config.options import map_flag_paths
from ..gpu.device import profile_reported_as
from ..jit.ir_record import load_ir
from ..jit.request_origin import origin_text
from ..jit.resolve import Resolved
from .headers import tilelang_header
from .record import CaptureRecord

__all__ = [
    "specs_from_record",
    "specs_from_records",
    "with_captures",
    "recorded_calls",
    "recorded_tunings",
    "choices_of",
    "recorded_flags",
    "resolve_captured",
    "unbuildable_reason",
    "origin_of_spec",
]


def specs_from_record(
    path: StrPath, archs: Collection[Arch | str], *, device: str = "", only: Collection[str] | None = None
) -> list[KernelSpec]:
    """One :class:`~tl_aot.spec.KernelSpec` per recorded kernel (its entry: ``<name>_<key[:10]>``), sorted by key.

    The record is read here, once: each entry's :class:`~tl_aot.config.capture_ref.CaptureRef` holds its
    kernel and the record's choices, and nothing later reads the file again.
    ``device``: the GPU profile for every kernel; by default the one each kernel was captured on, where
    it answers for the archs (:func:`~tl_aot.gpu.device.profile_reported_as`): a build from the record
    then answers the device queries of its lowering as that GPU, so a kernel sized by the SM count or
    shared memory is built as the JIT built it, and the device code check proves it.
    """
    rec = CaptureRecord.load(path)
    record = str(Path(path).resolve())
    choices = rec.choices()
    out: list[KernelSpec] = []
    for key in sorted(rec.kernels):
        kernel = rec.kernel(key)
        if kernel is None or (only is not None and key not in only):
            continue
        if kernel.backend == "cutedsl" and not cutedsl_version():
            continue  # built with TileLang's CuTeDSL backend where the cutedsl extra is installed
        base = re.sub(r"\W", "_", kernel.jit.rsplit(".", 1)[-1] or str(kernel.item.get("name") or "kernel"))[:60].strip("_") or "kernel"
        if not base[0].isalpha():
            base = f"k_{base}"
        use = device or profile_reported_as(kernel.device_names, archs)
        spec = KernelSpec.create(name=f"{base}_{key[:10]}", source=Path(record), function="captured", archs=archs, device=use or None)
        assert isinstance(spec, KernelSpec)  # no specialisations: one spec
        out.append(dataclasses.replace(spec, capture=CaptureRef(record, key, kernel, choices)))
    return out


def specs_from_records(records: Iterable[Iterable[KernelSpec]]) -> list[KernelSpec]:
    """The entries of several records (each :func:`specs_from_record`'s) as one library's: one entry per kernel.

    A kernel two records hold (a suite captured on an H100, then on an H200 with ``capture --serve``)
    is the first record's entry, built for every arch either asks, said to be captured on every
    record's GPUs, proved against any record's device code for an arch, and shipping every record's
    call keys and tunings: the second record is never dropped for holding nothing new.
    """
    entries: dict[str, KernelSpec] = {}  # request key -> its entry
    for specs in records:
        for spec in specs:
            assert spec.capture is not None  # an entry of a record
            have = entries.get(spec.capture.key)
            entries[spec.capture.key] = spec if have is None else _also_from(have, spec)
    return list(entries.values())


def _also_from(have: KernelSpec, other: KernelSpec) -> KernelSpec:
    """``have``, the entry of a kernel ``other``'s record holds too, widened by what ``other`` adds."""
    assert have.capture is not None and other.capture is not None
    ref, kernel, more = have.capture, have.capture.kernel, other.capture.kernel
    devices = list(kernel.devices)
    devices += [d for d in more.devices if d not in devices]
    kernel = dataclasses.replace(kernel, devices=tuple(devices), device_code={**more.device_code, **kernel.device_code})
    also = ref.also + tuple(c for c in (other.capture.choices, *other.capture.also) if c is not ref.choices and c not in ref.also)
    archs = have.archs + tuple(a for a in other.archs if a not in have.archs)
    widened = dataclasses.replace(have, capture=dataclasses.replace(ref, kernel=kernel, also=also))
    return widened if archs == have.archs else widened.for_archs(archs)


def with_captures(lib: LibrarySpec) -> LibrarySpec:
    """``lib`` with the kernels of its capture records (a spec file's ``[library] capture``) as entries; as is without."""
    if not lib.captures:
        return lib
    made = specs_from_records(specs_from_record(c.record, c.archs, device=c.device) for c in lib.captures)
    return dataclasses.replace(lib, entries=(*lib.entries, *made), captures=())


def recorded_calls(records: Iterable[RecordChoices | StrPath], built: Collection[str]) -> tuple[Call, ...]:
    """The :class:`~tl_aot.common.metadata.Call` s a library built from capture ``records`` ships: those whose kernel it holds.

    ``records``: each a :class:`~tl_aot.config.capture_ref.RecordChoices` (read with the record's
    entries) or a record's path (read here). ``built`` is the request keys of the captured kernels
    the library holds. A call key recorded for two different requests (a function that reads
    something its key does not cover) is shipped for neither: serving then keys those calls by
    their prim_func.
    """
    seen: dict[str, set[str]] = {}
    for choices in _choices_of(records):
        for call, request_key in choices.calls:
            seen.setdefault(call, set()).add(request_key)
    return tuple(Call(key=k, request_key=next(iter(v))) for k, v in sorted(seen.items()) if len(v) == 1 and next(iter(v)) in built)


def recorded_tunings(records: Iterable[RecordChoices | StrPath], built: Collection[str]) -> tuple[Tuning, ...]:
    """The :class:`Tuning` s a library built from capture ``records`` ships: those whose chosen kernel it holds.

    ``records`` as for :func:`recorded_calls`; ``built`` is the request keys of the captured kernels
    the library holds (a tuning whose kernel was left out of the build cannot be served, so it is
    not shipped). A tuning key two records hold is shipped as the first record (by path) has it.
    """
    out: dict[str, Tuning] = {}
    for choices in _choices_of(records):
        for t in choices.tunings:
            if t.request_key in built:
                out.setdefault(t.key, t)
    return tuple(out[k] for k in sorted(out))


def choices_of(specs: Iterable[KernelSpec]) -> tuple[RecordChoices, ...]:
    """The choices of every record the captured ``specs`` were made from, once each, as read with them."""
    held = [c for s in specs if s.capture for c in (s.capture.choices, *s.capture.also)]
    return tuple({c.record: c for c in held}.values())


def _choices_of(records: Iterable[RecordChoices | StrPath]) -> list[RecordChoices]:
    """``records`` (choices, or paths read now: an unreadable one is an error naming it), once each, by record path."""
    got: dict[str, RecordChoices] = {}
    for r in records:
        choices = r if isinstance(r, RecordChoices) else CaptureRecord.load(r).choices()
        got.setdefault(choices.record, choices)
    return [got[p] for p in sorted(got)]


def unbuildable_reason(kernel: CapturedKernel) -> str:
    """Why a recorded kernel must not be built ('' when it may): it was found not to rebuild faithfully when captured.

    Its IR did not load back into what the JIT got, or a source post-processor rewrote the JIT's code
    (:mod:`tl_aot.capture.source_hooks`).
    """
    problem = kernel.unfaithful
    return f"the capture found that the record does not rebuild into what the JIT compiled: {problem}" if problem else ""


def resolve_captured(spec: KernelSpec, where: str) -> Resolved:
    """The :class:`~tl_aot.jit.resolve.Resolved` of a captured kernel: its IR and options as the record held them."""
    ref = spec.capture
    assert ref is not None, "resolve_captured takes a captured entry"
    kernel = ref.kernel
    reason = unbuildable_reason(kernel)
    if reason:
        msg = f"{where}: {reason}"
        raise LoweringError(msg)
    return Resolved(
        load_ir(kernel.ir),
        dict(kernel.pass_configs),
        tuple(recorded_flags(ref, where=where)),
        kernel.out_idx,
        None,
        kernel.built_from,
        kernel.backend,
        kernel.target,
        captured=kernel.item,
    )


def recorded_flags(ref: CaptureRef, *, where: str = "") -> list[str]:
    """The kernel's recorded compile flags, the headers they name written beside the record (by content) and pointed at.

    TileLang's own headers are the installed TileLang's, checked against the recorded digests.
    """
    tilelang = ref.kernel.item.get("tilelang_headers")
    return _materialise_headers(list(ref.kernel.compile_flags), ref.kernel.headers, Path(ref.record), tilelang, where=where)


def _materialise_headers(
    flags: list[str], headers: Mapping[str, str], record: Path, tilelang: Mapping[str, JsonMapping] | None = None, *, where: str = ""
) -> list[str]:
    """The recorded headers written beside the record, and the flags pointing at them.

    Each is stored by content; an ``-I`` folder keeps its layout. A header (or folder) of
    TileLang's own include path (``tilelang``: :func:`tl_aot.capture.headers.record_headers`) is
    the installed TileLang's, checked against the recorded digest.
    """
    tilelang = tilelang or {}
    if not headers and not tilelang:
        return flags
    root = record.parent / ".tl_aot_headers"

    def write(dest: Path, b64: str) -> None:
        if not dest.is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(dest, base64.b64decode(b64))

    def place(value: str, folder: bool) -> str:
        p = Path(value)
        if value in tilelang:
            return tilelang_header(value, tilelang[value], where or f"capture record {record}")
        if not folder:
            if value not in headers:
                return value
            dest = root / hashlib.sha256(base64.b64decode(headers[value])).hexdigest()[:16] / p.name
            write(dest, headers[value])
            return str(dest)
        under = sorted((Path(f).relative_to(p).as_posix(), b64) for f, b64 in headers.items() if Path(f).is_relative_to(p))
        if not under:
            return value
        dest = root / hashlib.sha256(json.dumps(under).encode()).hexdigest()[:16] / p.name
        for rel, b64 in under:
            write(dest / rel, b64)
        return str(dest)

    return map_flag_paths(flags, place)


def origin_of_spec(spec: KernelSpec | None) -> str:
    """Where an entry came from: a captured kernel's :func:`~tl_aot.jit.request_origin.origin_text`, else its ``source:function``."""
    if spec is None:
        return ""
    if spec.capture is None:
        return f"{spec.source}:{spec.function}"
    return origin_text(spec.capture.kernel.item)
