"""The parts of a record that many processes capture into at once, and their one merge into the record.

Under ``python -m tl_aot capture`` every process of the command (pytest-xdist's workers, a
multiprocessing pool's, any Python subprocess) writes what it captures as part files of its own
in ``RECORD.parts/``: each part is written once, atomically (a temporary file renamed), under a
name no other process uses (time, host, pid, sequence), so no process waits for another and none
can overwrite what another wrote. When the command ends the capture merges every part into the
record under the record's lock and only then removes them; parts a killed capture left behind are
merged by the next capture of that record. Merging is idempotent (kernels by request key, their
devices, origins and call keys as sets), so a part merged twice adds nothing twice.

Why parts rather than each process merging into the record as it goes: a record holds 20 to
200 KB of IR per kernel, so a merge re-reads and re-writes megabytes under a lock that every
process needs; at a whole test suite's scale (thousands of kernels, 16 workers) the processes
would spend their time queueing for it. A part costs what it adds.

Each process also leaves a :class:`ProcessReport` (what it recorded, served, compiled, lowered,
and every kernel it could not record, with why) for the capture's final report.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..common.fileutil import StrPath, atomic_write, exclusive_lock
from ..common.json_types import JsonMapping, JsonObject
from .record import CaptureRecord

__all__ = [
    "PARTS_ENV",
    "ProcessReport",
    "MergeResult",
    "parts_dir",
    "write_part",
    "write_report",
    "merge_parts",
    "claim",
    "capture_summary",
]

#: Set by ``python -m tl_aot capture``: the folder each process writes its parts and report into.
PARTS_ENV = "TL_AOT_CAPTURE_PARTS"

_PART = "part-"
_REPORT = "report-"


def parts_dir(record: StrPath) -> Path:
    """The parts folder of ``record``: ``RECORD.parts`` beside it."""
    path = Path(record)
    return path.with_name(path.name + ".parts")


def _unique_name(prefix: str, seq: int) -> str:
    """Sortable by time, unique across processes and hosts sharing the folder."""
    host = "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:40]
    return f"{prefix}{time.time_ns():020d}-{host}-{os.getpid()}-{seq:06d}.json"


def write_part(folder: StrPath, kernels: Mapping[str, JsonObject], tunings: Mapping[str, JsonObject], seq: int) -> Path:
    """Write one part (kernels by key, tunings by key) atomically; returns its path."""
    return _write_into(Path(folder), _unique_name(_PART, seq), json.dumps({"kernels": kernels, "tunings": tunings}, sort_keys=True))


def _write_into(folder: Path, name: str, text: str) -> Path:
    """``folder/name`` written atomically, again (the folder made again) if a merge removed the folder meanwhile.

    A merge (:func:`merge_parts`, run by another capture of the record) removes the parts folder
    once it is empty, which may fall between the writer making the folder and its temporary file.
    """
    path = folder / name
    for attempt in range(8):
        try:
            atomic_write(path, text)  # makes the folder
            break
        except (FileNotFoundError, FileExistsError):  # gone before the temporary file, or while being made again
            if attempt == 7:
                raise
    return path


@dataclass(frozen=True)
class ProcessReport:
    """What one capturing process did: the counts and the kernels it could not record (name and why)."""

    pid: int
    requests: int = 0  # compile requests seen
    recorded: int = 0  # distinct kernels recorded by this process
    served: int = 0  # requests a library (capture --serve) held: recorded, not compiled or lowered
    compiled: int = 0  # requests TileLang's JIT compiled (a GPU capture)
    lowered: int = 0  # kernels lowered here for their device code digest (a --device capture)
    lowering_s: float = 0.0
    unfaithful: int = 0  # recorded, marked as not rebuilding faithfully (a build refuses them)
    unrecorded: tuple[tuple[str, str], ...] = ()  # (kernel, why) of every request that could not be recorded
    tunings_unrecorded: tuple[tuple[str, str], ...] = ()  # (tuning, why) of autotuner choices that could not be recorded
    flush_error: str = ""  # what kept the last flush from being written, if anything
    unkeyed: tuple[tuple[str, str], ...] = ()  # (@tilelang.jit function, why) of recorded calls with no call key, once each

    @classmethod
    def from_json(cls, data: JsonMapping) -> ProcessReport:
        """Read one back (lists as tuples; unknown keys, from another tl_aot, ignored)."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for k in ("unrecorded", "tunings_unrecorded", "unkeyed"):
            known[k] = tuple(tuple(x) for x in known.get(k, ()))
        return cls(**known)


