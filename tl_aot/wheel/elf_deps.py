"""Read what a shared library needs from the system: its DT_NEEDED libraries and versioned symbols.

A wheel's platform tag is only true if every library in it loads on that platform; the ELF's
version-needs section says which glibc / libstdc++ versions it asks for, and ``.dynsym`` with
``.gnu.version`` says which symbol asks for each (so a refusal can name it). A small reader of
its own (ELF32/64, either byte order) keeps tl_aot free of a binary-parsing dependency.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["ElfDeps", "ElfError", "VersionNeed", "is_elf", "read_elf_deps", "parse_elf_deps"]

_MACHINES = {3: "i686", 62: "x86_64", 183: "aarch64", 40: "armv7l", 21: "ppc64le", 22: "s390x", 243: "riscv64"}
_SHT_DYNSYM, _SHT_DYNAMIC, _SHT_VERNEED, _SHT_VERSYM = 11, 6, 0x6FFFFFFE, 0x6FFFFFFF
_DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH = 1, 14, 15, 29


class ElfError(ValueError):
    """The bytes are not an ELF shared object this reader understands."""


class Section(NamedTuple):
    """One entry of an ELF file's section table, as far as the dependency reader needs it."""

    type: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True)
class VersionNeed:
    """One symbol version a library needs (``GLIBC_2.14`` from ``libc.so.6``) and the symbols that ask for it."""

    library: str
    version: str
    symbols: tuple[str, ...] = ()

    @property
    def namespace(self) -> str:
        """``GLIBC`` of ``GLIBC_2.14``, ``CXXABI`` of ``CXXABI_1.3.9``."""
        return self.version.split("_", 1)[0]


@dataclass(frozen=True)
class ElfDeps:
    """What loading one shared library takes: its machine, DT_NEEDED entries, SONAME, RUNPATH and symbol versions."""

    machine: str
    needed: tuple[str, ...] = ()
    soname: str | None = None
    runpath: str | None = None
    versions: tuple[VersionNeed, ...] = ()


def is_elf(data: bytes) -> bool:
    """Whether ``data`` starts like an ELF file."""
    return data[:4] == b"\x7fELF"


def read_elf_deps(path: str | Path) -> ElfDeps:
    """:func:`parse_elf_deps` of the file at ``path``."""
    return parse_elf_deps(Path(path).read_bytes())


class _Reader:
    """Fixed-layout reads in the file's class (32/64-bit) and byte order."""

    def __init__(self, data: bytes):
        if not is_elf(data) or len(data) < 64 or data[4] not in (1, 2) or data[5] not in (1, 2):
            msg = "not an ELF file (or an unknown ELF class / byte order)"
            raise ElfError(msg)
        self.data, self.wide, self.order = data, data[4] == 2, "<" if data[5] == 1 else ">"

    def unpack(self, fmt: str, offset: int) -> tuple[int, ...]:
        try:
            return struct.unpack_from(self.order + fmt, self.data, offset)
        except (struct.error, OverflowError) as e:
            msg = f"truncated ELF file ({e})"
            raise ElfError(msg) from None

    def cstr(self, offset: int) -> str:
        end = self.data.find(b"\0", offset)
        return self.data[offset : end if end >= 0 else len(self.data)].decode("utf-8", "replace")

    def sections(self) -> list[Section]:
        """(type, offset, size, link, info, entsize) of every section."""
        if self.wide:
            shoff, shentsize, shnum = self.unpack("Q", 0x28)[0], *self.unpack("HH", 0x3A)
            fmt = "IIQQQQIIQQ"
        else:
            shoff, shentsize, shnum = self.unpack("I", 0x20)[0], *self.unpack("HH", 0x2E)
            fmt = "IIIIIIIIII"
        out = []
        for i in range(shnum):
            _, typ, _, _, off, size, link, info, _, ent = self.unpack(fmt, shoff + i * shentsize)
            out.append(Section(typ, off, size, link, info, ent))
        return out


