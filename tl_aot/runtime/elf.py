"""Check a file is a complete tl_aot shared library before the dynamic loader maps it.

``dlopen`` of a truncated file dies with SIGBUS when a mapped page lies past its end, and a copy of
``libtvm_ffi.so`` registers tvm-ffi's types a second time and aborts: both are refused here, from
the ELF headers alone (size of every segment and section, the ``SONAME``, the exported manifest).
The same reading hands out the manifest's own sections (:func:`library_sections`), so ``inspect``
reads a library's manifest without loading it.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import LibraryError

__all__ = [
    "ElfInfo",
    "check_library_file",
    "library_sections",
    "elf_problem",
    "section_names",
    "MANIFEST_SECTION",
    "MANIFEST_TEXT_SECTION",
    "MANIFEST_INDEX_SECTION",
    "MANIFEST_SYMBOL",
]

#: The section holding the SHA-256 of the manifest's index (which holds the manifest's), written at build time (``manifest.cc.j2``).
MANIFEST_SECTION = ".tl_aot_manifest_sha256"
#: The sections holding the manifest's text and its index's, as ``tl_aot_manifest`` / ``tl_aot_manifest_index`` return them
#: (absent from a library built before tl_aot gave them sections of their own).
MANIFEST_TEXT_SECTION = ".tl_aot_manifest"
MANIFEST_INDEX_SECTION = ".tl_aot_manifest_index"
#: The exported function every tl_aot library has (tvm-ffi prefixes exports with ``__tvm_ffi_``).
MANIFEST_SYMBOL = b"__tvm_ffi_tl_aot_manifest"
_SHT_NOBITS, _SHT_DYNAMIC, _PT_LOAD, _DT_SONAME, _DT_STRTAB = 8, 6, 1, 14, 5
_ELF_TYPES = {1: "a relocatable object", 2: "an executable", 3: "a shared object"}


@dataclass(frozen=True)
class ElfInfo:
    """What the loader needs from a library's headers."""

    soname: str  # "" when it has none
    manifest_sha256: str  # "" for a library built before the digest section existed
    exports_manifest: bool


def check_library_file(path: Path) -> ElfInfo:
    """Read ``path``'s ELF headers; raise :class:`LibraryError` unless it is a complete 64-bit shared object of tl_aot.

    The file is mapped, not read: only the pages of its headers, section names, dynamic strings
    and the digest section are touched, never its images (hundreds of MB in a large library).
    """
    return library_sections(path, ())[0]


def library_sections(path: Path, names: tuple[str, ...]) -> tuple[ElfInfo, dict[str, bytes]]:
    """:func:`check_library_file` of ``path``, and the contents of its sections named in ``names``, up to their first NUL.

    A C string's section (``manifest.cc.j2`` puts each manifest text in one) holds the string and its
    terminating NUL; a section of ``names`` the file lacks, or one holding no bytes in the file
    (``SHT_NOBITS``), is left out of the answer. The bytes are not trusted: callers check them
    against the digests they carry (:mod:`tl_aot.runtime.manifest_check`).
    """
    try:
        with open(path, "rb") as f, _mapped(f) as data:
            info, sections = _check_mapped(path, data)
            wanted = {}
            for name, kind, off, size, _link in sections if names else ():
                if name in names and kind != _SHT_NOBITS and name not in wanted:
                    raw = data[off : off + size]
                    end = raw.find(b"\0")
                    wanted[name] = raw if end < 0 else raw[:end]
            return info, wanted
    except OSError as e:
        msg = f"cannot read {path}: {e.strerror}"
        raise LibraryError(msg) from None


@contextlib.contextmanager
def _mapped(f):
    """The open file ``f`` mapped read-only (an empty file as empty bytes: it cannot be mapped)."""
    if os.fstat(f.fileno()).st_size == 0:
        yield b""
        return
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        yield m
    finally:
        m.close()


def _check_mapped(path: Path, data) -> tuple[ElfInfo, list[tuple[str, int, int, int, int]]]:
    problem = elf_problem(data, elf_type=3, segments=True)
    if problem:
        _fail(path, problem)
    sections = _sections(data)
    info = ElfInfo(_soname(data, sections), _manifest_digest(data, sections), MANIFEST_SYMBOL in _dynstr(data, sections))
    if info.soname.startswith("libtvm_ffi"):
        msg = f"{path} is tvm-ffi's own library (SONAME {info.soname}), not a tl_aot library; load a lib<name>.so built by tl_aot"
        raise LibraryError(msg)
    if not info.exports_manifest:
        msg = f"{path} is not a tl_aot library (it exports no tl_aot_manifest); load a lib<name>.so built by python -m tl_aot build"
        raise LibraryError(msg)
    return info, sections


