"""TileLang's CuTeDSL backend at build time: the extra's check, the generated module, its cubin, its kernels.

A ``cutedsl`` variant is lowered by TileLang as usual (launch metadata from the same host IR as a
CUDA C++ one) with a CuTeDSL target; its device code is a Python module that CuTeDSL compiles.
:func:`compile_cubin` runs that compile in a worker process, reused across variants
(:mod:`tl_aot.lower.cutedsl_worker`: CuTeDSL's MLIR state stays out of the build), for the variant's
arch, with no GPU, and
:func:`match_kernels` finds each launch's kernel in the cubin by pattern (CuTeDSL mangles names),
with the rule the runtime uses, so a library never holds a pattern that matches none or several.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from ..common.errors import CompileError, LoweringError, ToolchainNotFound
from ..common.fileutil import write_file
from ..common.versions import CUTEDSL_DIST, CUTEDSL_PIN, cutedsl_version, package_version

__all__ = [
    "require_cutedsl",
    "generated_module",
    "check_kernels",
    "fake_arguments",
    "check_params",
    "compile_cubin",
    "close_workers",
    "match_kernels",
]

#: TileLang releases whose generated CuTeDSL module (its cubin step) tl_aot is tested with.
CUTEDSL_TILELANG = ("0.1.15",)


def require_cutedsl(entry: str, arch: str) -> str:
    """The CuTeDSL version, or :class:`ToolchainNotFound` naming the packages a ``cutedsl`` build needs."""
    import importlib.util

    version = cutedsl_version()
    if not version or importlib.util.find_spec("cutlass") is None:
        msg = (
            f"entry {entry!r} ({arch}): the cutedsl backend needs CuTeDSL at build time (not at run time): "
            f"pip install 'tl_aot[cutedsl]' (that is {CUTEDSL_DIST}=={CUTEDSL_PIN}, with its "
            f"{CUTEDSL_DIST}-libs wheels and cuda-bindings)"
        )
        raise ToolchainNotFound(msg, entry=entry, arch=arch)
    tilelang = package_version("tilelang")
    if tilelang.split("+", 1)[0] not in CUTEDSL_TILELANG:
        msg = (
            f"entry {entry!r} ({arch}): the cutedsl backend drives the CuTeDSL module TileLang {', '.join(CUTEDSL_TILELANG)} "
            f"generates; TileLang {tilelang or '(none)'} is installed: pip install tilelang=={CUTEDSL_TILELANG[-1]}"
        )
        raise ToolchainNotFound(msg, entry=entry, arch=arch)
    return version


def generated_module(art, func, target) -> str:
    """The Python module TileLang's CuTeDSL JIT would write for this lowering (its cubin step included)."""
    from tilelang import tvm
    from tilelang.jit.adapter.wrapper import TLPyWrapper

    wrapper = TLPyWrapper(target)
    wrapper.assign_optimized_module(tvm.IRModule({"main": func}))
    wrapper.assign_pass_configs({})
    wrapper.assign_host_module(art.host_mod)
    wrapper.assign_device_module(art.device_mod)
    return wrapper.wrap(art.kernel_source)["host_func"]


_KERNEL_DEF = re.compile(r"@cute\.kernel\s*\n\s*def\s+(\w+)\s*\(([^)]*)\)", re.S)


def check_params(params, where: str) -> None:
    """Sub-byte tensors (int4, fp4) are refused for the CuTeDSL backend, by name.

    TileLang 0.1.15's CuTeDSL adapter keeps such a tensor's logical shape where its TVM FFI adapter
    halves the last dim, so how its JIT binds one there is not the packed binding tl_aot's launcher
    checks (:mod:`tl_aot.common.subbyte`); the CUDA backend builds them.
    """
    packed = [f"{p.name}: {p.dtype}" for p in params if p.packing is not None]
    if packed:
        msg = (
            f"{where}: sub-byte tensor parameters ({', '.join(packed)}) are not built with the cutedsl backend "
            '(TileLang binds them differently there); build this entry with backend = "cuda"'
        )
        raise LoweringError(msg)


def check_kernels(kernels, workspaces, source: str, where: str) -> None:
    """Each launch names a ``@cute.kernel`` of the CuTeDSL source taking exactly the arguments the launcher passes.

    TileLang 0.1.15's CuTeDSL host wrapper does not pass ``T.alloc_global`` workspaces to its
    kernels (its own JIT fails to bind them), so a kernel taking one is refused here, by name.
    """
    scratch = {w.cpp: w.name for w in workspaces}
    taken = sorted({scratch[a.value] for k in kernels for a in k.args if a.value in scratch})
    if taken:
        msg = (
            f"{where}: TileLang's CuTeDSL backend cannot compile kernels that take T.alloc_global workspaces "
            f"({', '.join(taken)}): its generated host code does not pass them (TileLang's own JIT fails alike); "
            'build this entry with backend = "cuda"'
        )
        raise LoweringError(msg)
    decls = {m.group(1): [p for p in m.group(2).split(",") if p.strip()] for m in _KERNEL_DEF.finditer(source)}
    for k in kernels:
        params = decls.get(k.name)
        if params is None:
            msg = f"{where}: TileLang's CuTeDSL source has no kernel {k.name} (kernels: {', '.join(decls) or 'none'})"
            raise LoweringError(msg)
        if len(params) != len(k.args):
            msg = (
                f"{where}: CuTeDSL kernel {k.name} takes {len(params)} argument(s) but the host code passes "
                f"{len(k.args)} ({', '.join(a.name for a in k.args)})"
            )
            raise LoweringError(msg)


