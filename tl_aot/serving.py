"""Serve: TileLang's JIT answered from prebuilt tl_aot libraries, with no compile.

``tl_aot.serve(path)`` (a library, or a folder of them) patches TileLang's compile
(``tilelang.jit.cached``) in this process. A compile request whose key (prim_func without source
locations, options, headers by content: :func:`tl_aot.capture.request_key`) is the key of a
loaded library's variant (every kernel built from a capture, or reached through TileLang's JIT
from a spec entry, records the request it answers), on a GPU the library has an image for, returns a
:class:`ServedKernel`: the library's entry, called like TileLang's compiled kernel. Any other
request is a miss: compiled by the JIT with one warning per kernel, or, ``strict``, a
:class:`KernelNotServed` error naming the kernel and the nearest prebuilt one. A different IR or
different options are always a miss: nothing else is ever served for them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import TlAotError
from .jit_seam import Interception, install

__all__ = ["serve", "stop", "Server", "ServedKernel", "KernelNotServed", "install_from_env"]

_log = logging.getLogger("tl_aot.serving")


class KernelNotServed(TlAotError, LookupError):
    """Strict serving met a compile request no loaded library holds."""


class ServedKernel:
    """A prebuilt entry standing in for ``tilelang.jit.JITKernel``: same call forms (``out_idx`` outputs returned)."""

    def __init__(self, fn, entry: str, library, request) -> None:
        self._fn = fn
        self.entry = entry
        self.library = library
        self.prim_func = request.func
        self.out_idx = request.out_idx
        self.pass_configs = dict(request.pass_configs)
        self.compile_flags = list(request.compile_flags)
        self.execution_backend = "tl_aot"
        self.adapter = None  # no TileLang adapter: callers that look for one launch through __call__

    def __call__(self, *args):
        return self._fn(*args)

    def get_kernel_source(self, *args, **kwargs) -> str:
        """The CUDA source is not shipped; the manifest names what was built."""
        entry = self.library.signature(self.entry)
        return f"// served by tl_aot from {self.library.path}: {entry.signature()}"

    def __repr__(self) -> str:
        return f"<tl_aot.ServedKernel {self.entry} from {self.library.path.name}>"


@dataclass
class Stats:
    """What serving did in this process."""

    served: int = 0
    compiled: int = 0  # misses passed on to TileLang's JIT
    refused: int = 0  # strict misses
    lookup_s: float = 0.0
    missed: dict = field(default_factory=dict)  # kernel name -> key


class Server:
    """Prebuilt kernels by capture key, from one or more libraries."""

    def __init__(self, libraries, *, strict: bool = False) -> None:
        self.strict = strict
        self.stats = Stats()
        self.index: dict[str, tuple] = {}  # key -> (library, entry name, ccs)
        self.by_name: dict[str, list] = {}
        self._served: dict[str, ServedKernel] = {}
        self._lock = threading.Lock()
        self.libraries: list = []
        self.add(libraries)

    def add(self, libraries) -> None:
        """Serve these libraries' captured kernels too (a library already served is skipped)."""
        have = {str(lib.path) for lib in self.libraries}
        for lib in libraries:
            if str(lib.path) in have:
                continue
            self.libraries.append(lib)
            for e in lib.manifest.entries:
                if e.export:
                    continue  # a specialisation is reached through its export's dispatch, which may pick another
                for v in e.variants:
                    key = v.request_key or e.capture_key
                    if not key:
                        continue  # built before tl_aot recorded request keys, or from a plain prim_func with no request
                    have = self.index.setdefault(key, (lib, e.name, set()))
                    if have[1] == e.name and have[0] is lib:
                        have[2].add(_cc(v.arch))
                self.by_name.setdefault(e.capture_name or e.function, []).append(e)

    def lookup(self, req):
        """The served kernel for ``req``, or None (a miss)."""
        from .capture import options_of, request_key

        t0 = time.perf_counter()
        key = request_key(req.func, options_of(req))
        hit = self.index.get(key)
        served = None
        if hit is not None and _current_cc() in hit[2]:
            with self._lock:
                served = self._served.get(key)
                if served is None:
                    lib, name, _ = hit
                    served = self._served[key] = ServedKernel(lib[name], name, lib, req)
        self.stats.lookup_s += time.perf_counter() - t0
        return served, key

    def miss_message(self, req, key: str, jit_call=None) -> str:
        """Which kernel missed and the nearest prebuilt ones: the same jit function, closest arguments first."""
        from .capture import _jit_origin

        origin = _jit_origin(jit_call)
        jit, args = origin.get("jit", ""), origin.get("args", {})
        what = f"{jit}({', '.join(f'{k}={v}' for k, v in args.items())})" if jit else f"prim_func {req.name!r}"
        near = sorted(self.by_name.get(jit, []), key=lambda e: -sum(1 for k, v in e.args if args.get(k) == v))
        if near:
            listing = "; ".join(f"{e.name} ({', '.join(f'{k}={v}' for k, v in e.args[:8])})" for e in near[:3])
            hint = f"nearest prebuilt: {listing}"
        else:
            hint = f"no prebuilt kernel comes from that function ({len(self.index)} kernels loaded)"
        return (
            f"tl_aot.serve: {what} (key {key}) is not in the served libraries for this GPU (sm_{_current_cc() or '?'}); "
            f"{hint}. Capture a workload that asks for it and rebuild (python -m tl_aot capture / build --capture)"
        )