def _fail(path, problem: str):
    msg = f"{path} is not a complete shared library ({problem}); rebuild it or copy it again"
    raise LibraryError(msg)


class _Bad(Exception):
    """An ELF structure problem, in words (caught here and reported by the callers)."""


def elf_problem(data: bytes, *, elf_type: int | None = None, segments: bool = False) -> str | None:
    """What is wrong with ``data`` as a complete 64-bit little-endian ELF file, or None if nothing is.

    Checked from the headers alone: the ELF header, its type (``elf_type``: 1 an object, 2 an
    executable such as a cubin, 3 a shared library), the section table and every section lying
    within the file, and with ``segments`` every loadable segment too. A file cut short by a full
    disk fails here, whatever wrote it.
    """
    try:
        _check_header(data, elf_type)
        _sections(data)
        if segments:
            _check_segments(data)
    except _Bad as e:
        return str(e)
    except struct.error:
        return f"its headers lie past the end of the file ({len(data)} bytes)"
    return None


def section_names(data: bytes) -> list[str]:
    """The names of the sections of an ELF file that :func:`elf_problem` accepted."""
    return [name for name, *_ in _sections(data)]


def _check_header(data: bytes, elf_type: int | None = 3) -> None:
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise _Bad(f"no ELF header, {len(data)} bytes")
    if data[4] != 2 or data[5] != 1:
        raise _Bad("not a 64-bit little-endian ELF file")
    kind = struct.unpack_from("<H", data, 16)[0]
    if elf_type is not None and kind != elf_type:
        raise _Bad(f"an ELF file that is not {_ELF_TYPES.get(elf_type, f'of type {elf_type}')}")


def _sections(data: bytes) -> list[tuple[str, int, int, int, int]]:
    """(name, type, offset, size, link) of every section, each checked to lie within the file."""
    (shoff,) = struct.unpack_from("<Q", data, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 58)
    if shnum == 0 or shentsize < 64 or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        raise _Bad(f"its section table lies past the end of the file ({len(data)} bytes)")
    raw = []
    for i in range(shnum):
        name, kind, _flags, _addr, offset, size, link = struct.unpack_from("<IIQQQQI", data, shoff + i * shentsize)
        if kind != _SHT_NOBITS and offset + size > len(data):
            raise _Bad(f"section #{i} ends at byte {offset + size}, past the end of the file ({len(data)} bytes)")
        raw.append((name, kind, offset, size, link))
    names_at, names_size = raw[shstrndx][2], raw[shstrndx][3]
    if any(n >= names_size for n, *_ in raw[1:]):
        raise _Bad("a section name lies outside the section-name table")
    return [(_cstr(data, names_at + n), kind, off, size, link) for n, kind, off, size, link in raw]


def _check_segments(data: bytes) -> None:
    (phoff,) = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    if phnum == 0 or phoff + phnum * phentsize > len(data):
        raise _Bad("its program headers lie past the end of the file")
    for i in range(phnum):
        kind, _flags, offset, _vaddr, _paddr, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if kind == _PT_LOAD and offset + filesz > len(data):
            raise _Bad(f"a loadable segment ends at byte {offset + filesz}, past the end of the file ({len(data)} bytes)")


def _cstr(data: bytes, at: int) -> str:
    end = data.find(b"\0", at)
    return data[at : end if end >= 0 else len(data)].decode("latin-1")


def _dynstr(data: bytes, sections) -> bytes:
    for name, _kind, off, size, _link in sections:
        if name == ".dynstr":
            return data[off : off + size]
    return b""


def _soname(data: bytes, sections) -> str:
    """The ``DT_SONAME`` of the dynamic section, or ""."""
    for _name, kind, off, size, link in sections:
        if kind != _SHT_DYNAMIC or link >= len(sections):
            continue
        strtab = sections[link][2]
        for at in range(off, off + size - 15, 16):
            tag, value = struct.unpack_from("<qQ", data, at)
            if tag == _DT_SONAME:
                return _cstr(data, strtab + value)
            if tag == 0:
                break
    return ""


def _manifest_digest(data: bytes, sections) -> str:
    for name, _kind, off, size, _link in sections:
        if name == MANIFEST_SECTION:
            return data[off : off + size].rstrip(b"\0").decode("ascii", "replace")
    return ""
