"""Stages 5 and 6, link and publish: the manifest, images and objects → ``lib<name>.so``, swapped into place with its header.

* :func:`link`: the manifest, images, launcher and runtime objects → ``lib<name>.so`` in the work folder.
* :func:`publish`: that library, its image packs, header, stamp and depfile (:mod:`tl_aot.pipeline.stamp`) swapped into place together.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..codegen.render import render_manifest
from ..common.destinations import StagedFiles
from ..common.fileutil import write_if_different
from ..common.metadata import Manifest
from ..cuda.host_compile import embed_images, link_library
from ..cuda.host_objects import generated_object
from .image_packs import PACK_SUFFIX
from .stamp import Input, depfile_text, stamp_text
from .workspace import Outputs

__all__ = ["link", "publish"]


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
) -> Path:
    """Link ``lib<name>.so`` in the work folder from the images (symbol -> bytes; with image packs, their references) and the objects.

    Compiles the manifest unit (or takes its object from ``cache``, keyed with ``key``:
    :func:`objects_key`), embeds the images in one object of their own (:func:`embed_images`: one
    assembler run, whatever their number) and links it with the launcher and runtime objects.
    ``objects``: the launcher's and the runtime's, both in the cache (read, never modified).
    """
    launcher_obj, runtime_obj = objects
    text = render_manifest(manifest)
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
) -> None:
    """Swap the linked library, its image packs, header, stamp and depfile into place together (one :class:`StagedFiles`).

    The stamp: :func:`~tl_aot.pipeline.stamp.stamp_text` (without ``stamp``, a build that left
    variants out, the stamp is removed); the depfile: :func:`~tl_aot.pipeline.stamp.depfile_text`.
    An unchanged header or depfile keeps its timestamp. A fault leaves every one of them as it was.
    ``packs`` (file name -> bytes, :mod:`tl_aot.pipeline.image_packs`) go beside the library; packs
    of this library no longer built (another arch set, or images embedded again) are removed.
    """
    header = header_text.encode()
    packs = packs or {}
    record = stamp_text(lib_key, built, header, manifest, inputs) if stamp else None
    depfile = depfile_text(out.library, deps, inputs) if out.depfile else None
    staged = StagedFiles()
    try:
        staged.stage(out.library, source=built, role="library")
        for name, data in sorted(packs.items()):
            staged.stage(out.library.with_name(name), data=data, role="image pack")
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
