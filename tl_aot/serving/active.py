"""Serving in this process: the active :class:`Server`, installed in TileLang's JIT (``serve``, ``stop``, ``$TL_AOT_SERVE``).

Apart from :mod:`.server` (which holds the libraries' kernels and answers a lookup) because
this is the process's side: one server per process, made on first use and added to by later
``serve`` calls; the interception put into TileLang's JIT when it is imported (never before: a
process that never uses TileLang pays nothing), which hands each request, ``@tilelang.jit`` call
and autotuner run to the server and counts what it did; the start-up hook's
``install_from_env`` and the line a served process prints at exit; and what ``capture --serve``
asks of the served libraries (:func:`held_device_code`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..common.errors import KernelNotServed, TlAotError
from ..common.fileutil import StrPath
from ..common.gc_pause import gc_paused
from ..common.json_types import JsonObject
from ..common.why_listing import why_lines
from .misses import miss_message
from .server import TRACED_KEPT, Server, Stats

if TYPE_CHECKING:
    from ..jit.seam import CompileRequest, Interception, JitCall

__all__ = ["serve", "stop", "install_from_env", "held_device_code", "active_server"]

_log = logging.getLogger("tl_aot.serving.active")


_active: Server | None = None
_lock = threading.Lock()


def active_server() -> Server | None:
    """The process's server (None before ``serve`` / ``$TL_AOT_SERVE`` loaded a library, and after :func:`stop`)."""
    return _active


def serve(path: StrPath, *, strict: bool = False) -> Server:
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
    from ..jit.import_hooks import on_import

    server = _load(path, strict)
    on_import("tilelang.jit", _patch)
    return server


def _load(path: StrPath, strict: bool, *, capturing: bool = False, cpu_time: bool = False) -> Server:
    """The libraries at ``path`` loaded and added to the process's server (made on first use)."""
    from ..runtime.loader import load

    p = Path(path)
    files = sorted(p.glob("lib*.so")) if p.is_dir() else [p]
    global _active
    with gc_paused():  # the libraries' indexes and the serving tables: acyclic, no collector pass over the process
        libs = [load(f) for f in files]
        if _active is None:
            _active = Server(libs, strict=strict, capturing=capturing, cpu_time=cpu_time)
        else:
            if cpu_time:
                _active.count_cpu_time()
            _active.add(libs)
            _active.strict = _active.strict or strict
    return _active


def stop() -> None:
    """End serving in this process: TileLang's JIT compiles every request again, through its own functions."""
    from ..jit.seam import uninstall

    global _active
    with _lock:
        _active = None
        while _installed:  # the seam puts TileLang's functions back once no interception is left
            uninstall(_installed.pop())


_installed: list[Interception] = []  # the serving interception, once installed


def _patch(tl_jit: Any) -> None:
    """Put serving's interception into TileLang's JIT (``tl_jit``: ``tilelang.jit``, just imported), once per process.

    Each request, ``@tilelang.jit`` call and autotuner run is handed to the server active at that
    moment (none after :func:`stop`: passed on to TileLang), which is made ready for lookups here.
    """
    from ..jit.seam import Interception, install

    with _lock:
        if _active is not None:
            _active.prepare_lookups()
        if _installed:
            return
        warned: set[str] = set()

        def on_request(req: CompileRequest, jit_call: JitCall | None, proceed: Callable[[], Any]) -> Any:
            server = _active
            if server is None:
                return proceed()
            served, key = server.lookup(req, jit_call)
            if served is not None:
                server.stats.served += 1
                return served
            server.stats.missed[req.name] = key
            if server.strict:
                server.stats.refused += 1
                raise KernelNotServed(miss_message(server, req, key, jit_call))
            if key not in warned and not server.tuning_now and not server.capturing:  # a tuning run is warned about once
                warned.add(key)
                _log.warning("%s; compiling it with TileLang's JIT", miss_message(server, req, key, jit_call))
            server.stats.compiled += 1
            return proceed()

        def on_tune(tuner: Any, proceed: Callable[[], Any]) -> Any:
            server = _active
            return proceed() if server is None else server.tune(tuner, proceed)

        def on_compile(jit_call: JitCall, proceed: Callable[[], Any]) -> Any:
            server = _active
            served = None if server is None else server.answer_call(jit_call)
            if server is None or served is None:
                return proceed()
            server.stats.served += 1
            server.stats.served_untraced += 1
            return served

        _installed.append(Interception(on_request, name="serving", on_tune=on_tune, on_compile=on_compile))
        install(_installed[0], tl_jit)


def _each(count: int, seconds: float) -> str:
    """``count`` lookups and their time, e.g. ``77 in 3.1 ms, 0.040 ms each``."""
    return f"{count} in {seconds * 1e3:.1f} ms, {seconds * 1e3 / max(count, 1):.3f} ms each"


