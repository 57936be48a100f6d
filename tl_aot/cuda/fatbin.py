"""A cubin wrapped in a compressed fatbin (``fatbinary --compress-all --compress-mode=size``), which the driver loads as is.

``cuModuleLoadData`` takes a fatbin and decompresses it itself, so a compressed image needs nothing
from the library at run time. ``--compress-mode=size`` (the smallest images) is used from CUDA 13,
whose every driver loads it; with CUDA 12 (where the mode came in 12.8 but needs a 12.4+ driver,
above the 12.0 floor a CUDA 12 library promises) images get fatbinary's default compression
(``--compress-all``), which every CUDA 12 driver loads. Neither raises the library's driver floor.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from ..common.arch import Arch
from ..common.errors import CompileError, FailedProcessError, ToolchainNotFound
from ..common.fileutil import atomic_write, write_file
from .cuda_toolkit import find_toolkit
from .toolchain import run

__all__ = ["FATBIN_MAGIC", "SIZE_MODE_FROM", "compressed_fatbin", "fatbinary_path"]

#: The first bytes of a fatbin (``0xBA55ED50``, little-endian).
FATBIN_MAGIC = b"\x50\xed\x55\xba"
#: The first toolkit whose ``--compress-mode=size`` images load on every driver of its major version.
SIZE_MODE_FROM = (13, 0)


def fatbinary_path() -> str:
    """The ``fatbinary`` beside the CUDA compiler in use ("" where the toolkit has none: the CUDA 12 pip wheels)."""
    try:
        tk = find_toolkit()
    except ToolchainNotFound:
        return ""
    if not tk.nvcc:
        return ""
    tool = Path(tk.nvcc).resolve().parent / "fatbinary"
    return str(tool) if tool.is_file() and os.access(tool, os.X_OK) else ""


def compressed_fatbin(cubin: bytes, arch: Arch, cuda_version: tuple[int, int], *, tool: str, cache: Path) -> bytes:
    """``cubin`` (an sm_XY image) as a compressed fatbin; cached in ``cache`` by the cubin's SHA-256 and the tool's mode.

    A cached result carries its own SHA-256, checked on read: a damaged file is made again.
    """
    mode = ["--compress-all", "--compress-mode=size"] if cuda_version >= SIZE_MODE_FROM else ["--compress-all"]
    key = hashlib.sha256(cubin + repr((mode, cuda_version, arch.sm)).encode()).hexdigest()
    cached = cache / f"{key}.fatbin"
    try:
        data = cached.read_bytes()
        if len(data) > 32 and hashlib.sha256(data[32:]).digest() == data[:32]:
            return data[32:]
    except OSError:
        pass
    with tempfile.TemporaryDirectory(prefix="tl_aot-fatbin-") as tmp:
        src, out = Path(tmp) / "image.cubin", Path(tmp) / "image.fatbin"
        write_file(src, cubin)
        sm = arch.sm.removeprefix("sm_")
        cmd = [tool, f"--create={out}", f"--image3=kind=elf,sm={sm},file={src}", *mode]
        try:
            run(cmd, what=f"compressing the {arch.sm} image")
        except FailedProcessError as e:
            msg = f"fatbinary could not compress an {arch.sm} image:\n{e}"
            raise CompileError(msg, arch=arch.sm) from e
        data = out.read_bytes()
    if not data.startswith(FATBIN_MAGIC):
        msg = f"fatbinary wrote no fatbin for an {arch.sm} image ({len(data)} bytes)"
        raise CompileError(msg, arch=arch.sm)
    cache.mkdir(parents=True, exist_ok=True)
    atomic_write(cached, hashlib.sha256(data).digest() + data)
    return data
