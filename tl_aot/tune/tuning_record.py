"""Tuning records: which config each entry was tuned to, per arguments × arch × GPU, in a readable file.

``python -m tl_aot tune`` writes them on a GPU host; ``build`` reads them anywhere (no GPU): each
variant with a record for its arch is built with the recorded config. The file is JSON with one
item per (entry, args, arch, GPU), sorted, indented, so it diffs well under version control. An
item keeps every candidate's time, the versions it was tuned with and a digest of the kernel's
source (and the local modules it imports): a record older than the source warns, or fails with
``strict``.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import logging
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..common.errors import SpecError
from ..common.fileutil import atomic_write
from ..common.metadata import NamedRepr
from ..config.kernel_spec import KernelSpec, LibrarySpec

__all__ = ["FORMAT", "Candidate", "Item", "TuningRecord", "source_digest", "apply_record", "record_path_for"]

FORMAT = "tl_aot tuning record"
VERSION = 1
_log = logging.getLogger("tl_aot")
_PAIRS = ("args", "chosen", "config", "versions")  # (name, value) pairs, stored as JSON objects


@dataclass(frozen=True)
class Candidate:
    """One candidate config and what tuning measured: ms per call, or why it was dropped."""

    config: tuple[NamedRepr, ...]  # (name, python repr) pairs, sorted
    ms: float | None = None
    error: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "config", tuple(sorted(self.config)))


@dataclass(frozen=True)
class Item:
    """The tuning of one entry for one (args, arch, GPU)."""

    entry: str
    function: str
    source: str
    args: tuple[NamedRepr, ...]  # (name, python repr) pairs, the config's keys excluded
    arch: str
    gpu: str
    chosen: tuple[NamedRepr, ...]  # (name, python repr) pairs
    ms: float
    candidates: tuple[Candidate, ...] = ()
    source_digest: str = ""
    versions: tuple[tuple[str, str], ...] = ()  # (tool, version) pairs: tl_aot, tilelang, nvcc, torch
    tuned_at: str = ""

    def __post_init__(self) -> None:  # pairs sorted: the file stores them as JSON objects
        for name in ("args", "chosen", "versions"):
            object.__setattr__(self, name, tuple(sorted(getattr(self, name))))

    @property
    def key(self) -> tuple[str, tuple[NamedRepr, ...], str, str]:
        return (self.entry, self.args, self.arch, self.gpu)

    def config(self) -> dict[str, Any]:
        return {k: ast.literal_eval(v) for k, v in self.chosen}


@dataclass(frozen=True)
class TuningRecord:
    """A tuning record file's items."""

    items: tuple[Item, ...] = ()

    def merged(self, new: list[Item]) -> TuningRecord:
        """The record with ``new`` items replacing those of the same (entry, args, arch, GPU)."""
        keys = {i.key for i in new}
        return TuningRecord(tuple(sorted([i for i in self.items if i.key not in keys] + list(new), key=lambda i: i.key)))

    def to_json(self) -> str:
        def plain(obj):
            if dataclasses.is_dataclass(obj):  # (name, value) pairs as objects: {"block_M": "128"}
                return {f.name: dict(v) if f.name in _PAIRS else plain(v) for f in dataclasses.fields(obj) for v in [getattr(obj, f.name)]}
            if isinstance(obj, (list, tuple)):
                return [plain(v) for v in obj]
            return obj

        return json.dumps({"format": FORMAT, "version": VERSION, "items": plain(list(self.items))}, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str = "tuning record") -> TuningRecord:
        try:
            data = json.loads(text)
        except ValueError as e:
            msg = f"{where}: not valid JSON: {e}"
            raise SpecError(msg) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            msg = f"{where}: not a tl_aot tuning record (python -m tl_aot tune writes them)"
            raise SpecError(msg)
        if data.get("version") != VERSION:
            msg = f"{where}: record version {data.get('version')}; this tl_aot reads version {VERSION}"
            raise SpecError(msg)

        def pairs(v):
            return tuple(v.items()) if isinstance(v, dict) else tuple(tuple(x) for x in v)

        items = []
        try:
            for raw in data.get("items", []):
                fields = {k: pairs(v) if k in _PAIRS else v for k, v in raw.items() if k in Item.__dataclass_fields__}
                fields["candidates"] = tuple(Candidate(**{**c, "config": pairs(c["config"])}) for c in raw.get("candidates", []))
                items.append(Item(**fields))
        except (TypeError, KeyError, AttributeError) as e:
            msg = f"{where}: a malformed item ({type(e).__name__}: {e})"
            raise SpecError(msg) from None
        return cls(tuple(items))

    @classmethod
    def load(cls, path: str | Path) -> TuningRecord:
        path = Path(path)
        try:
            return cls.from_json(path.read_text(), str(path))
        except OSError as e:
            msg = f"cannot read tuning record {path}: {e.strerror}"
            raise SpecError(msg) from None

    def save(self, path: str | Path) -> None:
        atomic_write(Path(path), self.to_json().encode())


