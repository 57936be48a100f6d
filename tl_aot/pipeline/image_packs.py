"""Image packs: a library's images kept beside it, compressed, stored once by content, one file per arch.

With packs, ``lib<name>.so`` holds the launcher and the manifest and, in place of each image, a
reference (its SHA-256, the library's build id, the pack's file name, what to install when the pack
is missing); each arch's images go to ``lib<name>.<label>.tlpack`` beside it (``label``: ``sm_90a``,
``sm_80_ptx``). A wheel then splits by arch (:mod:`tl_aot.wheel.arch_wheels`) and a user installs
the archs their GPUs need. The runtime (``src/packs.cc``) reads an image on its entry's first call
only, refuses a pack whose build id is not the library's, and checks each image's SHA-256.
Why this design: ``docs/wheels.md``.
"""

from __future__ import annotations

import hashlib
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..common.arch import Arch
from ..common.metadata import Manifest
from ..common.metadata_json import to_json
from ..cuda.fatbin import compressed_fatbin, fatbinary_path

__all__ = [
    "PACK_SUFFIX",
    "ImagePacks",
    "PackedLibrary",
    "pack_label",
    "pack_name",
    "pack_library",
    "pack_built",
    "packs_line",
    "read_pack",
    "read_ref",
    "wheel_tag",
]

PACK_SUFFIX = ".tlpack"
_REF_MAGIC = b"TLAOTRF1"
_PACK_MAGIC = b"TLAOTPK1"
_PACK_VERSION = 1
_ROW = struct.Struct("<32sQQ")
_HEAD = struct.Struct("<8sII32s16s")


@dataclass(frozen=True)
class ImagePacks:
    """A build's choice to keep images in packs.

    ``hint``: what the runtime tells a user whose pack is missing, ``{tag}`` standing for the
    arch's wheel tag (``sm90a``): ``pip install 'tl-demo-{tag}==0.1.0'``; "" says to copy the pack
    beside the library. ``compress``: wrap cubins in compressed fatbins (where the toolkit has fatbinary).
    """

    hint: str = ""
    compress: bool = True


@dataclass(frozen=True)
class PackedLibrary:
    """What :func:`pack_library` made: the references to embed, the packs to write, and what it stored."""

    build_id: str  # hex SHA-256 over the manifest and every image's digest
    refs: dict[str, bytes]  # image symbol -> reference bytes, embedded in the library in place of the image
    packs: dict[str, bytes]  # pack file name -> bytes
    images: int  # images referenced
    stored: int  # distinct images stored (identical images once)
    raw_bytes: int  # the images as built
    stored_bytes: int  # what the packs hold (compressed, once)
    compressed: bool


def pack_label(arch: Arch) -> str:
    """The label of ``arch``'s pack: ``sm_90a``, ``sm_80_ptx``."""
    return arch.sm + ("_ptx" if arch.ptx else "")


def pack_name(library: str, label: str) -> str:
    """``lib<library>.<label>.tlpack``."""
    return f"lib{library}.{label}{PACK_SUFFIX}"


def wheel_tag(label: str) -> str:
    """The tag an arch's wheel adds to the distribution name: ``sm_90a`` → ``sm90a``."""
    return label.replace("_", "")


def pack_library(
    manifest: Manifest,
    images: dict[str, tuple[Arch, bytes]],
    settings: ImagePacks,
    *,
    cuda_version: tuple[int, int],
    cache: Path,
    jobs: int = 1,
    manifest_text: str | None = None,
) -> PackedLibrary:
    """The packs and references of a library: ``images`` maps image symbol -> (arch, bytes as built).

    Cubins are compressed (each alone, so one can be read without the others; each compressed
    image kept in ``cache`` by the SHA-256 of the cubin, so an unchanged one is never compressed
    again), then every arch's distinct images are written once each into its pack, sorted by
    digest. The build id binds the packs to this library: it covers the manifest (entries, capture
    keys, tl_aot, TileLang and compiler versions) and the digest of every image, so a pack from
    another record or toolchain never matches. ``manifest_text``: the manifest's
    :func:`~tl_aot.common.metadata_json.to_json`, when the caller has it (a whole library's is tens of
    MB: serialised once per link).
    """
    tool = fatbinary_path() if settings.compress else ""

    def stored(item: tuple[Arch, bytes]) -> bytes:
        arch, data = item
        if not tool or arch.ptx:  # +PTX images are fatbins already, their PTX compressed by nvcc
            return data
        return compressed_fatbin(data, arch, cuda_version, tool=tool, cache=cache / "compressed")

    def stored_digests(chunk: list[str]) -> list[tuple[bytes, bytes]]:
        out = []
        for s in chunk:
            blob = stored(images[s])
            out.append((blob, hashlib.sha256(blob).digest()))
        return out

    symbols = sorted(images)
    chunks = [symbols[i :: max(1, jobs)] for i in range(max(1, jobs))]  # one task per thread: thousands of cache hits
    blobs: dict[str, bytes] = {}
    digests: dict[str, bytes] = {}
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        for chunk, done in zip(chunks, pool.map(stored_digests, chunks)):
            for s, (blob, digest) in zip(chunk, done):
                blobs[s], digests[s] = blob, digest
    build = hashlib.sha256((manifest_text if manifest_text is not None else to_json(manifest)).encode())
    for s in symbols:
        build.update(s.encode() + b"\0" + digests[s])
    build_id = build.digest()
    by_label: dict[str, dict[bytes, bytes]] = {}
    refs = {}
    for s in symbols:
        label = pack_label(images[s][0])
        by_label.setdefault(label, {})[digests[s]] = blobs[s]
        refs[s] = _ref(digests[s], len(blobs[s]), build_id, label, pack_name(manifest.library, label), settings.hint)
    packs = {pack_name(manifest.library, label): _pack(label, build_id, held) for label, held in sorted(by_label.items())}
    return PackedLibrary(
        build_id=build_id.hex(),
        refs=refs,
        packs=packs,
        images=len(symbols),
        stored=sum(len(h) for h in by_label.values()),
        raw_bytes=sum(len(images[s][1]) for s in symbols),
        stored_bytes=sum(len(b) for h in by_label.values() for b in h.values()),
        compressed=bool(tool),
    )