def fake_arguments(variant) -> dict[str, Any]:
    """What the cubin step is called with, per name: a tensor's rank-sized shape and dtype, a scalar's dtype.

    Dynamic dims become 1, as TileLang's own fake tensors make them positive: the kernels take data
    pointers and dims as scalars, so the cubin does not depend on them.
    """
    out = {}
    for p in variant.params:
        if p.is_tensor:
            out[p.name] = {"kind": "tensor", "dtype": p.dtype, "shape": [d if isinstance(d, int) else 1 for d in p.shape]}
        else:
            out[p.name] = {"kind": "scalar", "dtype": p.dtype}
    for s in variant.symbols:
        out.setdefault(s.name, {"kind": "scalar", "dtype": s.dtype})
    return out


class _Workers:
    """CuTeDSL worker processes, started on demand and reused (each imports TileLang and CuTeDSL once); thread safe."""

    def __init__(self) -> None:
        self._idle: list[subprocess.Popen[str]] = []
        self._lock = threading.Lock()
        atexit.register(self.close)

    def compile(self, folder: Path) -> str:
        """Compile ``folder`` in a worker; '' on success, else the error (with the worker's diagnostics)."""
        with self._lock:
            proc = self._idle.pop() if self._idle else None
        if proc is None:
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
            cmd = [sys.executable, "-m", "tl_aot.lower.cutedsl_worker"]
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        assert proc.stdin is not None and proc.stdout is not None  # started with both piped
        try:
            proc.stdin.write(f"{folder}\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except OSError:
            line = ""
        if not line:
            proc.kill()
            return f"the CuTeDSL worker died (exit {proc.wait()}){_log_tail(folder)}"
        with self._lock:
            self._idle.append(proc)
        reply = json.loads(line)
        return "" if reply["ok"] else f"{reply['error']}{_log_tail(folder)}"

    def close(self) -> None:
        """End the idle workers (closing stdin ends their loop)."""
        with self._lock:
            procs, self._idle = self._idle, []
        for p in procs:
            with contextlib.suppress(OSError):
                if p.stdin is not None:
                    p.stdin.close()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


_WORKERS = _Workers()


def close_workers() -> None:
    """End the CuTeDSL worker processes started so far (the next compile starts new ones)."""
    _WORKERS.close()


def _log_tail(folder: Path, n: int = 30) -> str:
    try:
        lines = (folder / "compile.log").read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n  " + "\n  ".join(lines[-n:]) if lines else ""


def compile_cubin(variant, arch, work: Path) -> tuple[bytes, Path]:
    """Compile the variant's generated CuTeDSL module to a cubin for its arch (in a worker process); the bytes and module path."""
    folder = Path(work) / "kernels"
    folder.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f"{variant.entry}__{arch.sm}.cutedsl.", dir=folder))
    module = stage / "kernel.py"
    write_file(module, variant.cuda_source)
    write_file(stage / "arguments.json", json.dumps(fake_arguments(variant)))
    error = _WORKERS.compile(stage)
    cubin = stage / "kernel.cubin"
    if not error and not cubin.is_file():
        error = "CuTeDSL wrote no cubin"
    if error:
        msg = f"entry {variant.entry!r} ({arch}): CuTeDSL failed to compile the module TileLang generated\n  module: {module}\n  {error}"
        raise CompileError(msg, entry=variant.entry, arch=arch.sm)
    return cubin.read_bytes(), module


def _matches(pattern: str, names: list[str]) -> list[str]:
    """The runtime's rule: names holding ``pattern``; those where it is not followed by ``_<digit>`` win."""
    base: list[str] = []
    variants: list[str] = []
    for n in names:
        pos = n.find(pattern)
        if pos < 0:
            continue
        after = n[pos + len(pattern) :]
        (variants if re.match(r"_\d", after) else base).append(n)
    return base or variants


#: Bytes of each launcher argument type, as the kernel must declare it.
_ARG_BYTES = {"void*": 8, "CUtensorMap": 128, "bool": 1, "float": 4, "double": 8}
_ARG_BYTES.update({f"{s}int{b}_t": b // 8 for s in ("", "u") for b in (8, 16, 32, 64)})


def match_kernels(kernels, image: bytes, *, entry: str, arch: str) -> dict[str, str]:
    """Each launch's kernel in the cubin (pattern -> full name), its parameters the sizes the launcher passes.

    A pattern matching none or several kernels, or a kernel whose parameters differ from the
    launcher's arguments, is a build error naming the entry and arch.
    """
    from .cubin import kernel_names, param_sizes

    names = kernel_names(image)
    out = {}
    for k in kernels:
        found = _matches(k.name, names)
        if len(found) != 1:
            what = "no kernel" if not found else f"{len(found)} kernels ({', '.join(found)})"
            msg = (
                f"entry {entry!r} ({arch}): kernel pattern {k.name!r} matches {what} in the CuTeDSL cubin; "
                f"its kernels: {', '.join(names) or 'none'}"
            )
            raise CompileError(msg, entry=entry, arch=arch)
        sizes, passed = param_sizes(image, found[0]), [_ARG_BYTES.get(a.ctype) for a in k.args]
        if sizes is not None and sizes != passed:
            shown = ", ".join(f"{a.name}: {a.ctype}" for a in k.args)
            msg = (
                f"entry {entry!r} ({arch}): CuTeDSL kernel {found[0]} takes parameters of {sizes} bytes but the "
                f"launcher passes {passed} ({shown})"
            )
            raise CompileError(msg, entry=entry, arch=arch)
        out[k.name] = found[0]
    return out