def _args_key(spec: KernelSpec, config_keys: Collection[str]) -> tuple[NamedRepr, ...]:
    return tuple(sorted((k, repr(v)) for k, v in spec.args if k not in config_keys))


def _strip(args: tuple[NamedRepr, ...], config_keys: Collection[str]) -> tuple[NamedRepr, ...]:
    return tuple(sorted((k, v) for k, v in args if k not in config_keys))


def source_digest(spec: KernelSpec) -> str:
    """Digest of the kernel file and the local modules it imports: a record older than them is stale."""
    from ..config.user_code import snapshot_sources

    return snapshot_sources(spec.source, spec.imports).digest()


def record_path_for(spec_file: str | Path) -> Path:
    """The record found next to a spec file: ``kernels.toml`` → ``kernels.tune.json``."""
    spec_file = Path(spec_file)
    return spec_file.with_name(spec_file.stem + ".tune.json")


def _pick_gpu(items: list[Item], device: str) -> Item:
    """Several GPUs of one arch tuned: the one ``device`` names (e.g. H100-PCIe ~ 'H100 PCIe'), else the first."""
    if device:
        want = device.lower().replace("-", " ").split()
        for i in items:
            if all(w in i.gpu.lower().replace("-", " ") for w in want):
                return i
    return sorted(items, key=lambda i: i.gpu)[0]


def apply_record(lib: LibrarySpec, record: TuningRecord, *, strict: bool = False, where: str = "tuning record") -> LibrarySpec:
    """``lib`` with each spec's ``tuned`` set from ``record`` for every arch the record has.

    A record whose source digest no longer matches the kernel file warns (``strict``: raises).
    """
    out = []
    for spec in lib.entries:
        tuned = []
        for arch in spec.archs:
            items = [i for i in record.items if i.entry == spec.name and i.arch == arch.sm]
            keys = {k for i in items for k, _ in i.chosen}
            matches = [i for i in items if _strip(i.args, keys) == _args_key(spec, keys)]
            if not matches:
                continue
            item = _pick_gpu(matches, spec.device)
            if item.source_digest and item.source_digest != source_digest(spec):
                msg = (
                    f"{where}: entry {spec.name!r} ({arch.sm}) was tuned on {item.tuned_at or 'an earlier date'} from a "
                    f"different {Path(spec.source).name} (or a module it imports); re-run python -m tl_aot tune"
                )
                if strict:
                    raise SpecError(msg)
                _log.warning("%s; building the recorded config anyway", msg)
            others = sorted({i.gpu for i in matches} - {item.gpu})
            note = f"{item.gpu}, {item.ms:.4g} ms" + (f"; also tuned: {', '.join(others)}" if others else "")
            tuned.append((arch.sm, item.chosen, note))
        out.append(dataclasses.replace(spec, tuned=tuple(tuned)) if tuned else spec)
    return dataclasses.replace(lib, entries=tuple(out))