def install_from_env() -> None:
    """Serve ``$TL_AOT_SERVE`` (strict when ``$TL_AOT_SERVE_STRICT`` is 1): an unchanged program, served.

    The libraries are loaded when the process imports TileLang's JIT, not at start-up: a process of
    the command that never uses TileLang (a tool, a worker, a test's subprocess) does not pay for
    loading them (nor for the tvm-ffi and torch imports that come with it). At exit a process that
    served prints one line to stderr: kernels served, compiled by the JIT, refused; tunings likewise;
    the lookups' time (wall clock; with ``$TL_AOT_SERVE_CPU_TIME`` 1, the looking-up thread's CPU
    time too, and the collector's passes within), entries' first use and the process's first question to the GPU apart.
    """
    import atexit
    import sys

    from ..jit.import_hooks import on_import

    path = os.environ.get("TL_AOT_SERVE")
    if not path:
        return
    strict = os.environ.get("TL_AOT_SERVE_STRICT", "") in ("1", "true", "yes")
    capturing = bool(os.environ.get("TL_AOT_CAPTURE"))
    cpu_time = os.environ.get("TL_AOT_SERVE_CPU_TIME", "") in (
        "1",
        "true",
        "yes",
    )  # the lookups' CPU time in the report too  # capture --serve: the capture records every request it serves
    started: list[Server] = []

    def start(tl_jit: Any) -> None:  # tilelang.jit has just executed (its import is still in progress)
        try:
            started.append(_load(path, strict, capturing=capturing, cpu_time=cpu_time))
        except TlAotError as e:  # checked by the command before it started, so changed since, or refused by the loader
            if strict:  # every kernel would be refused: stop here, with the reason and no traceback
                raise SystemExit(f"tl_aot serve: {e}; nothing can be served (strict), so the program stops") from None
            _log.warning("tl_aot serve: %s; TileLang's JIT compiles every kernel", e)
            return
        _patch(tl_jit)

    def report() -> None:
        if not started or capturing:  # under capture --serve, the capture's report counts what was served
            return
        from ..call_keys.code_source import source_reads

        st = started[0].stats
        print(
            f"tl_aot serve (pid {os.getpid()}): {st.served} served, {st.compiled} compiled by the JIT, {st.refused} refused; "
            f"tunings {st.tunings_served} served, {st.tunings_run} run by TileLang, {st.tunings_refused} refused; "
            f"{st.lookups} lookups in {st.lookup_s * 1e3:.1f} ms{_cpu_words(st) if cpu_time else ''} "
            f"({_each(st.call_lookups, st.call_lookup_s)} by call key, "
            f"{_each(st.lookups - st.call_lookups, st.lookup_s - st.call_lookup_s)} by a traced prim_func; "
            f"kernel sources read from disk: {source_reads.files} files in {source_reads.seconds * 1e3:.1f} ms of them; "
            f"entries' first use {st.first_use_s * 1e3:.1f} ms and the GPU's first question {st.gpu_first_s * 1e3:.1f} ms apart; "
            f"{st.served_untraced} kernels served before TileLang traced them)"
            + (
                f"; call keys unused: this {st.other_model} is no GPU model the libraries were captured on, each kernel traced"
                if st.other_model
                else ""
            ),
            file=sys.stderr,
        )
        for line in traced_lines(st):
            print(line, file=sys.stderr)

    on_import("tilelang.jit", start)
    atexit.register(report)


#: the functions the exit line names, the rest counted
TRACED_SHOWN = 8


def traced_lines(st: Stats) -> list[str]:
    """What the exit line adds when kernels were served only after TileLang traced them: each function, and why.

    Such a request is served exactly, but its lookup hashed a prim_func TileLang traced first (ms
    where a call key costs a fraction of one): what to fix when a library serves latency-bound
    processes (``tl_aot capture`` says the same of what it recorded).
    """
    if not st.traced:
        return []
    lines = [
        f"tl_aot serve: {len(st.traced)}{'+' if len(st.traced) >= TRACED_KEPT else ''} function(s) served only after "
        "TileLang traced their prim_func (docs/guide/capture.md says what a call key spells); why no call key answered each:"
    ]
    return lines + why_lines(st.traced.items(), TRACED_SHOWN)


def _cpu_words(st: Stats) -> str:
    """What the exit line adds with ``TL_AOT_SERVE_CPU_TIME=1``: the lookups' CPU time and the collector's passes within them."""
    passes = f"{st.lookup_gc_passes} passes of the cyclic collector within ({st.lookup_gc_full} full)"
    return f", {st.lookup_cpu_s * 1e3:.1f} ms of CPU, {passes}"


def held_device_code(key: str) -> dict[str, JsonObject] | None:
    """The device code the served libraries hold for request ``key`` (``{arch: {sha256, tilelang, from}}``), None if none holds it.

    What ``capture --serve`` records for a kernel it served: the digest the library's build proved,
    so a build from the new record checks its device code as it did.
    """
    server = _active
    hit = server.index.get(key) if server is not None else None
    if hit is None:
        return None
    lib, name, _ = hit
    manifest = lib.manifest
    entry = next(e for e in manifest.entries if e.name == name)
    return {
        v.arch.sm: {"sha256": v.device_code, "tilelang": manifest.tilelang_version, "from": f"served from {Path(lib.path).name}"}
        for v in entry.variants
        if v.device_code
    }
