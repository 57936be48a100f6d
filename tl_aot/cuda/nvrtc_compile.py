"""CUDA C++ → PTX with NVRTC, for the CUDA 12 compiler from PyPI (which has no nvcc).

NVIDIA ships no CUDA 12 nvcc on PyPI: ``nvidia-cuda-nvcc-cu12`` carries ``ptxas`` and libNVVM only.
``nvidia-cuda-nvrtc-cu12`` carries NVRTC, the same front end and NVVM optimiser as nvcc's ``cicc``,
in a library. So with ``tl_aot[build-cu12]`` an image is made as nvcc makes it, in two steps:
NVRTC makes the PTX (with the options nvcc gives ``cicc``), then that wheel's ``ptxas`` makes the
cubin (with the options nvcc gives ``ptxas``). NVRTC is loaded with ctypes: no cuda-python needed.
"""

from __future__ import annotations

import ctypes
import functools
import re
from pathlib import Path

from ..common.errors import CompileError

__all__ = ["nvrtc_archs", "compile_ptx", "drop_unused_globals", "PRELUDE"]

#: What NVRTC lacks that nvcc's ``-include cuda_runtime.h`` gives device code: TileLang's own
#: NVRTC prelude (its ``nvrtc_std.h``: the std type traits and limits NVRTC does not have).
PRELUDE = "#include <tl_templates/cuda/nvrtc_std.h>\n"


_GLOBAL_DECL = re.compile(r"^\.global\s+(?:\.align\s+\d+\s+)?\.\w+\s+([\w$]+)(?:\[[^\]]*\])?(?:\s*=.*)?;$")


def drop_unused_globals(ptx: str) -> str:
    """``ptx`` without the module-scope ``.global`` variables nothing in it refers to.

    ``-default-device`` makes every namespace-scope constant a device variable (libcu++'s
    ``integral_constant<...>::value`` and the like: ~700 of them for a TileLang GEMM), which NVVM
    keeps because they are externally visible; nvcc never emits them. Unreferenced, they only
    bloat the image (235 KiB instead of 61 KiB for the quickstart GEMM): dropped before ptxas.
    """
    lines = ptx.split("\n")
    uses: dict[str, int] = {}
    for token in re.findall(r"[\w$]+", ptx):
        uses[token] = uses.get(token, 0) + 1
    kept = [ln for ln in lines if not ((m := _GLOBAL_DECL.match(ln)) and uses.get(m.group(1), 0) == 1)]
    return "\n".join(kept)


@functools.cache
def _lib(path: str) -> ctypes.CDLL:
    # NVRTC dlopens libnvrtc-builtins.so.<major>.<minor> by name: load the wheel's copy first, so it
    # is found without LD_LIBRARY_PATH.
    for builtins in sorted(Path(path).parent.glob("libnvrtc-builtins.so.*")):
        ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(path)
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    lib.nvrtcCreateProgram.argtypes = [
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    lib.nvrtcCompileProgram.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.nvrtcGetPTXSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    lib.nvrtcGetPTX.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.nvrtcGetProgramLogSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    lib.nvrtcGetProgramLog.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    return lib


def nvrtc_archs(path: str) -> list[int]:
    """The compute capabilities an NVRTC library can target: ``[75, 80, ..., 120]``."""
    lib = _lib(path)
    n = ctypes.c_int()
    lib.nvrtcGetNumSupportedArchs(ctypes.byref(n))
    archs = (ctypes.c_int * n.value)()
    lib.nvrtcGetSupportedArchs(archs)
    return sorted(set(archs))


def compile_ptx(path: str, source: str, name: str, options: list[str], *, what: str) -> str:
    """Compile CUDA C++ ``source`` (named ``name`` in messages and line tables) to PTX with the NVRTC at ``path``.

    Raises :class:`CompileError` with NVRTC's log and options on failure.
    """
    lib = _lib(path)
    prog = ctypes.c_void_p()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), (PRELUDE + source).encode(), name.encode(), 0, None, None)
    if rc != 0:
        msg = f"{what}: NVRTC could not create a program: {lib.nvrtcGetErrorString(rc).decode()}"
        raise CompileError(msg)
    try:
        argv = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        rc = lib.nvrtcCompileProgram(prog, len(options), argv)
        if rc != 0:
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, log)
            text = log.value.decode(errors="replace").strip()
            indented = "\n".join("    " + line for line in text.splitlines())
            msg = f"{what}: NVRTC failed ({lib.nvrtcGetErrorString(rc).decode()})\n  options: {' '.join(options)}\n{indented}"
            raise CompileError(msg)
        size = ctypes.c_size_t()
        lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetPTX(prog, buf)
        return buf.value.decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