def write_report(folder: StrPath, report: ProcessReport, seq: int) -> Path:
    """Write a process's report beside its parts."""
    return _write_into(Path(folder), _unique_name(_REPORT, seq), json.dumps(asdict(report), sort_keys=True))


@dataclass(frozen=True)
class MergeResult:
    """What a merge did: kernels now in the record, how many were new, parts merged, the processes' reports."""

    kernels: int
    new: int
    parts: int
    reports: tuple[ProcessReport, ...] = field(default=())


def merge_parts(record: StrPath) -> MergeResult:
    """Merge every part of ``record`` into it (under its lock), then remove the parts and reports merged.

    Items that carry their IR are merged before those that do not (a process sends a kernel's IR
    once, with its first part), so the order parts are read in never drops a kernel.
    """
    record = Path(record)
    folder = parts_dir(record)
    record.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(record.with_name(record.name + ".lock"), holder=f"merging the captured parts of {record.name}"):
        rec = CaptureRecord.load(record, missing_ok=True)
        parts = sorted(folder.glob(_PART + "*.json")) if folder.is_dir() else []
        reports = sorted(folder.glob(_REPORT + "*.json")) if folder.is_dir() else []
        loaded = [json.loads(p.read_text()) for p in parts]
        new = 0
        for with_ir in (True, False):
            for data in loaded:
                kernels = {k: v for k, v in data.get("kernels", {}).items() if ("ir" in v) == with_ir}
                new += rec.merge(kernels, data.get("tunings", {}) if with_ir else None)
        read = tuple(ProcessReport.from_json(json.loads(p.read_text())) for p in reports)
        if parts or not record.exists():
            rec.save()
        for p in (*parts, *reports):
            p.unlink(missing_ok=True)
        if folder.is_dir():
            shutil.rmtree(folder / "claims", ignore_errors=True)  # a claim lives for one capture
            with contextlib.suppress(OSError):
                folder.rmdir()  # empty now, unless a process still writes into it
    return MergeResult(len(rec.kernels), new, len(parts), read)


def claim(folder: StrPath, what: str) -> bool:
    """Whether this process is the first of the capture to claim ``what`` (e.g. lowering one kernel for one arch).

    Several processes that meet the same kernel lower it for its device code once, not once each.
    """
    path = Path(folder) / "claims" / what
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    except OSError:
        return True  # a folder that refuses the claim: lower it here (the device code is the same)
    return True


def capture_summary(reports: Sequence[ProcessReport], wall_s: float, served_from: str | None = None) -> str:
    """The capture's final line: processes, requests, and how each kernel was had (served, compiled, lowered).

    ``tl_aot capture: 4 processes in 12.3 s: 40 requests, 12 kernels; 9 served from lib/, 3 lowered for
    their device code (11.8 CPU-s); 0 not recorded``.
    """
    total = {k: sum(getattr(r, k) for r in reports) for k in ("requests", "served", "compiled", "lowered", "unfaithful")}
    lowering_s = sum(r.lowering_s for r in reports)
    kernels = sum(r.recorded for r in reports)
    parts = [f"{total['requests']} requests, {kernels} kernels (counted per process)"]
    if served_from is not None:
        parts.append(f"{total['served']} served from {served_from}")
    parts.append(f"{total['compiled']} compiled by TileLang's JIT")
    parts.append(f"{total['lowered']} lowered for their device code ({lowering_s:.1f} CPU-s)")
    if total["unfaithful"]:
        parts.append(f"{total['unfaithful']} marked unfaithful (a build refuses them)")
    parts.append(f"{sum(len(r.unrecorded) for r in reports)} not recorded")
    errors = [r.flush_error for r in reports if r.flush_error]
    tail = f"; {len(errors)} process(es) could not write their last part: {errors[0]}" if errors else ""
    return f"tl_aot capture: {len(reports)} process(es) in {wall_s:.1f} s: " + "; ".join(parts) + tail
