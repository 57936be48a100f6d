"""The manifest's compact index: what loading and serving read of a library, each entry's record left unparsed.

A library embeds its manifest (:class:`tl_aot.common.metadata.Manifest` as JSON, the one source
of truth) and, beside it, this index made from the same manifest at build time: the library's
versions, and per entry its names, the request keys and archs of its variants, and where its
record lies in the manifest's text (offset, length, SHA-256). ``tl_aot.load`` and ``tl_aot.serve``
read the index alone (a few hundred bytes per entry instead of several KB of JSON and a tree of
dataclasses); an entry's record is sliced out of the manifest and parsed the first time
something asks for it (:mod:`tl_aot.runtime.loader`), checked against the digest the index holds.

The index is JSON with positional rows, read only here, into the typed records below::

    {"abi_version": 4, "library": ..., versions ..., "manifest_bytes": N, "manifest_sha256": ...,
     "entries": [[name, export, origin, capture_key, offset, length, sha256,
                  [[request_key, arch, ptx], ...]], ...],
     "tunings": [offset, length, sha256, [key, ...]],
     "calls": [[call key, request key], ...],
     "captured_on": [GPU model, ...]}

Rows are named tuples, not dataclasses: a 2,000-entry index is read in a few milliseconds.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from .arch import Arch, parse_arch

if TYPE_CHECKING:  # the dataclasses are the build's (making an index), not loading's: a load imports none of them
    from .json_types import JsonMapping
    from .metadata import Manifest

__all__ = ["IndexVariant", "IndexEntry", "Span", "ManifestIndex", "index_text", "parse_index", "index_of", "INDEX_FIELDS"]

#: The library-level fields the index copies from the manifest as they are.
INDEX_FIELDS = (
    "abi_version",
    "library",
    "tl_aot_version",
    "tilelang_version",
    "nvcc_version",
    "compiler",
    "driver_min_cuda",
    "driver_min_version",
)


class IndexVariant(NamedTuple):
    """One arch's image of an entry: the request it answers and the arch it runs on."""

    request_key: str  # "" when the entry was built from a plain prim_func with no JIT request
    arch: Arch


class Span(NamedTuple):
    """Where a record lies in the manifest's text (ASCII: characters are bytes) and its SHA-256."""

    offset: int
    length: int
    sha256: str


class IndexEntry(NamedTuple):
    """An entry as the index shows it: enough to export, serve and find it; its record stays in the manifest."""

    name: str
    export: str  # the export this specialises ("": exported as ``name``)
    origin: str  # the captured prim_func's name, else the entry's function: what a miss's "nearest prebuilt" groups by
    capture_key: str
    span: Span  # the entry's record (:class:`LoweredEntry` JSON) in the manifest's text
    variants: tuple[IndexVariant, ...]  # in the manifest's order

    @property
    def exported(self) -> str:
        """The name the library exports this under (several specialisations share one)."""
        return self.export or self.name


@dataclass(frozen=True)
class ManifestIndex:
    """A library's index: its versions, its entries in the manifest's order, its tunings' keys and call keys."""

    abi_version: int
    library: str
    tl_aot_version: str
    tilelang_version: str
    nvcc_version: str
    compiler: str
    driver_min_cuda: str
    driver_min_version: str
    manifest_bytes: int  # length of the manifest's text, which every span lies within
    manifest_sha256: str  # of the whole manifest's text
    entries: tuple[IndexEntry, ...]
    tunings: Span | None  # the manifest's ``tunings`` array (parsed whole on first use; None: no tunings)
    tuning_keys: tuple[str, ...]  # in the manifest's order
    calls: tuple[tuple[str, str], ...]  # (call key, request key)
    #: the GPU models its captured kernels were recorded on (every entry's ``captured_on``; () in libraries older than it)
    captured_on: tuple[str, ...] = ()

    def exports(self) -> dict[str, tuple[IndexEntry, ...]]:
        """Exported name -> its entries (one for an unspecialised export), in library order."""
        out: dict[str, list[IndexEntry]] = {}
        for e in self.entries:
            out.setdefault(e.exported, []).append(e)
        return {k: tuple(v) for k, v in out.items()}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _span_of(text: str, part: str, start: int) -> Span:
    at = text.find(part, start)
    if at < 0:  # a bug, never a user's error: the parts are serialised as the whole was
        msg = "a manifest part is not in the manifest's text"
        raise AssertionError(msg)
    return Span(at, len(part), _sha(part))


