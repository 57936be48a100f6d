"""Where a capturing process writes what it recorded: a part of the record, or the record itself.

Under ``python -m tl_aot capture`` a process writes parts (:mod:`tl_aot.capture.record_parts`),
each kernel's IR only in the first part that holds it, and leaves its report beside them; the
capture merges them at the end. A :class:`~tl_aot.capture.recorder.Capturer` used on its own
(tests, benches, a program that captures itself) merges into the record under its lock at each
flush. The :class:`RecordWriter` is that choice, made once; the capturer only records.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..common.fileutil import exclusive_lock
from ..common.json_types import JsonObject
from .record import CaptureRecord
from .record_parts import ProcessReport, write_part, write_report

__all__ = ["RecordWriter"]

#: What a part carries of a kernel whose IR this process has written already: what a merge adds to it.
_ADDED_LATER = ("devices", "origins", "calls", "device_code", "unfaithful", "compile_s")


class RecordWriter:
    """Writes a process's kernels and tunings into ``parts`` (a folder) when given, else merges them into ``path``.

    ``error`` is the last write's failure (for the process's report); ``sent`` the request keys
    whose IR this process has written into a part.
    """

    def __init__(self, path: Path, parts: Path | None) -> None:
        self.path = path
        self.parts = parts
        self.error = ""
        self.sent: set[str] = set()
        self._seq = 0  # parts and reports of this process: each gets a name of its own

    def write(self, kernels: Mapping[str, JsonObject], tunings: Mapping[str, JsonObject]) -> int:
        """Write ``kernels`` and ``tunings``; returns the kernels new to the record (0 for a part: merged at the end)."""
        try:
            if self.parts is None:
                return self._merge_into_record(kernels, tunings)
            self._seq += 1
            write_part(self.parts, {k: self._part_item(k, v) for k, v in kernels.items()}, tunings, self._seq)
            self.sent.update(k for k, v in kernels.items() if "ir" in v)
            return 0
        except OSError as e:
            self.error = f"{type(e).__name__}: {e}"
            raise

    def write_report(self, report: ProcessReport) -> None:
        """Leave this process's report beside its parts (under ``capture``; raises ``OSError`` when it cannot)."""
        if self.parts is not None:
            self._seq += 1
            write_report(self.parts, report, self._seq)

    def forked(self) -> None:
        """In a forked child: number its own files from the start (what the parent sent stays sent)."""
        self._seq = 0

    def _part_item(self, key: str, item: JsonObject) -> JsonObject:
        """A kernel as a part carries it: whole the first time, then without its IR (what a merge already has)."""
        if key in self.sent:
            return {k: v for k, v in item.items() if k in _ADDED_LATER}
        return item

    def _merge_into_record(self, kernels: Mapping[str, JsonObject], tunings: Mapping[str, JsonObject]) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(self.path.with_name(self.path.name + ".lock")):
            rec = CaptureRecord.load(self.path, missing_ok=True)
            new = rec.merge(kernels, tunings)
            rec.save()
        return new
