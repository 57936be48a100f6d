"""A cubin (a 64-bit ELF) read without the CUDA toolkit: the kernels it defines and the sizes of their parameters.

The CuTeDSL backend's images come from another compiler than the launcher's: a build checks each
kernel's name and parameter layout here before a library ever launches it.
"""

from __future__ import annotations

import struct

__all__ = ["sections", "kernel_names", "param_sizes"]

_EIFMT_SVAL = 4  # a record with a 16-bit size and a payload
_EIFMT_HVAL = 3  # a record with a 16-bit value
_EIATTR_KPARAM_INFO = 0x17  # index u32, ordinal u16, offset u16, flags u32 (size in bits 18-31)


def sections(image: bytes) -> dict[str, bytes]:
    """Section name -> its bytes."""
    if image[:4] != b"\x7fELF" or len(image) < 64 or image[4] != 2:
        msg = "not a 64-bit ELF cubin"
        raise ValueError(msg)
    shoff = struct.unpack_from("<Q", image, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx][4]
    out = {}
    for h in headers:
        start = strtab + h[0]
        out[image[start : image.index(b"\0", start)].decode()] = image[h[4] : h[4] + h[5]]
    return out


def kernel_names(image: bytes) -> list[str]:
    """The kernels the cubin defines (its ``.text.<name>`` sections), in section order."""
    return [n[len(".text.") :] for n in sections(image) if n.startswith(".text.")]


def param_sizes(image: bytes, kernel: str) -> list[int] | None:
    """The byte size of each parameter of ``kernel``, by position (None: the cubin does not say)."""
    info = sections(image).get(f".nv.info.{kernel}")
    if info is None:
        return None
    sizes, pos = {}, 0
    while pos + 2 <= len(info):
        fmt, attr = info[pos], info[pos + 1]
        if fmt == _EIFMT_SVAL:
            (n,) = struct.unpack_from("<H", info, pos + 2)
            payload, pos = info[pos + 4 : pos + 4 + n], pos + 4 + n
        else:
            payload, pos = b"", pos + (4 if fmt == _EIFMT_HVAL else 2)
        if attr == _EIATTR_KPARAM_INFO and len(payload) == 12:
            _, ordinal, _, flags = struct.unpack("<IHHI", payload)
            sizes[ordinal] = (flags >> 18) & 0x3FFF
    return [sizes[i] for i in range(len(sizes))] if sorted(sizes) == list(range(len(sizes))) else None