def index_text(manifest: Manifest, text: str, entry_texts: Sequence[str] | None = None) -> str:
    """The index of ``manifest`` whose text (:func:`tl_aot.common.metadata_json.to_json`) is ``text``.

    Each entry's span is found by its own serialisation, which the whole's contains verbatim
    (keys sorted, no indent), so a slice parses to exactly the entry the eager parse gives.
    ``entry_texts``: those serialisations, when the caller has them
    (:func:`~tl_aot.common.metadata_json.manifest_json`); each is still found in ``text``.
    """
    from .escaping import json_text
    from .metadata_json import to_json

    entries = []
    at = text.find('"entries": [')
    spelled = entry_texts if entry_texts is not None else [to_json(e) for e in manifest.entries]
    if len(spelled) != len(manifest.entries):
        msg = "the entries' texts are not the manifest's entries"
        raise AssertionError(msg)
    for e, part in zip(manifest.entries, spelled):
        span = _span_of(text, part, at)
        at = span.offset + span.length
        variants = [[v.request_key or e.capture_key, v.arch.sm, v.arch.ptx] for v in e.variants]
        row = [e.name, e.export, e.capture_name or e.function, e.capture_key, *span, variants]
        entries.append(row)
    tunings = None
    if manifest.tunings:
        spelled = json_text([json.loads(to_json(t)) for t in manifest.tunings])
        span = _span_of(text, '"tunings": ' + spelled, 0)
        tunings = [span.offset + len('"tunings": '), len(spelled), _sha(spelled), [t.key for t in manifest.tunings]]
    data = {name: getattr(manifest, name) for name in INDEX_FIELDS}
    data.update(
        manifest_bytes=len(text),
        manifest_sha256=_sha(text),
        entries=entries,
        tunings=tunings,
        calls=[[c.key, c.request_key] for c in manifest.calls],
        captured_on=sorted({n for e in manifest.entries for n in e.captured_on}),
    )
    return json.dumps(data, separators=(",", ":"), ensure_ascii=True)


#: Rows are built as tuples in C: a named tuple's own ``__new__`` is a Python call per row, ~12,000 of them at 2,000 entries
#: of four archs (the rows' lengths are checked by unpacking them).
_new = tuple.__new__


def parse_index(text: str | JsonMapping) -> ManifestIndex:
    """The :class:`ManifestIndex` of an index's text (or its JSON value).

    A malformed index raises ``ValueError``, ``KeyError`` or ``TypeError``.
    """
    raw = json.loads(text) if isinstance(text, str) else text
    archs: tuple[dict[str, Arch], dict[str, Arch]] = ({}, {})  # sm -> Arch, without and with +PTX: a library has a handful
    entries = []
    for name, export, origin, capture, offset, length, sha, vs in raw["entries"]:
        variants = []
        for key, sm, ptx in vs:
            held = archs[1 if ptx else 0]
            arch = held.get(sm)
            if arch is None:
                arch = held[sm] = parse_arch(sm + ("+PTX" if ptx else ""))
            variants.append(_new(IndexVariant, (key, arch)))
        entries.append(_new(IndexEntry, (name, export, origin, capture, _new(Span, (offset, length, sha)), tuple(variants))))
    t = raw["tunings"]
    return ManifestIndex(
        **{name: raw[name] for name in INDEX_FIELDS},
        manifest_bytes=int(raw["manifest_bytes"]),
        manifest_sha256=str(raw["manifest_sha256"]),
        entries=tuple(entries),
        tunings=None if t is None else Span(int(t[0]), int(t[1]), str(t[2])),
        tuning_keys=() if t is None else tuple(t[3]),
        calls=tuple([(k, r) for k, r in raw["calls"]]),
        captured_on=tuple(str(n) for n in raw.get("captured_on", ())),
    )


def index_of(manifest: Manifest) -> ManifestIndex:
    """The index a library built from ``manifest`` carries (for what serves a manifest held in memory)."""
    from .metadata_json import to_json

    return parse_index(index_text(manifest, to_json(manifest)))
