"""Stages 5 and 6, link and publish: the manifest, images and objects → ``lib<name>.so``, swapped into place with its header.

* :func:`link_and_publish`: both, as every kind of build ends (a one-machine build, ``link`` of a
  sharded one): the images embedded, or packed beside the library (:mod:`tl_aot.pipeline.image_packs`).
* :func:`image_files` / :func:`image_files_of_heads`: the images the link takes, by symbol;
  :func:`with_image_sizes`: the launcher's manifest with their sizes, the one field that waits for them.
* :func:`link`: the manifest, images, launcher and runtime objects → ``lib<name>.so`` in the work folder
  (the host side: :mod:`tl_aot.cuda.host_objects`, :func:`tl_aot.cuda.host_compile.link_with_images`).
* publishing that library with its image packs, header, stamp and depfile: :func:`tl_aot.pipeline.stamp.publish`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..codegen.render import image_symbol, render_manifest
from ..common.metadata import Manifest
from ..common.metadata_json import ManifestJson, manifest_json
from ..cuda.host_compile import link_with_images
from ..cuda.host_objects import generated_object
from .image_packs import ImagePacks, pack_built, packs_line
from .options import Log
from .progress import Progress
from .stamp import Provenance, publish
from .workspace import Outputs

if TYPE_CHECKING:
    from ..common.arch import Arch
    from .plan import Task
    from .variant_run import Launcher

__all__ = ["image_files", "image_files_of_heads", "link", "link_and_publish", "with_image_sizes"]


def with_image_sizes(manifest: Manifest, images: Mapping[str, tuple[Arch, bytes]]) -> Manifest:
    """``manifest`` (made before nvcc was done: the launcher's) with each variant's image size, from ``images`` (symbol -> (arch, image)).

    The size is the one field of a manifest that waits for the images: the launcher stage's manifest
    and this one are otherwise the same, so the link stage does not make it again.
    """
    entries = tuple(
        replace(e, variants=tuple(replace(v, image_bytes=len(images[image_symbol(e.name, v.arch)][1])) for v in e.variants))
        for e in manifest.entries
    )
    return replace(manifest, entries=entries)


def image_files(tasks: Iterable[Task], images: Mapping[str, bytes]) -> dict[str, tuple[Arch, bytes]]:
    """Image symbol -> (arch, image) for the tasks' variants: what the link stage embeds or packs."""
    return {image_symbol(t.spec.name, t.arch): (t.arch, images[t.key]) for t in tasks}


def image_files_of_heads(heads, images: Mapping[str, bytes]) -> dict[str, tuple[Arch, bytes]]:
    """Image symbol -> (arch, image) for :func:`~tl_aot.pipeline.manifest.manifest_from`'s heads ((entry head, [(arch, key), ...]))."""
    return {image_symbol(head.name, arch): (arch, images[key]) for head, arch_keys in heads for arch, key in arch_keys}


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
    publish(built, out, manifest, launcher.header_text, provenance, stamp=stamp, packs=packed.packs if packed else None, manifest_text=text)
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
    :func:`~tl_aot.pipeline.stages.objects_key`; its source is also written to ``work``, to read),
    then embeds the images in one object of their own (one assembler run, whatever their number)
    and links it with the launcher and runtime objects (:func:`~tl_aot.cuda.host_compile.link_with_images`).
    ``objects``: the launcher's and the runtime's, both in the cache (read, never modified).
    ``spelled``: the manifest's JSON, when the caller has it (:func:`~tl_aot.common.metadata_json.manifest_json`).
    """
    launcher_obj, runtime_obj = objects
    text = render_manifest(manifest, spelled=spelled)
    manifest_obj, _ = generated_object(
        cache,
        {f"{name}.manifest.cc": text},
        f"{name}.manifest.cc",
        f"{name}.manifest.o",
        extra_key=key,
        what=f"compiling the manifest of {name}",
        force=force,
        shown_in=work,
    )
    objs = [str(launcher_obj), str(manifest_obj), str(runtime_obj)]
    link_with_images(work, images, f"{name}.images.o", objs, f"lib{name}.so", what=f"linking lib{name}.so")
    return work / f"lib{name}.so"
