"""nvcc's command lines: what TileLang itself runs for an arch, the NVRTC equivalent, and paths made machine-independent.

Building commands only (no tool runs here): :mod:`tl_aot.cuda.device_image` runs them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
from pathlib import Path

from ..common.arch import Arch
from ..common.errors import TlAotError
from .cuda_toolkit import find_toolkit
from .toolchain import cuda_include_dir, find_nvcc, tilelang_include_dirs, tvm_ffi_paths

__all__ = ["nvcc_command", "source_prefix_map", "map_ptx_paths", "nvrtc_options"]


def nvcc_command(arch: Arch, source: str, output: str, options=(), *, nvcc: str | None = None, stage: str = "image") -> list[str]:
    """The nvcc command TileLang itself would run for ``arch`` (plus a PTX fallback for ``+PTX``).

    ``stage="ptx"`` stops after the front end (CUDA C++ → PTX); ``stage="image"`` (the default)
    makes the cubin, or for ``+PTX`` the fatbin, from a ``.cu`` or a ``.ptx`` source.
    """
    nvcc = nvcc or find_nvcc()
    if stage == "ptx":
        fmt = "--ptx"
        gencode = ["-gencode", f"arch={arch.compute},code={arch.sm}"]
    elif arch.ptx:
        fmt = "--fatbin"
        gencode = ["-gencode", f"arch={arch.compute},code=[{arch.sm},{arch.compute}]"]
    else:
        fmt = "--cubin"
        gencode = ["-gencode", f"arch={arch.compute},code={arch.sm}"]
    cmd = [nvcc, fmt, "-O3", "-lineinfo", *gencode, "-std=c++20", "-w"]
    for inc in tilelang_include_dirs():
        cmd += ["-I", inc]
    cmd += list(options)
    cmd += ["-o", output, source]
    return cmd


_PTX_FILE_RE = re.compile(r'^(\s*\.file\s+\d+\s+")([^"]*)(")', re.M)


def source_prefix_map(workdir: Path | None = None, *, host: bool = False) -> list[tuple[str, str]]:
    """Build-machine path prefixes and the stable names that replace them in outputs, longest first.

    The kernel folder becomes ``""`` (a generated ``.cu`` keeps its bare name), TileLang's install
    ``tilelang/``, the CUDA toolkit's headers ``cuda/include``, tvm-ffi's headers ``tvm_ffi/include``:
    libraries built in different folders, checkouts or virtual environments carry the same bytes.
    """
    pairs: dict[str, str] = {}

    def add(path, new: str) -> None:
        if not path:
            return
        for p in {str(path), os.path.realpath(path)}:
            pairs[p.rstrip("/") + "/"] = new.rstrip("/") + "/" if new else ""

    if workdir is not None:
        add(workdir, "")
    spec = importlib.util.find_spec("tilelang")
    if spec is not None and spec.submodule_search_locations:
        add(next(iter(spec.submodule_search_locations)), "tilelang")
    with contextlib.suppress(TlAotError):
        add(cuda_include_dir(), "cuda/include")
    if host:  # tvm-ffi's headers reach only the host launcher (and locating them imports tvm_ffi)
        p = tvm_ffi_paths()
        add(p["include"], "tvm_ffi/include")
        add(p["dlpack"], "dlpack/include")
    return sorted(pairs.items(), key=lambda kv: -len(kv[0]))


def map_ptx_paths(ptx: str, prefix_map: list[tuple[str, str]]) -> str:
    """Rewrite the absolute paths of PTX ``.file`` directives (``-lineinfo``) through ``prefix_map``.

    nvcc has no ``-ffile-prefix-map``: cicc records each source and header by absolute path, and
    ptxas copies them into the cubin's line table. Mapping them in the PTX keeps profilers' source
    view working (paths stay relative to the kernel folder / TileLang) and the image reproducible.
    """

    def repl(m: re.Match) -> str:
        path = m.group(2)
        for old, new in prefix_map:
            if path.startswith(old):
                path = new + path[len(old) :]
                break
        return m.group(1) + path + m.group(3)

    return _PTX_FILE_RE.sub(repl, ptx)


def nvrtc_options(arch: Arch, options=()) -> tuple[list[str], list[str]]:
    """The NVRTC and ptxas options that make the image nvcc would make from ``options`` (nvcc flags).

    NVRTC gets what nvcc gives ``cicc`` (arch, C++20, line info, TileLang's and the toolkit's
    headers, the kernel's ``-I`` / ``-D`` / ``--use_fast_math`` ...); ``--ptxas-options`` /
    ``-Xptxas`` go to ptxas; ``-O<n>`` (nvcc's host optimisation level) and ``-Xcompiler`` (host
    compiler) options have no device effect and are dropped. ``-default-device``: TileLang's
    headers call unannotated constexpr helpers from device code, which nvcc allows and NVRTC only
    in this mode (as TileLang's own NVRTC backend does).
    """
    nv = [f"--gpu-architecture={arch.compute}", "-std=c++20", "-lineinfo", "-w", "-default-device"]
    nv += [f"-I{d}" for d in (*tilelang_include_dirs(), *find_toolkit().include_dirs)]
    px = ["-w", f"-arch={arch.sm}", "-m64", "--generate-line-info"]
    opts = [str(o) for o in options]
    i = 0
    while i < len(opts):
        o = opts[i]
        if o in ("-Xptxas", "--ptxas-options") and i + 1 < len(opts):
            px += opts[i + 1].split(",")
            i += 2
            continue
        if o in ("-Xcompiler", "--compiler-options") and i + 1 < len(opts):  # host compiler only: no device effect
            i += 2
            continue
        if o.startswith(("--ptxas-options=", "-Xptxas=")):
            px += o.split("=", 1)[1].split(",")
        elif re.fullmatch(r"-O\d", o):
            pass
        elif o in ("-I", "-D", "-U", "-include") and i + 1 < len(opts):
            nv.append(f"--pre-include={opts[i + 1]}" if o == "-include" else o + opts[i + 1])
            i += 2
            continue
        else:
            nv.append(o)
        i += 1
    return nv, px
