"""Check a device image or an object file is what it claims to be, before a build keeps it.

A tool that runs out of disk may still exit 0 with its output cut short (ptxas wrote an 8 KiB
cubin of a 52 KiB GEMM on a nearly full disk): every cubin, fatbin and object a build makes is
checked here before it enters the variant cache, a work folder or a library, and every cached
image again when it is read back. A cubin is a complete 64-bit ELF (header, section table, every
section inside the file) defining each kernel the launcher will look up; a fatbin has its header
and every entry's size adding up to the file, and each ELF entry passes the cubin check.
"""

from __future__ import annotations

import struct

from ..common.metadata import DeviceKernel
from ..runtime.elf import elf_problem, section_names

__all__ = ["image_problem", "object_problem", "variant_image_problem", "FATBIN_MAGIC"]

#: The first four bytes of a fatbin (``fatBinaryHeader.magic``), little-endian.
FATBIN_MAGIC = 0xBA55ED50
_FATBIN_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries that follow
_ENTRY_HEADER = struct.Struct("<HHIQ")  # kind (1 PTX, 2 ELF), version, header size, payload size
_ET_EXEC, _ET_REL = 2, 1


def image_problem(data: bytes, *, fatbin: bool, kernels=(), any_elf_type: bool = False) -> str | None:
    """What is wrong with ``data`` as a cubin (or with ``fatbin`` a fatbin) defining ``kernels``; None if nothing.

    A kernel counts as defined when a function of the image contains its name (the launcher's
    ``find_kernel_by_pattern`` matches the same way). A compressed fatbin entry is checked for its
    size only. nvcc's cubins are ELF executables; ``any_elf_type`` accepts another compiler's
    cubin of any ELF type (its bounds are still checked).
    """
    if fatbin:
        return _fatbin_problem(data, tuple(kernels))
    problem = elf_problem(data, elf_type=None if any_elf_type else _ET_EXEC)
    if problem:
        return f"not a complete cubin: {problem}"
    return _missing_kernels(data, kernels)


def object_problem(data: bytes) -> str | None:
    """What is wrong with ``data`` as a complete relocatable object (a compiled ``.o``), or None."""
    problem = elf_problem(data, elf_type=_ET_REL)
    return f"not a complete object file: {problem}" if problem else None


def _missing_kernels(elf: bytes, kernels) -> str | None:
    functions = [n[len(".text.") :] for n in section_names(elf) if n.startswith(".text.")]
    missing = [k for k in kernels if not any(k in f for f in functions)]
    if missing:
        return f"it defines no kernel {', '.join(missing)} (it has {', '.join(functions) or 'none'})"
    return None


def _fatbin_problem(data: bytes, kernels: tuple[DeviceKernel, ...]) -> str | None:
    if len(data) < _FATBIN_HEADER.size:
        return f"not a complete fatbin: {len(data)} bytes, shorter than its header"
    magic, _version, header_size, size = _FATBIN_HEADER.unpack_from(data)
    if magic != FATBIN_MAGIC or header_size < _FATBIN_HEADER.size:
        return "not a fatbin (no fatbin header)"
    end = header_size + size
    if end > len(data):
        return f"not a complete fatbin: its header promises {end} bytes, the file has {len(data)}"
    at, found = header_size, False
    while at < end:
        if at + _ENTRY_HEADER.size > end:
            return f"not a complete fatbin: an entry header at byte {at} runs past its end ({end})"
        kind, _v, entry_header, payload = _ENTRY_HEADER.unpack_from(data, at)
        if entry_header < _ENTRY_HEADER.size or at + entry_header + payload > end:
            return f"not a complete fatbin: the entry at byte {at} runs past its end ({end})"
        body = data[at + entry_header : at + entry_header + payload]
        if kind == 2 and body[:4] == b"\x7fELF":
            problem = image_problem(body, fatbin=False, kernels=kernels)
            if problem:
                return f"its cubin at byte {at}: {problem}"
        found = True
        at += entry_header + payload
    if not found:
        return "not a complete fatbin: it holds no image"
    return None


def variant_image_problem(variant, image: bytes) -> str | None:
    """:func:`image_problem` of a lowered variant's image: a fatbin for ``+PTX``, its kernels named (CUDA backend).

    CuTeDSL images name their kernels by pattern (checked once when compiled, by
    :func:`tl_aot.lower.cutedsl.match_kernels`); here they are checked as ELF files only.
    """
    if variant.backend == "cutedsl":
        return image_problem(image, fatbin=False, any_elf_type=True)
    return image_problem(image, fatbin=variant.arch.ptx, kernels=tuple(k.name for k in variant.kernels))
