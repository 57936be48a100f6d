"""A library's manifest read from its file, without loading it: what ``python -m tl_aot inspect`` prints.

Loading goes through tvm-ffi, whose import imports torch (over a second of CPU), and maps the
whole library; the manifest and its index have ELF sections of their own (``manifest.cc.j2``), so
reading them from the file costs the headers and those pages alone. The texts are checked exactly
as a loaded library's are (:mod:`tl_aot.runtime.manifest_check`): the index against the digest
section, the manifest against the index.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..common.errors import LibraryError
from ..common.manifest_index import ManifestIndex
from .elf import MANIFEST_INDEX_SECTION, MANIFEST_TEXT_SECTION, library_sections
from .loader import _load_module, read_index, read_manifest
from .manifest_check import checked_index, checked_manifest

if TYPE_CHECKING:
    from ..common.metadata import Manifest

__all__ = ["index_of_file", "manifest_of_file", "manifest_texts"]


def manifest_texts(path: Path) -> tuple[str, str, str] | None:
    """(index, manifest, the index's digest) as ``path``'s sections hold them, or None for a library without those sections.

    The file is checked as loading checks it first (:func:`tl_aot.runtime.elf.check_library_file`):
    a truncated file, a copy of ``libtvm_ffi.so`` or a foreign library is refused here.
    """
    if not path.is_file():
        msg = f"no such library: {path}"
        raise LibraryError(msg)
    info, sections = library_sections(path, (MANIFEST_INDEX_SECTION, MANIFEST_TEXT_SECTION))
    index, text = sections.get(MANIFEST_INDEX_SECTION), sections.get(MANIFEST_TEXT_SECTION)
    if index is None or text is None:
        return None
    # Undecodable bytes become U+FFFD: the text then fails its digest, refused as altered.
    return index.decode("utf-8", "replace"), text.decode("utf-8", "replace"), info.manifest_sha256


def manifest_of_file(path: Path) -> Manifest:
    """The whole manifest of the library at ``path``, checked against its index and the index against its digest.

    Read from the file's sections, without dlopen, tvm-ffi or torch. A library built before tl_aot
    gave the manifest sections of its own has none: that one is loaded and asked
    (:func:`tl_aot.runtime.loader.read_manifest`), as ``inspect`` always did.
    """
    texts = manifest_texts(path)
    if texts is None:  # built before the sections existed: only the library's own exports hold its manifest
        return read_manifest(_load_module(path), path)
    index_text, manifest_text, digest = texts
    return checked_manifest(manifest_text, checked_index(index_text, digest, path), path)


def index_of_file(path: Path) -> ManifestIndex:
    """The manifest index of the library at ``path``, checked against its digest and this runtime's ABI, without loading it.

    What loading checks before it uses a library, for a milliseconds' check of one that will be
    loaded elsewhere (``run --serve`` checks its libraries before the command starts): the file's
    ELF checks and the index section alone, no dlopen, no tvm-ffi or torch import, no manifest parsed.
    A library built before the sections existed is loaded and asked instead.
    """
    if not path.is_file():
        msg = f"no such library: {path}"
        raise LibraryError(msg)
    info, sections = library_sections(path, (MANIFEST_INDEX_SECTION,))
    index = sections.get(MANIFEST_INDEX_SECTION)
    if index is None:
        return read_index(_load_module(path), path)
    return checked_index(index.decode("utf-8", "replace"), info.manifest_sha256, path)