def _cc(arch: str) -> str:
    """``sm_90a`` -> ``90``: the compute capability an image runs on."""
    return "".join(ch for ch in arch.removeprefix("sm_") if ch.isdigit())


def _current_cc() -> str:
    import sys

    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"{major}{minor}"
    except Exception:  # noqa: BLE001
        pass
    return ""


_active: Server | None = None
_lock = threading.Lock()


def serve(path: str | os.PathLike, *, strict: bool = False) -> Server:
    """Answer TileLang's JIT from the tl_aot libraries at ``path`` (a ``lib*.so`` or a folder of them).

    Parameters
    ----------
    path : path
        A tl_aot library, or a folder holding several: built from a capture (``build --capture``) or
        from spec files, the CLI, setuptools or CMake (each entry reached through TileLang's JIT is
        served for the request it answers).
    strict : bool
        A request no library holds raises :class:`KernelNotServed` instead of being compiled by the JIT.

    Returns the :class:`Server` (its ``stats`` count served and compiled kernels). Several
    packages may each serve their own library: later calls add to what is served (strict if any
    asked for it); :func:`stop` ends serving.

    """
    from .hooks import on_import
    from .runtime import load

    p = Path(path)
    files = sorted(p.glob("lib*.so")) if p.is_dir() else [p]
    global _active
    libs = [load(f) for f in files]
    if _active is None:
        _active = Server(libs, strict=strict)
    else:
        _active.add(libs)
        _active.strict = _active.strict or strict
    on_import("tilelang.jit", _patch)
    return _active


def stop() -> None:
    """End serving in this process: TileLang's JIT compiles every request again."""
    global _active
    _active = None


_installed: list = []  # the serving interception, once installed


def _patch(tl_jit) -> None:
    with _lock:
        if _installed:
            return
        warned: set = set()

        def on_request(req, jit_call, proceed):
            server = _active
            if server is None:
                return proceed()
            served, key = server.lookup(req)
            if served is not None:
                server.stats.served += 1
                return served
            server.stats.missed[req.name] = key
            if server.strict:
                server.stats.refused += 1
                raise KernelNotServed(server.miss_message(req, key, jit_call))
            if key not in warned:
                warned.add(key)
                _log.warning("%s; compiling it with TileLang's JIT", server.miss_message(req, key, jit_call))
            server.stats.compiled += 1
            return proceed()

        _installed.append(Interception(on_request, name="serving"))
        install(_installed[0], tl_jit)


def install_from_env() -> Server | None:
    """Serve ``$TL_AOT_SERVE`` (strict when ``$TL_AOT_SERVE_STRICT`` is 1): an unchanged program, served.

    At exit the process prints one line to stderr: kernels served, compiled by the JIT, refused.
    """
    import atexit
    import sys

    path = os.environ.get("TL_AOT_SERVE")
    if not path:
        return None
    server = serve(path, strict=os.environ.get("TL_AOT_SERVE_STRICT", "") in ("1", "true", "yes"))

    def report() -> None:
        st = server.stats
        print(
            f"tl_aot serve (pid {os.getpid()}): {st.served} served, {st.compiled} compiled by the JIT, {st.refused} refused; "
            f"lookups {st.lookup_s * 1e3:.1f} ms in all",
            file=sys.stderr,
        )

    atexit.register(report)
    return server
