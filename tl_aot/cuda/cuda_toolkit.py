"""Which CUDA compiler builds the images: one search order, implemented here and nowhere else.

The order (first found wins):

1. ``TL_AOT_NVCC``: the path of an nvcc, chosen explicitly;
2. ``CUDA_HOME`` (or ``CUDA_PATH``) holding ``bin/nvcc``: a toolkit chosen explicitly;
3. ``nvcc`` on ``PATH``: the system toolkit;
4. the compiler pip installed with ``tl_aot[build]`` / ``tl_aot[build-cu13]`` / ``tl_aot[build-cu12]``,
   found in the interpreter's import path (site-packages):

   * CUDA 13 (``nvidia-cuda-nvcc`` + ``nvidia-nvvm`` + ``nvidia-cuda-crt`` + ``nvidia-cuda-runtime``
     + ``nvidia-cuda-cccl``): one folder ``nvidia/cu13`` laid out as a toolkit (``bin/nvcc``,
     ``nvvm/bin/cicc``, ``include/``, ``lib/``): a complete nvcc, driven like a system one.
   * CUDA 12 (``nvidia-cuda-nvrtc-cu12`` + ``nvidia-cuda-nvcc-cu12`` + ``nvidia-cuda-runtime-cu12``
     + ``nvidia-cuda-cccl-cu12``): NVIDIA publishes no CUDA 12 nvcc on PyPI (``nvidia-cuda-nvcc-cu12``
     carries ``ptxas`` and libNVVM only), so device code goes CUDA C++ → PTX with NVRTC
     (``nvidia/cuda_nvrtc``) and PTX → cubin with that ``ptxas`` (:mod:`tl_aot.cuda.nvrtc_compile`).

   With both installed, ``TL_AOT_CUDA=12`` or ``13`` picks one; else CUDA 12 (the older driver
   floor: :mod:`tl_aot.gpu.cuda_compat`), unless the build asks for an arch only CUDA 13 can build.

The chosen :class:`Toolkit` says where it came from (``origin``), which the build log and
``inspect`` show; :func:`tl_aot.cuda.toolchain.point_tilelang_at_toolkit` makes TileLang's lowering
(``CUDA_HOME``) use the same toolkit. Nothing here runs at import time.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import ToolchainNotFound
from ..common.versions import package_version

__all__ = [
    "Toolkit",
    "find_toolkit",
    "pip_toolkits",
    "pin_toolkit",
    "export_cuda_home",
    "INSTALL_HINT",
    "SEARCH_ORDER",
]

#: What to install when there is no compiler at all (the README says the same).
INSTALL_HINT = (
    "pip install 'tl_aot[build]' (the CUDA 13 compiler from PyPI; 'tl_aot[build-cu12]' for CUDA 12, "
    "whose libraries also load on 12.x drivers), or install a CUDA toolkit (12.4 or newer) and put its bin/ on PATH"
)
#: The search order, as the error and the docs spell it.
SEARCH_ORDER = "TL_AOT_NVCC, CUDA_HOME/CUDA_PATH, nvcc on PATH, the pip-installed compiler (tl_aot[build])"


@dataclass(frozen=True)
class Toolkit:
    """A CUDA compiler tl_aot can drive, and where it came from.

    ``kind`` is ``"nvcc"`` (a complete nvcc: system toolkit or the CUDA 13 wheels) or ``"nvrtc"``
    (the CUDA 12 wheels: NVRTC for CUDA C++ → PTX, ``ptxas`` for PTX → cubin).
    """

    kind: str
    origin: str  # "TL_AOT_NVCC", "CUDA_HOME", "PATH", "pip"
    home: str  # the toolkit root (CUDA_HOME, pip's nvidia/cu13); "": found from nvcc's own include folder
    nvcc: str = ""  # kind "nvcc"
    ptxas: str = ""  # kind "nvrtc"
    nvrtc: str = ""  # kind "nvrtc": libnvrtc.so.12
    include_dirs: tuple[str, ...] = ()  # kind "nvrtc": cuda.h / cuda_runtime.h, crt, cccl (nvcc finds its own)
    packages: tuple[tuple[str, str], ...] = ()  # pip: (distribution, version) of the wheels it came from

    @property
    def describe(self) -> str:
        """Where the compiler came from, for the build log and ``inspect``: ``pip (nvidia-cuda-nvcc 13.0.88)``."""
        if self.origin == "pip":
            return "pip (" + (", ".join(f"{n} {v}" for n, v in self.packages) or self.home or self.ptxas) + ")"
        return f"{self.origin} ({self.nvcc or self.ptxas})"


def _site_dirs() -> list[Path]:
    """The folders ``nvidia/`` packages can be in: the import path (site-packages, a build env's, a venv's)."""
    seen, out = set(), []
    for p in sys.path:
        if p and p not in seen:
            seen.add(p)
            out.append(Path(p))
    return out


def pip_toolkits() -> list[Toolkit]:
    """Every pip-installed compiler (CUDA 12 first, then 13), each checked complete."""
    found: dict[str, Toolkit] = {}
    for site in _site_dirs():
        cu13 = site / "nvidia" / "cu13"
        if "13" not in found and (cu13 / "bin" / "nvcc").is_file() and (cu13 / "nvvm" / "bin" / "cicc").is_file():
            pkgs = tuple((d, package_version(d)) for d in ("nvidia-cuda-nvcc", "nvidia-nvvm") if package_version(d))
            found["13"] = Toolkit("nvcc", "pip", str(cu13), nvcc=str(cu13 / "bin" / "nvcc"), packages=pkgs)
        nv = site / "nvidia"
        libnvrtc = nv / "cuda_nvrtc" / "lib" / "libnvrtc.so.12"
        ptxas = nv / "cuda_nvcc" / "bin" / "ptxas"
        if "12" not in found and libnvrtc.is_file() and ptxas.is_file():
            incs = (nv / "cuda_runtime" / "include", nv / "cuda_nvcc" / "include", nv / "cuda_cccl" / "include")
            if all((d).is_dir() for d in incs):
                pkgs = tuple((d, package_version(d)) for d in ("nvidia-cuda-nvrtc-cu12", "nvidia-cuda-nvcc-cu12") if package_version(d))
                found["12"] = Toolkit(
                    "nvrtc", "pip", "", ptxas=str(ptxas), nvrtc=str(libnvrtc), include_dirs=tuple(str(d) for d in incs), packages=pkgs
                )
    return [found[k] for k in ("12", "13") if k in found]


_pinned: Toolkit | None = None
#: Names the CUDA_HOME tl_aot set for TileLang (export_cuda_home), in this process and its children.
_EXPORTED = "_TL_AOT_EXPORTED_CUDA_HOME"


def export_cuda_home(home: str) -> None:
    """Set ``CUDA_HOME`` to ``home`` for TileLang (this process and its workers) unless the user set one.

    The search ignores a ``CUDA_HOME`` set here (marked in ``_TL_AOT_EXPORTED_CUDA_HOME``, which
    child processes inherit): it is not a user's choice, and a later build, in this process or a
    child, must find (and describe) the compiler as this one did.
    """
    if home and not os.environ.get("CUDA_HOME"):
        os.environ["CUDA_HOME"] = os.environ[_EXPORTED] = home


def pin_toolkit(tk: Toolkit | None) -> None:
    """Use ``tk`` for the rest of this process (a build chose it for its archs); None: search again."""
    global _pinned
    _pinned = tk
    _search.cache_clear()


@functools.lru_cache(maxsize=8)
def _search(tl_aot_nvcc: str, cuda_home: str, path: str, cuda_major: str) -> Toolkit:
    if tl_aot_nvcc:
        p = Path(tl_aot_nvcc)
        if not p.is_file():
            msg = f"TL_AOT_NVCC={tl_aot_nvcc!r} is not a file; point it at an nvcc, or unset it to search {SEARCH_ORDER}"
            raise ToolchainNotFound(msg)
        return Toolkit("nvcc", "TL_AOT_NVCC", "", nvcc=str(p))
    if cuda_home and (Path(cuda_home) / "bin" / "nvcc").is_file():
        return Toolkit("nvcc", "CUDA_HOME", cuda_home, nvcc=str(Path(cuda_home) / "bin" / "nvcc"))
    nvcc = shutil.which("nvcc", path=path)
    if nvcc:
        return Toolkit("nvcc", "PATH", "", nvcc=nvcc)
    pips = pip_toolkits()
    if cuda_major:
        pips = [t for t in pips if _major(t) == cuda_major]
        if not pips:
            msg = f"TL_AOT_CUDA={cuda_major}: no CUDA {cuda_major} compiler is installed: pip install 'tl_aot[build-cu{cuda_major}]'"
            raise ToolchainNotFound(msg)
    if pips:
        return pips[0]
    msg = f"no CUDA compiler was found (searched {SEARCH_ORDER}): {INSTALL_HINT}. It is needed at build time only."
    raise ToolchainNotFound(msg)


def _major(tk: Toolkit) -> str:
    return "12" if tk.kind == "nvrtc" else "13"


def find_toolkit() -> Toolkit:
    """The compiler that builds the images, by the search order above (asked once per environment).

    Reads ``TL_AOT_NVCC``, ``CUDA_HOME``, ``CUDA_PATH``, ``PATH`` and ``TL_AOT_CUDA``.
    """
    if _pinned is not None:
        return _pinned
    env = os.environ
    home = env.get("CUDA_HOME") or env.get("CUDA_PATH") or ""
    return _search(
        env.get("TL_AOT_NVCC", ""),
        "" if home and home == env.get(_EXPORTED) else home,  # set by export_cuda_home for TileLang, not by the user
        env.get("PATH", ""),
        env.get("TL_AOT_CUDA", "").strip(),
    )


find_toolkit.cache_clear = _search.cache_clear  # type: ignore[attr-defined]
