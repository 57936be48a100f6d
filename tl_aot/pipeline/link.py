"""Stages 5 and 6, link and publish: the manifest, images and objects → ``lib<name>.so``, swapped into place with its header.

* :func:`link`: the manifest, images, launcher and runtime objects → ``lib<name>.so`` in the work folder.
* :func:`publish`: that library, its header, image packs, stamp and depfile moved into place together.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..codegen.render import render_manifest
from ..common.destinations import StagedFiles
from ..common.escaping import depfile_path, encode_text
from ..common.fileutil import atomic_write, file_digest, write_if_different
from ..common.fs_errors import filesystem_errors
from ..common.metadata import Manifest, to_json
from ..cuda.host_compile import embed_images, link_library
from ..cuda.host_objects import generated_object
from .image_packs import PACK_SUFFIX
from .inputs import generator_files

__all__ = ["Outputs", "link", "publish", "write_depfile", "sweep_debris"]


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


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


@dataclass(frozen=True)
class Outputs:
    """Where a build puts what it publishes."""

    library: Path
    header: Path
    stamp: Path
    depfile: Path | None


def publish(
    built: Path,
    out: Outputs,
    manifest: Manifest,
    header_text: str,
    *,
    lib_key: str,
    inputs: list,
    deps: tuple[Path, ...],
    stamp: bool,
    packs: Mapping[str, bytes] | None = None,
) -> None:
    """Swap the linked library, its header and its image packs into place together, after writing the stamp and the depfile.

    The stamp names the new library's digest, so written first it cannot make the library that
    is still in place look up to date; a fault before the swap leaves library and header as they
    were. Without ``stamp`` (a build that left variants out) the stamp is removed: the next build
    tries again. ``packs`` (file name -> bytes, :mod:`tl_aot.pipeline.image_packs`) go beside the
    library; packs of this library no longer built (another arch set, or images embedded again) are removed.
    """
    staged = StagedFiles()
    packs = packs or {}
    try:
        staged.stage(out.library, source=built, role="library")
        for name, data in sorted(packs.items()):
            staged.stage(out.library.with_name(name), data=data, role="image pack")
        header = header_text.encode()
        if _read_bytes(out.header) != header:  # an unchanged header keeps its timestamp
            with filesystem_errors("create the header folder", out.header.parent):
                out.header.parent.mkdir(parents=True, exist_ok=True)
            staged.stage(out.header, data=header, role="header")
        with filesystem_errors("read the linked library", built):
            library_sha256 = file_digest(built)
        with filesystem_errors("write the build stamp", out.stamp):
            if stamp:
                record = {
                    "key": lib_key,
                    "library_sha256": library_sha256,
                    "header_sha256": hashlib.sha256(header).hexdigest(),
                    "manifest": json.loads(to_json(manifest)),
                    "inputs": inputs,
                }
                atomic_write(out.stamp, json.dumps(record))
            else:
                out.stamp.unlink(missing_ok=True)
        if out.depfile:
            with filesystem_errors("write the depfile", out.depfile):
                write_depfile(out.depfile, out.library, tuple(sorted({*deps, *(Path(p) for p, _ in inputs)})))
    except BaseException:
        staged.discard()
        raise
    staged.publish()
    for stale in sorted(out.library.parent.glob(f"{out.library.stem}.*{PACK_SUFFIX}")):
        if stale.name not in packs:
            with contextlib.suppress(OSError):
                stale.unlink()


def write_depfile(path: Path, target: Path, deps) -> None:
    """A Makefile depfile: the library depends on the kernel files, local modules, headers and tl_aot's templates."""
    lines = [f"{depfile_path(target)}: \\"] + [f"  {depfile_path(d)} \\" for d in [*deps, *generator_files()]]
    lines[-1] = lines[-1][:-2]
    write_if_different(path, encode_text("\n".join(lines) + "\n"))


def sweep_debris(work: Path, out: Outputs | None = None) -> None:
    """Remove what killed builds of this library left in its work folder and beside its outputs (the caller holds its lock)."""
    beside = [p for f in (out.library, out.header) for p in f.parent.glob(f".{f.name}.*") if p.suffix in (".part", ".old")] if out else []
    for p in [*work.glob(".lib*.part"), *beside]:
        with contextlib.suppress(OSError):
            p.unlink()
    kernels = work / "kernels"
    if kernels.is_dir():
        for p in kernels.iterdir():
            if p.name.startswith(".") and p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
