"""A sharded build's part: ``part.json``, typed, and the variants it holds.

A part folder holds ``part.json`` (:class:`Part`: library, shard, the library key, the toolset,
every entry's manifest head, every variant's key, the captured kernels' tunings and call keys) and
``variants/<key>.tlv`` (each variant's metadata and image, in the shared cache's verified format).
Written by ``build --shard K/N``, read by ``link`` (:mod:`tl_aot.pipeline.shards`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common.errors import PartError
from ..common.fileutil import atomic_write
from ..common.metadata import Call, LeftOut, LoweredEntry, LoweredVariant, Tuning
from ..common.metadata_json import from_json, to_json
from ..cuda.image_check import variant_image_problem
from .shared_cache import pack_entry, unpack_entry

__all__ = ["PART_FORMAT", "Part", "PartTask", "PartError"]

PART_FORMAT = "tl_aot-part/1"


@dataclass(frozen=True)
class PartTask:
    """One variant of the library, as every part lists them (plan order): its entry, arch and key."""

    entry: str
    arch: str
    key: str


@dataclass(frozen=True)
class Part:
    """``part.json``: what shard ``shard`` of ``of`` of a library holds, and what ``link`` needs of the library."""

    folder: Path
    library: str
    shard: int  # K, counted from 1
    of: int  # N
    lib_key: str  # the whole library's key: the same in every part of one build
    toolset: Mapping[str, str]  # tl_aot.pipeline.toolset.Toolset.as_dict() of the machine that built it
    tasks: tuple[PartTask, ...]  # every variant of the library (plan order), not only this part's
    nvcc_version: str = ""
    tvm_ffi_version: str = ""
    tilelang_version: str = ""
    compiler: str = ""
    entries: tuple[LoweredEntry, ...] = ()  # each entry's manifest head, in the library's order
    variants: Mapping[str, str] = field(default_factory=dict)  # key -> its file, relative to the folder
    left_out: tuple[LeftOut, ...] = ()
    tunings: tuple[Tuning, ...] = ()
    calls: tuple[Call, ...] = ()

    @property
    def spelled(self) -> str:
        """``2/4``."""
        return f"{self.shard}/{self.of}"

    def to_json(self) -> str:
        """``part.json``'s text (keys sorted: the same part, the same bytes)."""
        data = {
            "format": PART_FORMAT,
            "library": self.library,
            "shard": [self.shard, self.of],
            "lib_key": self.lib_key,
            "toolset": dict(self.toolset),
            "nvcc_version": self.nvcc_version,
            "tvm_ffi_version": self.tvm_ffi_version,
            "tilelang_version": self.tilelang_version,
            "compiler": self.compiler,
            "entries": [_plain(e) for e in self.entries],
            "tasks": [[t.entry, t.arch, t.key] for t in self.tasks],
            "variants": dict(self.variants),
            "left_out": [_plain(x) for x in self.left_out],
            "tunings": [_plain(t) for t in self.tunings],
            "calls": [_plain(c) for c in self.calls],
        }
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    def write(self, lowered: Mapping[str, LoweredVariant], images: Mapping[str, bytes]) -> None:
        """Write ``variants/<key>.tlv`` for each variant the part holds (earlier ones removed), then ``part.json``."""
        folder = self.folder / "variants"
        folder.mkdir(exist_ok=True)
        for old in folder.glob("*.tlv"):
            old.unlink()
        for key, rel in self.variants.items():
            atomic_write(self.folder / rel, pack_entry(key, to_json(lowered[key], indent=1), images[key]))
        atomic_write(self.folder / "part.json", self.to_json())

    @classmethod
    def read(cls, folder: Path) -> Part:
        """The part in ``folder``; an error names what is wrong (no part, unreadable, another format)."""
        try:
            data = json.loads((folder / "part.json").read_text())
        except FileNotFoundError:
            msg = f"{folder} is not a build part: no part.json (make one with `python -m tl_aot build ... --shard K/N -o {folder}`)"
            raise PartError(msg) from None
        except (OSError, ValueError) as e:
            msg = f"{folder}/part.json cannot be read: {e}"
            raise PartError(msg) from None
        if not isinstance(data, dict) or data.get("format") != PART_FORMAT:
            msg = f"{folder}/part.json is not a tl_aot build part of this tl_aot ({PART_FORMAT})"
            raise PartError(msg)
        try:
            k, n = data["shard"]
            return cls(
                folder=folder,
                library=str(data["library"]),
                shard=int(k),
                of=int(n),
                lib_key=str(data["lib_key"]),
                toolset={str(a): str(b) for a, b in data["toolset"].items()},
                tasks=tuple(PartTask(str(e), str(a), str(key)) for e, a, key in data["tasks"]),
                nvcc_version=str(data.get("nvcc_version", "")),
                tvm_ffi_version=str(data.get("tvm_ffi_version", "")),
                tilelang_version=str(data.get("tilelang_version", "")),
                compiler=str(data.get("compiler", "")),
                entries=tuple(_typed(LoweredEntry, e) for e in data.get("entries", [])),
                variants={str(a): str(b) for a, b in data.get("variants", {}).items()},
                left_out=tuple(_typed(LeftOut, x) for x in data.get("left_out", [])),
                tunings=tuple(_typed(Tuning, t) for t in data.get("tunings", [])),
                calls=tuple(_typed(Call, c) for c in data.get("calls", [])),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            msg = f"{folder}/part.json is damaged ({type(e).__name__}: {e}): build this shard again"
            raise PartError(msg) from None

    def variant(self, task: PartTask) -> tuple[LoweredVariant, bytes] | None:
        """The variant of ``task`` this part holds, read and verified (None when it left it out); damage is an error."""
        rel = self.variants.get(task.key)
        if rel is None:
            return None
        where = f"{self.folder}/{rel}: variant {task.entry} {task.arch}"
        try:
            raw = (self.folder / rel).read_bytes()
        except OSError as e:
            msg = f"{self.folder}: variant {task.entry} {task.arch} ({rel}) cannot be read: {e}"
            raise PartError(msg) from None
        got = unpack_entry(raw, task.key)
        if got is None:
            msg = f"{where} is damaged (its digest or size differs): build shard {self.shard} again"
            raise PartError(msg)
        variant = from_json(LoweredVariant, got[0])
        problem = variant_image_problem(variant, got[1])
        if problem:
            msg = f"{where} holds a damaged image ({problem}): build shard {self.shard} again"
            raise PartError(msg)
        return variant, got[1]


def _plain(value: Any) -> Any:
    return json.loads(to_json(value))


def _typed(cls: type, value: Any) -> Any:
    return from_json(cls, json.dumps(value))
