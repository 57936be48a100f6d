"""The library under test and its anchors: the tl_aot library, the same kernels through TileLang's JIT.

The JIT compiles the very factory and arguments the library was built from (read back from the
library's manifest), for ``target="cuda"`` (TileLang resolves it to the device's arch: sm_90a on
an H100, the arch the library was built for).
"""

from __future__ import annotations

import ast
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Context", "factory_args", "compile_jit"]

LIBRARY_FILE = "libtl_aot_bench.so"
NOOP_FILE = "libtl_aot_bench_noop.so"


@dataclass
class Context:
    """What the sections share: the libs folder, the run's budget and options, lazily loaded libraries."""

    libs: Path
    deadline: object
    options: object
    _lib: object = None
    _jit: dict = field(default_factory=dict)

    @property
    def lib(self):
        """The tl_aot bench library (``tl_aot.load``)."""
        if self._lib is None:
            import tl_aot

            self._lib = tl_aot.load(self.libs / LIBRARY_FILE)
        return self._lib

    def noop(self, name: str = "noop"):
        import tvm_ffi

        return tvm_ffi.load_module(str(self.libs / NOOP_FILE))[name]

    def jit(self, entry: str, backend: str, rec=None, section: str = ""):
        """TileLang JIT kernel of ``entry`` for ``backend`` (compiled once per run; compile time recorded)."""
        key = (entry, backend)
        if key not in self._jit:
            kernel, seconds, target = compile_jit(self.lib.signature(entry), backend)
            self._jit[key] = kernel
            if rec is not None:
                rec.emit(section, f"jit_compile:{entry}:{backend}", entry=entry, backend=backend, s=round(seconds, 3), target=target)
        return self._jit[key]


def factory_args(entry) -> tuple[str, dict]:
    """(factory name, keyword arguments) the library's entry was built from, as its manifest records them."""
    if Path(entry.source).name != "kernels.py":
        msg = f"entry {entry.name} comes from {entry.source}, not bench/kernels.py: rebuild the bench libraries"
        raise RuntimeError(msg)
    return entry.function, {k: ast.literal_eval(v) for k, v in entry.args}


def compile_jit(entry, backend: str, target: str = "cuda"):
    """``tilelang.compile`` of the entry's prim_func with ``execution_backend=backend``: (kernel, seconds, target)."""
    import tilelang

    from bench import kernels

    function, kwargs = factory_args(entry)
    func = getattr(kernels, function)(**kwargs)
    t0 = time.perf_counter()
    out_idx = [i for i, p in enumerate(entry.params) if p.output] or None  # the JIT returns what the entry returns
    kernel = tilelang.compile(func, out_idx=out_idx, target=target, execution_backend=backend)
    seconds = time.perf_counter() - t0
    resolved = getattr(kernel, "target", target)
    return kernel, seconds, str(resolved)
