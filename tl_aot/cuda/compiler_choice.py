"""Which CUDA compiler a library builds with: the one found that builds every arch it asks for.

:func:`check_toolchain` runs once per build, in the plan, before any variant is keyed: the compiler's
version keys the cache, and TileLang is pointed at the same toolkit before it is imported.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from ..common.arch import Arch
from ..common.errors import SpecError, ToolchainNotFound
from ..config.user_code import display_path
from ..gpu.cuda_compat import COMPUTE_CAPABILITIES, min_cuda_for_arch
from .cuda_toolkit import find_toolkit, pin_toolkit, pip_toolkits
from .toolchain import compiler_description, nvcc_version, point_tilelang_at_toolkit, supported_archs_of

if TYPE_CHECKING:
    from ..config.kernel_spec import LibrarySpec

__all__ = ["check_toolchain"]


def check_toolchain(lib: LibrarySpec) -> str:
    """Find the CUDA compiler, check it builds every arch asked for, point TileLang at it; returns its version.

    The compiler is found by :func:`tl_aot.cuda.cuda_toolkit.find_toolkit`'s one search order. When it is
    a pip-installed one and both CUDA 12 and 13 are installed (and ``TL_AOT_CUDA`` does not choose),
    the oldest that builds every arch is used: its libraries load on the most drivers. Errors name
    the entry, the arch, the compiler and the CUDA release the arch needs. The version returned
    (``13.0.88``, or ``12.9.86 (NVRTC)`` for the CUDA 12 pip compiler) keys the cache.
    """
    pin_toolkit(None)
    try:
        tk = find_toolkit()
    except ToolchainNotFound as e:
        msg = f"{_what(lib)}: {e}"
        raise ToolchainNotFound(msg) from None
    wanted = {arch.number for spec in lib.entries for arch in spec.archs}
    ptx = any(arch.ptx for spec in lib.entries for arch in spec.archs)
    if tk.origin == "pip" and not os.environ.get("TL_AOT_CUDA", "").strip():
        fits = (t for t in pip_toolkits() if wanted <= supported_archs_of(t) and not (ptx and t.kind == "nvrtc"))
        tk = next(fits, tk)
    pin_toolkit(tk)  # this build's compiler, whatever CUDA_HOME says next (point_tilelang_at_toolkit sets it)
    point_tilelang_at_toolkit()
    version = nvcc_version()
    known = supported_archs_of(tk)
    for spec in lib.entries:
        for arch in spec.archs:
            if known and arch.number not in known:
                msg = (
                    f"entry {spec.name!r} ({arch}) in {display_path(spec.source)}: {compiler_description()} cannot build "
                    f"{arch.sm}; it targets sm_{', sm_'.join(str(n) for n in sorted(known))}. {_why_not(arch, version, tk.origin)}"
                )
                raise SpecError(msg)
            if arch.ptx and tk.kind == "nvrtc":
                msg = (
                    f"entry {spec.name!r} ({arch}) in {display_path(spec.source)}: {compiler_description()} cannot pack "
                    "a PTX fallback with the image (NVIDIA publishes no fatbinary for CUDA 12 on PyPI); build "
                    f"--arch {arch.sm.removeprefix('sm_')} without +PTX, or with tl_aot[build-cu13] or a CUDA toolkit"
                )
                raise SpecError(msg)
    return version if tk.kind == "nvcc" else f"{version} (NVRTC)"


def _why_not(arch: Arch, version: str, origin: str) -> str:
    """Why a compiler lacks ``arch``: too old (naming the CUDA that has it), or no CUDA release targets it (a typo)."""
    need = min_cuda_for_arch(arch.number)
    have = tuple(int(x) for x in re.findall(r"\d+", version)[:2])
    if arch.number not in COMPUTE_CAPABILITIES:
        return f"{arch.sm} is no compute capability NVIDIA has released: check the spelling (e.g. sm_90a, 100a)"
    if len(have) == 2 and have >= need:
        return f"CUDA {have[0]}.{have[1]} no longer targets {arch.sm}: build it with an older CUDA (e.g. tl_aot[build-cu12])"
    hint = " (pip install 'tl_aot[build-cu13]')" if origin == "pip" and need >= (13, 0) else ""
    return f"{arch.sm} needs CUDA {'.'.join(map(str, need))} or newer{hint}"


def _what(lib: LibrarySpec) -> str:
    """``library 'x' (entries a, b for sm_80, sm_90a)``: the subject of errors raised before any entry runs."""
    archs = sorted({str(a) for e in lib.entries for a in e.archs})
    names = ", ".join(e.name for e in lib.entries)
    return f"library {lib.name!r} (entr{'y' if len(lib.entries) == 1 else 'ies'} {names} for {', '.join(archs)})"
