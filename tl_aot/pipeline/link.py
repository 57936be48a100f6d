"""Stages 5 and 6, link and publish: the manifest, images and objects → ``lib<name>.so``, swapped into place with its header.

* :func:`link_and_publish`: both, as every kind of build ends (a one-machine build, ``link`` of a
  sharded one): the images embedded, or packed beside the library (:mod:`tl_aot.pipeline.image_packs`).
* :func:`link`: the manifest, images, launcher and runtime objects → ``lib<name>.so`` in the work folder.
* :func:`publish`: that library, its image packs, header, stamp and depfile (:mod:`tl_aot.pipeline.stamp`) swapped into place together.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..codegen.render import render_manifest
from ..common.destinations import StagedFiles
from ..common.fileutil import write_if_different
from ..common.metadata import Manifest, ManifestJson, manifest_json
from ..cuda.host_compile import embed_images, link_library
from ..cuda.host_objects import generated_object
from .image_packs import PACK_SUFFIX, ImagePacks, pack_built, packs_line
from .options import Log
from .progress import Progress
from .stamp import Input, depfile_text, stamp_text
from .workspace import Outputs

if TYPE_CHECKING:
    from ..common.arch import Arch
    from .variant_run import Launcher

__all__ = ["Provenance", "link", "link_and_publish", "publish"]


@dataclass(frozen=True)
class Provenance:
    """Where a library came from, as its stamp and depfile record it (:mod:`tl_aot.pipeline.stamp`).

    ``lib_key``: the library's key; ``inputs``: (path, digest) of every file lowering read;
    ``deps``: what the depfile names (every kernel file and local module).
    """

    lib_key: str
    inputs: tuple[Input, ...] = ()
    deps: tuple[Path, ...] = ()


def link_and_publish(
    manifest: Manifest,
    images: Mapping[str, tuple[Arch, bytes]],
    launcher: Launcher,
    runtime_obj: Path,
    *,
    work: Path,
    out: Outputs,
    cache: Path,
    key: str,
    provenance: Provenance,
    stamp: bool,
    packs: ImagePacks | None = None,
    jobs: int = 1,
    force: bool = False,
    progress: Progress | None = None,
    log: Log = None,
) -> float:
    """Link ``manifest``'s library from its images (symbol -> (arch, image)) and objects, and publish it with the launcher's header.

    With ``packs`` the images go beside the library, one pack per arch (:func:`pack_built`; the
    library embeds references), else they are embedded. ``stamp``: write the stamp (without, a
    build that left variants out or a sharded build's link, a stale one is removed); the depfile
    is written whenever ``out`` names one. ``key``, ``cache``, ``force``: as :func:`link` takes
    them. Returns the seconds spent packing and linking (the summary's "link").
    """
    t0 = time.perf_counter()
    spelled = manifest_json(manifest)  # once: a whole library's manifest is tens of MB (the build id, the manifest unit, the stamp)
    text = spelled.text
    embedded = {symbol: image for symbol, (_, image) in images.items()}
    packed = None
    if packs is not None:
        packed = pack_built(manifest, dict(images), packs, nvcc_version=manifest.nvcc_version, cache=cache, jobs=jobs, manifest_text=text)
        embedded = packed.refs
    objects = (launcher.obj, runtime_obj)
    built = link(manifest.library, work, manifest, embedded, objects, cache=cache, key=key, force=force, spelled=spelled)
    seconds = time.perf_counter() - t0
    if progress is not None:
        progress.step(f"link {built.name}")
    publish(
        built,
        out,
        manifest,
        launcher.header_text,
        lib_key=provenance.lib_key,
        inputs=provenance.inputs,
        deps=provenance.deps,
        stamp=stamp,
        packs=packed.packs if packed else None,
        manifest_text=text,
    )
    if packed and log:
        log(packs_line(packed))
    return seconds


def link(
    name: str,
    work: Path,
    manifest: Manifest,
    images: Mapping[str, bytes],
    objects: tuple[Path, Path],
    *,
    cache: Path,
    key: str,
    force: bool = False,
    spelled: ManifestJson | None = None,
) -> Path:
    """Link ``lib<name>.so`` in the work folder from the images (symbol -> bytes; with image packs, their references) and the objects.

    Compiles the manifest unit (or takes its object from ``cache``, keyed with ``key``:
    :func:`objects_key`), embeds the images in one object of their own (:func:`embed_images`: one
    assembler run, whatever their number) and links it with the launcher and runtime objects.
    ``objects``: the launcher's and the runtime's, both in the cache (read, never modified).
    ``spelled``: the manifest's JSON, when the caller has it (:func:`~tl_aot.common.metadata.manifest_json`).
    """
    launcher_obj, runtime_obj = objects
    text = render_manifest(manifest, spelled=spelled)
    write_if_different(work / f"{name}.manifest.cc", text)
    manifest_obj, _ = generated_object(
        cache,
        {f"{name}.manifest.cc": text},
        f"{name}.manifest.cc",
        f"{name}.manifest.o",
        extra_key=key,
        what=f"compiling the manifest of {name}",
        force=force,
    )
    embed_images(work, images, f"{name}.images.o", what=f"embedding the images of lib{name}.so")
    objs = [str(launcher_obj), f"{name}.images.o", str(manifest_obj), str(runtime_obj)]
    link_library(work, objs, f"lib{name}.so", what=f"linking lib{name}.so")
    return work / f"lib{name}.so"


def publish(
    built: Path,
    out: Outputs,
    manifest: Manifest,
    header_text: str,
    *,
    lib_key: str,
    inputs: Sequence[Input],
    deps: tuple[Path, ...],
    stamp: bool,
    packs: Mapping[str, bytes] | None = None,
    manifest_text: str | None = None,
) -> None:
    """Swap the linked library, its image packs, header, stamp and depfile into place together (one :class:`StagedFiles`).

    The stamp: :func:`~tl_aot.pipeline.stamp.stamp_text` (without ``stamp``, a build that left
    variants out, the stamp is removed); the depfile: :func:`~tl_aot.pipeline.stamp.depfile_text`.
    An unchanged header or depfile keeps its timestamp. A fault leaves every one of them as it was.
    ``packs`` (file name -> bytes, :mod:`tl_aot.pipeline.image_packs`) go beside the library; packs
    of this library no longer built (another arch set, or images embedded again) are removed.
    The library (moved from the work folder, not copied) and each pack replace their files only
    where their bytes changed: a rebuild that changed one kernel rewrites what holds it, one that
    changed nothing rewrites nothing. ``manifest_text``: ``to_json(manifest)``, when the caller has it.
    """
    header = header_text.encode()
    packs = packs or {}
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
