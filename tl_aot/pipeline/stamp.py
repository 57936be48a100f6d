"""The library on disk: whether it is what a plan builds (:func:`up_to_date`), and the new one put in its place (:func:`publish`).

The stamp (``<work>/stamp.json``, :func:`stamp_text`) records what the library was built from
(:class:`Provenance`); it is published with the library and read by the next build, here, so its
format lives in one module. The depfile (:func:`depfile_text`) lists what Make or Ninja rebuild the
library on; it is published with the library too, and an up-to-date build writes it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..codegen.torch_native import companion_source
from ..common.destinations import StagedFiles
from ..common.escaping import depfile_path, encode_text
from ..common.fileutil import file_digest, write_if_different
from ..common.fs_errors import filesystem_errors
from ..common.metadata import Manifest
from ..common.metadata_json import from_json, to_plain
from ..config.options import inputs_unchanged
from .image_packs import PACK_SUFFIX, ImagePacks, pack_label, pack_name
from .inputs import generator_files
from .plan import Plan
from .workspace import Outputs

__all__ = ["Current", "Provenance", "depfile_text", "publish", "stamp_text", "up_to_date"]

#: An input header of the library and its digest when the library was built (``[path, sha256]``).
Input = tuple[str, str]


@dataclass(frozen=True)
class Current:
    """The library on disk, found to be what the plan builds: its manifest and the headers its variants read."""

    manifest: Manifest
    inputs: tuple[Input, ...]


@dataclass(frozen=True)
class Provenance:
    """Where a library came from, as its stamp and depfile record it (:mod:`tl_aot.pipeline.stamp`).

    ``lib_key``: the library's key; ``inputs``: (path, digest) of every file lowering read;
    ``deps``: what the depfile names (every kernel file and local module).
    """

    lib_key: str
    inputs: tuple[Input, ...] = ()
    deps: tuple[Path, ...] = ()


def up_to_date(plan: Plan, out: Outputs, *, force: bool, packs: ImagePacks | None, companion: bool = False) -> Current | None:
    """The library on disk when it is what ``plan`` builds (its stamp says so; its depfile is written again), else None.

    A stamp of another shape or key, a library or header changed since, an input header changed
    since, (with image packs) a pack missing beside the library, or (with ``companion``: the torch
    companion is wanted) its source missing, which the launcher stage writes
    (:func:`~tl_aot.codegen.torch_native.companion_source`): not current (built again), never an
    error. A path the depfile cannot spell is refused either way, before anything is replaced.
    """
    current = None if force or not out.header.is_file() else _read_stamp(out, plan.lib_key)
    if current is not None and packs is not None:
        labels = {pack_label(t.arch) for t in plan.tasks}
        if not all(out.library.with_name(pack_name(plan.lib.name, label)).is_file() for label in labels):
            current = None
    # spelled whether or not the library is current: a path the depfile cannot spell is refused either way
    depfile = depfile_text(out.library, plan.deps, current.inputs if current else ()) if out.depfile else None
    if current is not None and companion and not companion_source(out.library).is_file():
        current = None
    if out.depfile and depfile is not None and current is not None:
        write_if_different(out.depfile, depfile)
    return current


def _read_stamp(out: Outputs, lib_key: str) -> Current | None:
    try:
        data = json.loads(out.stamp.read_text())
        if not isinstance(data, dict) or data.get("key") != lib_key or data.get("library_sha256") != file_digest(out.library):
            return None
        if data.get("header_sha256") != file_digest(out.header):
            return None  # a header truncated or edited since: publish it again
        inputs = tuple(tuple(i) for i in data["inputs"])
        if not all(len(i) == 2 and all(isinstance(x, str) for x in i) for i in inputs) or not inputs_unchanged(inputs):
            return None
        return Current(from_json(Manifest, data["manifest"]), inputs)
    except Exception:  # noqa: BLE001 (missing, not JSON, of another shape: not up to date)
        return None


def stamp_text(
    lib_key: str, built: Path, header: bytes, manifest: Manifest, inputs: Iterable[Input], *, manifest_text: str | None = None
) -> bytes:
    """The stamp of the library ``built`` (about to replace the one in place), its ``header`` and the input headers it read.

    The stamp names the new library's digest: published with it (:func:`publish`),
    it can never make another library look up to date. ``manifest_text``: ``to_json(manifest)``
    when the caller has it, spliced in as it is (a whole library's manifest is tens of MB).
    """
    with filesystem_errors("read the linked library", built):
        library_sha256 = file_digest(built)
    head = {"key": lib_key, "library_sha256": library_sha256, "header_sha256": hashlib.sha256(header).hexdigest()}
    spelled = manifest_text if manifest_text is not None else json.dumps(to_plain(manifest))
    text = json.dumps(head)[:-1] + ', "manifest": ' + spelled + ', "inputs": ' + json.dumps([list(i) for i in inputs]) + "}"
    return text.encode()


def depfile_text(library: Path, deps: Iterable[Path], inputs: Iterable[Input] = ()) -> bytes:
    """A Makefile depfile: ``library`` depends on the kernel files and local modules, its input headers and tl_aot's templates."""
    listed = [*sorted({*deps, *(Path(p) for p, _ in inputs)}), *generator_files()]
    lines = [f"{depfile_path(library)}: \\"] + [f"  {depfile_path(d)} \\" for d in listed]
    lines[-1] = lines[-1][:-2]
    return encode_text("\n".join(lines) + "\n")


def publish(
    built: Path,
    out: Outputs,
    manifest: Manifest,
    header_text: str,
    provenance: Provenance,
    *,
    stamp: bool,
    packs: Mapping[str, bytes] | None = None,
    manifest_text: str | None = None,
) -> None:
    """Swap the linked library, its image packs, header, stamp and depfile into place together (one :class:`StagedFiles`).

    ``provenance``: what the stamp and depfile record. The stamp: :func:`stamp_text` (without ``stamp``, a build that left
    variants out, the stamp is removed); the depfile: :func:`depfile_text`.
    An unchanged header or depfile keeps its timestamp. A fault leaves every one of them as it was.
    ``packs`` (file name -> bytes, :mod:`tl_aot.pipeline.image_packs`) go beside the library; packs
    of this library no longer built (another arch set, or images embedded again) are removed.
    The library (moved from the work folder, not copied) and each pack replace their files only
    where their bytes changed: a rebuild that changed one kernel rewrites what holds it, one that
    changed nothing rewrites nothing. ``manifest_text``: ``to_json(manifest)``, when the caller has it.
    """
    header = header_text.encode()
    packs = packs or {}
    lib_key, inputs, deps = provenance.lib_key, provenance.inputs, provenance.deps
    record = stamp_text(lib_key, built, header, manifest, inputs, manifest_text=manifest_text) if stamp else None
    depfile = depfile_text(out.library, deps, inputs) if out.depfile else None
    staged = StagedFiles()
    try:
        staged.stage(out.library, source=built, role="library", if_changed=True, move=True)
        for name, data in sorted(packs.items()):
            staged.stage(out.library.with_name(name), data=data, role="image pack", if_changed=True)
        staged.stage(out.header, data=header, role="header", if_changed=True)
        if record is not None:
            staged.stage(out.stamp, data=record, role="build stamp", mode=0o644)
        else:
            staged.remove(out.stamp)
        if out.depfile:
            staged.stage(out.depfile, data=depfile, role="depfile", mode=0o644, if_changed=True)
    except BaseException:
        staged.discard()
        raise
    staged.publish()
    for stale in sorted(out.library.parent.glob(f"{out.library.stem}.*{PACK_SUFFIX}")):
        if stale.name not in packs:
            with contextlib.suppress(OSError):
                stale.unlink()
