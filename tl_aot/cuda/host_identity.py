"""Which host compilers a build's bytes depend on, named by name and version, never by path.

Two host compilers reach a library: the one that compiles the launcher and the runtime
(:func:`~tl_aot.cuda.toolchain.find_cxx`: ``$CXX``, else ``c++``), and the one nvcc preprocesses the
kernels' CUDA with (``NVCC_CCBIN``, else ``gcc`` on ``PATH``; nvcc also hands its version to cicc as
``--gnu_version``, so it can change an image). Machines that build parts of one library (cluster
workers, shards, the machine that links them) must agree on them; these identities are what they
compare: ``gcc (Debian 12.2.0-14+deb12u1) 12.2.0`` whether the compiler was called ``c++``,
``g++`` or ``/usr/bin/gcc``.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
from pathlib import Path

from ..common.errors import TlAotError
from .toolchain import find_cxx, find_nvcc, version_text

__all__ = ["compiler_identity", "host_compiler", "nvcc_host_compiler"]


@functools.cache
def compiler_identity(cxx: str) -> str:
    """The compiler's name and version: ``gcc (Debian 12.2.0-14+deb12u1) 12.2.0``, ``Ubuntu clang version 18.1.3``.

    The first line of ``--version``, without the name it was called by (GCC echoes it: ``c++ (...)``,
    ``g++ (...)``): the same compiler called by another name or path is the same identity. "" if it cannot run.
    """
    out = version_text(cxx)
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    if not lines:
        return ""
    words = lines[0].split()
    if words[0] == Path(cxx).name and len(words) > 1:  # GCC-style: the first word is whatever name called it
        family = "gcc" if "Free Software Foundation" in out else "compiler"
        return " ".join([family, *words[1:]])
    return lines[0]


def host_compiler() -> str:
    """The identity of the compiler of the launcher and the runtime (``$CXX``, else ``c++``); "" where there is none."""
    try:
        return compiler_identity(find_cxx())
    except TlAotError:
        return ""


def nvcc_host_compiler() -> str:
    """The identity of the host compiler nvcc preprocesses CUDA with (``NVCC_CCBIN``, else ``gcc``); "" without nvcc.

    The CUDA 12 compiler from PyPI (NVRTC + ptxas) runs no host compiler: "".
    """
    try:
        nvcc = find_nvcc()
    except TlAotError:
        return ""
    if not Path(nvcc).name.startswith("nvcc"):  # ptxas: the NVRTC compiler
        return ""
    words = shlex.split(os.environ.get("NVCC_CCBIN", "").strip()) or ["gcc"]
    ccbin = words[0]
    if Path(ccbin).is_dir():  # NVCC_CCBIN may name the compiler's folder, as -ccbin may
        ccbin = str(Path(ccbin) / "gcc")
    path = ccbin if os.sep in ccbin else shutil.which(ccbin)
    return compiler_identity(path) if path else ""
