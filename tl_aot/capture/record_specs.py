"""Building from a capture record: one entry per recorded kernel, resolved from its stored IR and options.

A recorded kernel is built only if the capture found its IR faithful (:mod:`tl_aot.jit.ir_record`);
its IR is loaded through :func:`tl_aot.jit.ir_record.load_ir`, its headers are written beside the
record, and the build compares its device code with the digest the capture stored
(:mod:`tl_aot.capture.device_code`). Errors name the kernel and where its request came from.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import json
import os
import re
from pathlib import Path

from ..common.arch import parse_arch
from ..common.errors import LoweringError, SpecError
from ..common.fileutil import atomic_write
from ..common.metadata import Call, Tuning
from ..common.versions import cutedsl_version
from ..config.kernel_spec import KernelSpec, LibrarySpec
from ..config.options import map_flag_paths
from ..gpu.device import PROFILES, find_profile
from ..jit.ir_record import load_ir
from ..jit.request_origin import origin_text
from ..jit.resolve import Resolved
from .headers import tilelang_header
from .record import CaptureRecord

__all__ = [
    "specs_from_record",
    "with_captures",
    "recorded_device",
    "recorded_calls",
    "recorded_tunings",
    "proof_of",
    "resolve_captured",
    "unbuildable_reason",
    "origin_of_spec",
]


def specs_from_record(path: str | os.PathLike, archs, *, device: str = "", only=None) -> list:
    """One :class:`~tl_aot.spec.KernelSpec` per recorded kernel (its entry: ``<name>_<key[:10]>``), sorted by key.

    ``device``: the GPU profile for every kernel; by default each kernel's :func:`recorded_device`.
    """
    rec = CaptureRecord.load(path)
    out = []
    for key, item in sorted(rec.kernels.items()):
        if only is not None and key not in only:
            continue
        if item.get("options", {}).get("backend") == "cutedsl" and not cutedsl_version():
            continue  # built with TileLang's CuTeDSL backend where the cutedsl extra is installed
        jit = next((o["jit"] for o in item.get("origins", []) if o.get("jit")), "")
        base = re.sub(r"\W", "_", jit.rsplit(".", 1)[-1] or str(item.get("name") or "kernel"))[:60].strip("_") or "kernel"
        if not base[0].isalpha():
            base = f"k_{base}"
        name = f"{base}_{key[:10]}"
        use = device or _fitting(recorded_device(item), archs)
        spec = KernelSpec.create(name=name, source=Path(path).resolve(), function="captured", archs=archs, device=use or None)
        origin = next((o for o in item.get("origins", []) if o.get("jit")), {})
        args = tuple(sorted((str(k), str(v)) for k, v in origin.get("args", {}).items()))
        out.append(dataclasses.replace(spec, capture=(str(Path(path).resolve()), key, jit, args, proof_of(item))))
    return out


def with_captures(lib: LibrarySpec) -> LibrarySpec:
    """``lib`` with the kernels of its capture records (a spec file's ``[library] capture``) as entries; as is without."""
    if not lib.captures:
        return lib
    entries = list(lib.entries)
    for source in lib.captures:
        entries.extend(specs_from_record(source.record, source.archs, device=source.device))
    return dataclasses.replace(lib, entries=tuple(entries), captures=())


def recorded_device(item: dict) -> str:
    """The device profile of the GPU a kernel was captured on ('' when unknown, or when it was seen on several models).

    A build from the record answers the device queries of its lowering as that GPU (unless
    ``--device`` names another): a kernel sized by the SM count or shared memory is then built as
    the JIT built it, and the device code check proves it.
    """
    names = {str(d.get("name", "")) for d in item.get("devices", []) if isinstance(d, dict) and d.get("name")}
    found = {p.name for p in PROFILES.values() for n in names if p.reported_name == n}
    return found.pop() if len(found) == 1 and len(names) == 1 else ""


def _fitting(device: str, archs) -> str:
    """``device`` when it answers for one of ``archs`` (or the archs are not known yet), else '' (each arch's default profile).

    A kernel captured on an H100 and built for sm_80 too is lowered for sm_80 as an A100 would
    answer; its recorded device code (sm_90a) proves only the sm_90a variant.
    """
    if not device or not archs:
        return device
    for arch in archs:
        with contextlib.suppress(SpecError):  # an arch spelled wrong is reported where the spec is made
            find_profile(device, parse_arch(arch) if isinstance(arch, str) else arch)
            return device
    return ""


def recorded_calls(records, built) -> tuple:
    """The :class:`~tl_aot.common.metadata.Call` s a library built from capture ``records`` ships: those whose kernel it holds.

    ``built`` is the request keys of the captured kernels the library holds. A call key recorded
    for two different requests (a function that reads something its key does not cover) is
    shipped for neither: serving then keys those calls by their prim_func.
    """
    seen: dict = {}
    for path in sorted(records):
        kernels = CaptureRecord.load(path).kernels  # unreadable now: an error naming it, never a library without its call keys
        for request_key, item in kernels.items():
            for call in item.get("calls", []):
                seen.setdefault(str(call), set()).add(request_key)
    return tuple(Call(key=k, request_key=next(iter(v))) for k, v in sorted(seen.items()) if len(v) == 1 and next(iter(v)) in built)


def proof_of(item: dict) -> str:
    """What a built variant of a recorded kernel must match, as JSON: the device code digest per arch, the capture's verdict.

    Part of the variant's cache key: a record whose digest or verdict changed is lowered (and checked) again.
    """
    code = {arch: c.get("sha256", "") for arch, c in (item.get("device_code") or {}).items() if isinstance(c, dict)}
    return json.dumps({"sha256": code, "unfaithful": item.get("unfaithful", "")}, sort_keys=True)


def unbuildable_reason(item: dict) -> str:
    """Why a recorded kernel must not be built ('' when it may): its IR was found not to rebuild faithfully when captured."""
    problem = item.get("unfaithful")
    return f"the capture found that its recorded IR does not rebuild into what the JIT compiled: {problem}" if problem else ""


def resolve_captured(spec, where: str):
    """The :class:`~tl_aot.jit.resolve.Resolved` of a captured kernel: its IR and options from the record."""
    record_path, key = spec.capture[:2]
    item = CaptureRecord.load(record_path).kernels.get(key)
    if item is None:
        msg = f"{where}: kernel {key} is no longer in {record_path}"
        raise LoweringError(msg)
    reason = unbuildable_reason(item)
    if reason:
        msg = f"{where}: {reason}"
        raise LoweringError(msg)
    func = load_ir(item["ir"])
    options = item["options"]
    flags = _materialise_headers(
        list(options["compile_flags"]), item.get("headers", {}), Path(record_path), item.get("tilelang_headers"), where=where
    )
    origin = (item.get("origins") or [{}])[0]
    path = f"capture {origin.get('jit') or origin.get('function', '?')} -> {item.get('name', 'main')}"
    return Resolved(
        func,
        dict(options["pass_configs"]),
        tuple(flags),
        options["out_idx"],
        None,
        path,
        options["backend"],
        options["target"],
        captured=item,
    )


def _materialise_headers(flags: list, headers: dict, record: Path, tilelang: dict | None = None, *, where: str = "") -> list:
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


def origin_of_spec(spec) -> str:
    """Where an entry came from: a captured kernel's :func:`~tl_aot.jit.request_origin.origin_text`, else its ``source:function``."""
    if spec is None:
        return ""
    if not getattr(spec, "capture", None):
        return f"{spec.source}:{spec.function}"
    try:
        item = CaptureRecord.load(spec.capture[0]).kernels.get(spec.capture[1])
    except SpecError:
        item = None
    return origin_text(item) if item else f"capture {spec.capture[1]} in {spec.capture[0]}"


def recorded_tunings(records, built) -> tuple:
    """The :class:`Tuning` s a library built from capture ``records`` ships: those whose chosen kernel it holds.

    ``built`` is the request keys of the captured kernels the library holds (a tuning whose kernel
    was left out of the build cannot be served, so it is not shipped).
    """
    out: dict = {}
    for path in sorted(records):
        # A record that cannot be read now is an error naming it (never a library quietly without its tunings).
        tunings = CaptureRecord.load(path).tunings
        for key, t in sorted(tunings.items()):
            if t.get("request_key") not in built or key in out:
                continue
            out[key] = Tuning(
                key=key,
                function=str(t.get("function", "")),
                args=str(t.get("args", "")),
                config=str(t.get("config", "")),
                index=int(t.get("index", -1)),
                candidates=int(t.get("candidates", 0)),
                request_key=str(t["request_key"]),
                cc=str(t.get("cc", "")),
                device=str(t.get("device", "")),
                latency_ms=float(t.get("latency_ms", 0.0)),
            )
    return tuple(out[k] for k in sorted(out))
