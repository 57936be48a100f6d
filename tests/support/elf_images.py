"""Synthetic device images for tests: ELF files and fatbins shaped like nvcc's, built without the CUDA toolkit."""

from __future__ import annotations

import struct

__all__ = ["elf", "fatbin", "cubin"]


def elf(sections: dict, *, elf_type: int = 2) -> bytes:
    """A 64-bit little-endian ELF file holding ``sections`` (name -> bytes), like a cubin's layout (type 2: executable)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in [".shstrtab", *sections])
    body, offsets = b"", []
    for data in [names, *sections.values()]:
        offsets.append(64 + len(body))
        body += data
    shoff = 64 + len(body)
    header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header += struct.pack("<HHIQQQIHHHHHH", elf_type, 190, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(sections) + 2, 1)
    table = bytes(64)  # the null section
    at = 1
    for i, (name, data) in enumerate([(".shstrtab", names), *sections.items()]):
        table += struct.pack("<IIQQQQIIQQ", at, 3 if i == 0 else 1, 0, 0, offsets[i], len(data), 0, 0, 1, 0)
        at += len(name) + 1
    return header + body + table


def cubin(*kernels: str, payload: bytes = b"\0" * 64) -> bytes:
    """A cubin defining ``kernels`` (a ``.text.<name>`` section each)."""
    return elf({f".text.{k}": payload for k in kernels})


def fatbin(*payloads: tuple) -> bytes:
    """A fatbin of ``(kind, bytes)`` entries (2: ELF, 1: PTX)."""
    from tl_aot.cuda.image_check import FATBIN_MAGIC

    entries = b"".join(struct.pack("<HHIQ", kind, 0x101, 16, len(data)) + data for kind, data in payloads)
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(entries)) + entries