def _dynamic(r: _Reader, sections: list[Section], dyn: Section) -> dict[str, Any]:
    """DT_NEEDED (a list), DT_SONAME and DT_RUNPATH/DT_RPATH from the dynamic section."""
    _, off, size, link, _, _ = dyn
    strtab = sections[link][1]
    fmt, step = ("qQ", 16) if r.wide else ("iI", 8)
    out: dict[str, Any] = {"needed": []}  # needed: list[str]; soname, runpath: str
    for pos in range(off, off + size, step):
        tag, val = r.unpack(fmt, pos)
        if tag == 0:
            break
        if tag == _DT_NEEDED:
            out["needed"].append(r.cstr(strtab + val))
        elif tag == _DT_SONAME:
            out["soname"] = r.cstr(strtab + val)
        elif tag in (_DT_RUNPATH, _DT_RPATH):
            out.setdefault("runpath", r.cstr(strtab + val))
    return out


def _version_needs(r: _Reader, sections: list[Section], verneed: Section) -> dict[int, tuple[str, str]]:
    """Version index -> (library, version name), from ``.gnu.version_r``."""
    _, off, _, link, count, _ = verneed
    strtab = sections[link][1]
    out: dict[int, tuple[str, str]] = {}
    pos = off
    for _ in range(count):
        _, cnt, file_off, aux, nxt = r.unpack("HHIII", pos)
        library = r.cstr(strtab + file_off)
        apos = pos + aux
        for _ in range(cnt):
            _, _, other, name, anext = r.unpack("IHHII", apos)
            out[other & 0x7FFF] = (library, r.cstr(strtab + name))
            apos += anext
        pos += nxt
        if not nxt:
            break
    return out


def _symbols_by_version(r: _Reader, sections: list[Section]) -> dict[int, list[str]]:
    """Version index -> names of the undefined dynamic symbols bound to it."""
    dynsym = next((s for s in sections if s[0] == _SHT_DYNSYM), None)
    versym = next((s for s in sections if s[0] == _SHT_VERSYM), None)
    if dynsym is None or versym is None:
        return {}
    _, off, size, link, _, ent = dynsym
    strtab = sections[link][1]
    fmt = "IBBHQQ" if r.wide else "IIIBBH"
    out: dict[int, list[str]] = {}
    for i in range(size // ent if ent else 0):
        fields = r.unpack(fmt, off + i * ent)
        name, shndx = fields[0], fields[3] if r.wide else fields[5]
        index = r.unpack("H", versym[1] + 2 * i)[0] & 0x7FFF
        if shndx == 0 and index > 1 and name:
            out.setdefault(index, []).append(r.cstr(strtab + name))
    return out


def parse_elf_deps(data: bytes) -> ElfDeps:
    """The :class:`ElfDeps` of an ELF file's bytes; raises :class:`ElfError` for anything else."""
    r = _Reader(data)
    machine_id = r.unpack("H", 18)[0]
    sections = r.sections()
    dyn = next((s for s in sections if s[0] == _SHT_DYNAMIC), None)
    dynamic = _dynamic(r, sections, dyn) if dyn else {"needed": []}
    verneed = next((s for s in sections if s[0] == _SHT_VERNEED), None)
    needs = _version_needs(r, sections, verneed) if verneed else {}
    symbols = _symbols_by_version(r, sections)
    versions = tuple(
        VersionNeed(library=lib, version=ver, symbols=tuple(sorted(set(symbols.get(idx, ())))))
        for idx, (lib, ver) in sorted(needs.items(), key=lambda kv: (kv[1][0], kv[1][1]))
    )
    return ElfDeps(
        machine=_MACHINES.get(machine_id, f"EM_{machine_id}"),
        needed=tuple(dynamic["needed"]),
        soname=dynamic.get("soname"),
        runpath=dynamic.get("runpath"),
        versions=versions,
    )