def pack_built(
    manifest: Manifest,
    images: dict[str, tuple[Arch, bytes]],
    settings: ImagePacks,
    *,
    nvcc_version: str,
    cache: Path,
    jobs: int = 1,
    manifest_text: str | None = None,
) -> PackedLibrary:
    """:func:`pack_library` where a library is linked (a one-machine build, or ``link`` of a sharded one).

    ``nvcc_version`` is the build's (``"13.0.88 ..."``): it picks the compression mode the
    drivers of that CUDA load. Both callers go through here, so both make the same packs.
    """
    major, minor = (int(x) for x in ([*nvcc_version.split()[0].split("."), "0"])[:2])
    return pack_library(manifest, images, settings, cuda_version=(major, minor), cache=cache, jobs=jobs, manifest_text=manifest_text)


def packs_line(packed: PackedLibrary) -> str:
    """The summary line of a build with image packs: how many images, stored how, in how many bytes."""
    how = "compressed" if packed.compressed else "uncompressed (no fatbinary beside the compiler)"
    return (
        f"image packs: {len(packed.packs)} ({', '.join(sorted(packed.packs))}); {packed.images} images, "
        f"{packed.stored} stored once each, {how}: {packed.raw_bytes / 1024:.0f} KiB -> {packed.stored_bytes / 1024:.0f} KiB"
    )


def _ref(digest: bytes, size: int, build_id: bytes, label: str, file: str, hint: str) -> bytes:
    """The reference embedded in place of an image (the layout ``src/packs.cc`` reads)."""
    text = [label, file, hint.replace("{tag}", wheel_tag(label))]
    return _REF_MAGIC + struct.pack("<I", size) + digest + build_id + b"".join(t.encode() + b"\0" for t in text)


def _pack(label: str, build_id: bytes, held: dict[bytes, bytes]) -> bytes:
    """One arch's pack: the header, the index sorted by digest, then each distinct image once."""
    order = sorted(held)
    offset = _HEAD.size + _ROW.size * len(order)
    rows, body = [], []
    for d in order:
        rows.append(_ROW.pack(d, offset, len(held[d])))
        body.append(held[d])
        offset += len(held[d])
    head = _HEAD.pack(_PACK_MAGIC, _PACK_VERSION, len(order), build_id, label.encode())
    return head + b"".join(rows) + b"".join(body)


@dataclass(frozen=True)
class PackContents:
    """A pack file read back: its build id, arch label and images by SHA-256 (hex)."""

    build_id: str
    label: str
    images: dict[str, bytes]  # SHA-256 (hex) -> image


def read_pack(data: bytes) -> PackContents:
    """Parse a pack (tools and tests; the runtime reads only the index and the images it needs)."""
    magic, version, count, build_id, label = _HEAD.unpack_from(data)
    if magic != _PACK_MAGIC or version != _PACK_VERSION:
        msg = "not a tl_aot image pack (or one of another format version)"
        raise ValueError(msg)
    images = {}
    for i in range(count):
        d, off, size = _ROW.unpack_from(data, _HEAD.size + i * _ROW.size)
        images[d.hex()] = data[off : off + size]
    return PackContents(build_id.hex(), label.rstrip(b"\0").decode(), images)


@dataclass(frozen=True)
class PackRef:
    """A reference read back: what it points at and what it tells a user."""

    digest: str
    size: int
    build_id: str
    label: str
    file: str
    hint: str


def read_ref(data: bytes) -> PackRef:
    """Parse a reference (the bytes embedded in place of an image)."""
    if not data.startswith(_REF_MAGIC):
        msg = "not a tl_aot image reference"
        raise ValueError(msg)
    (size,) = struct.unpack_from("<I", data, 8)
    label, file, hint = data[76:].split(b"\0")[:3]
    return PackRef(data[12:44].hex(), size, data[44:76].hex(), label.decode(), file.decode(), hint.decode())
