"""Serve: TileLang's JIT answered from prebuilt tl_aot libraries, with no compile.

``tl_aot.serve(path)`` (a library, or a folder of them) patches TileLang's compile
(``tilelang.jit.cached``) in this process. A compile request whose key (prim_func without source
locations, options, headers by content: :func:`tl_aot.jit.request_key.request_key`) is the key of a
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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..common.arch import Arch
from ..common.errors import KernelNotServed
from ..common.fileutil import StrPath
from ..common.json_types import JsonObject
from ..gpu.cuda_driver import Gpu, current_gpu, current_gpu_identity, gpu_name
from ..gpu.image_select import Image, image_of, runs_on
from .misses import miss_message, tuning_message

if TYPE_CHECKING:
    from ..jit.request_key import RequestKeys
    from ..jit.seam import CompileRequest, Interception, JitCall
    from ..runtime.loader import Library
    from .served_kernel import ServedKernel

# What answers a request (the seam with TileLang's JIT, the call and request keys, served kernels) is
# imported when TileLang's JIT is (:func:`_patch`: before any request can come), not by ``serve``:
# a process pays for it with TileLang's import, and a served library's start-up is its index alone.

__all__ = ["serve", "stop", "Server", "KernelNotServed", "install_from_env", "held_device_code"]

_log = logging.getLogger("tl_aot.serving.server")


@dataclass
class Stats:
    """What serving did in this process."""

    served: int = 0
    served_untraced: int = 0  # of which answered from the @tilelang.jit call's key, before TileLang built the prim_func
    compiled: int = 0  # misses passed on to TileLang's JIT
    refused: int = 0  # strict misses
    tunings_served: int = 0  # autotuner runs answered with a recorded choice (nothing compiled or timed)
    tunings_run: int = 0  # autotuner runs passed on to TileLang (not strict)
    tunings_refused: int = 0  # strict autotuner runs with no recorded choice
    lookups: int = 0  # requests looked up (by call key or by request key)
    lookup_s: float = 0.0  # their time (wall clock), an entry's first use and the GPU's first question apart
    # the looking-up thread's CPU time meanwhile (wall clock above it: the thread waited), read only when asked for
    # (Server(cpu_time=True), $TL_AOT_SERVE_CPU_TIME): reading a thread's CPU clock is a system call (no vDSO), each lookup
    lookup_cpu_s: float = 0.0
    call_lookups: int = 0  # of which by a @tilelang.jit call's key (before TileLang traces)
    call_lookup_s: float = 0.0  # their time (the rest hashed a traced prim_func: what TileLang's own cache key costs too)
    first_use_s: float = 0.0  # entries made ready on first use: the record parsed, the function found
    gpu_first_s: float = 0.0  # the process's first question to the GPU: the NVIDIA driver loaded, the device's traits read
    missed: dict[str, str] = field(default_factory=dict)  # kernel name -> key
    #: this GPU's model, when it is none the libraries were captured on: call keys are not used on it (see answer_call)
    other_model: str = ""


class Server:
    """Prebuilt kernels by capture key, from one or more libraries."""

    def __init__(self, libraries: Iterable[Library], *, strict: bool = False, capturing: bool = False, cpu_time: bool = False) -> None:
        self._call_key: Callable[..., str | None] | None = None  # tl_aot.jit.call_key.call_key: see prepare_lookups
        self._gpu_asked = False  # whether a lookup asked current_gpu_identity() (its first answer loads the driver)
        self._cpu: Callable[[], float] = time.thread_time if cpu_time else float  # float() is 0.0: no CPU time read
        self._keys: RequestKeys | None = None
        self.strict = strict
        # under capture --serve: every @tilelang.jit call is traced (the capture records its IR), misses are expected
        self.capturing = capturing
        self.stats = Stats()
        self.index: dict[str, tuple[Library, str, tuple[Image, ...]]] = {}  # key -> (library, entry name, images it holds)
        self.by_name: dict[str, list[tuple[Library, str]]] = {}  # captured prim_func's name (else function) -> [(library, entry name)]
        self._served: dict[str, ServedKernel] = {}
        self._lock = threading.Lock()
        self._warned_tunings: set[str] = set()
        self.tunings: dict[str, tuple[Library, int]] = {}  # tuning key -> (library, its index in the library's tunings)
        self.calls: dict[str, str] = {}  # call key -> request key (tl_aot.jit.call_key)
        self.captured_on: frozenset[str] = frozenset()  # the GPU models the libraries' kernels were captured on
        self._calls_answer: dict[int, bool] = {}  # device -> whether call keys answer on it (its model was captured)
        self.libraries: list[Library] = []
        self.add(libraries)

    @property
    def keys(self) -> RequestKeys:
        """The request keys of prim_funcs looked up (:class:`tl_aot.jit.request_key.RequestKeys`, made on first use)."""
        if self._keys is None:
            from ..jit.request_key import RequestKeys

            self._keys = RequestKeys()
        return self._keys

    def prepare_lookups(self) -> None:
        """Import what a lookup uses (the call and request keys, the records' dataclasses), so no lookup is timed with imports.

        Serving calls this when TileLang's JIT is imported (no request comes before); a lookup
        without it imports them itself.
        """
        self._call_keys()
        self.keys  # noqa: B018 (made now)

    def _call_keys(self) -> Callable[..., str | None]:
        """:func:`tl_aot.jit.call_key.call_key`, imported (with what a first answer uses) on first use."""
        if self._call_key is None:
            from ..common import metadata  # noqa: F401 (an entry's first use parses its record)
            from ..jit.call_key import call_key
            from ..jit.seam import CompileRequest  # noqa: F401 (what a first answer builds)
            from .served_kernel import ServedKernel  # noqa: F401

            self._call_key = call_key
        return self._call_key

    def add(self, libraries: Iterable[Library]) -> None:
        """Serve these libraries' captured kernels too (a library already served is skipped).

        Indexed from each library's manifest index (:attr:`tl_aot.runtime.loader.Library.index`):
        no entry's record is parsed, no entry's function looked up, until a request asks for it.
        """
        have = {str(lib.path) for lib in self.libraries}
        table, by_name = self.index, self.by_name
        for lib in libraries:
            if str(lib.path) in have:
                continue
            self.libraries.append(lib)
            index = lib.index
            # arch -> (image_of(arch),), by the Arch object: an index holds one per arch (a handful), and a frozen
            # dataclass's hash is a Python call, once per variant otherwise
            images: dict[int, tuple[Arch, tuple[Image, ...]]] = {}
            for e in index.entries:
                name = e.name
                if e.export:
                    continue  # a specialisation is reached through its export's dispatch, which may pick another
                for key, arch in e.variants:
                    if not key:
                        continue  # built before tl_aot recorded request keys, or from a plain prim_func with no request
                    held = images.get(id(arch))
                    if held is None:
                        held = images[id(arch)] = (arch, (image_of(arch),))  # the Arch kept: its id stays its own
                    hit = table.get(key)
                    if hit is None:
                        table[key] = (lib, name, held[1])  # one image: the tuple shared by every key of that arch
                    elif hit[1] == name and hit[0] is lib and held[1][0] not in hit[2]:
                        table[key] = (lib, name, hit[2] + held[1])  # a key several of the entry's images answer
                group = by_name.get(e.origin)
                if group is None:
                    by_name[e.origin] = [(lib, name)]
                else:
                    group.append((lib, name))
            for i, key in enumerate(index.tuning_keys):
                self.tunings.setdefault(key, (lib, i))
            for key, request_key in index.calls:
                self.calls.setdefault(key, request_key)
            self.captured_on |= set(index.captured_on)
        self._calls_answer.clear()

    def answer_call(self, jit_call: JitCall) -> ServedKernel | None:
        """The served kernel for a ``@tilelang.jit`` compile, by its call key, before TileLang traces; None to go on.

        None when the call cannot be keyed, no library recorded it, or its kernel has no image for
        this GPU: the compile then proceeds and its request is looked up by its prim_func. Also None
        on a GPU of a model the libraries were not captured on (:meth:`_calls_answer_on`).
        """
        if not self.calls or self.capturing:
            return None
        call_key = self._call_key or self._call_keys()
        t0, c0 = time.perf_counter(), self._cpu()
        if not self._gpu_asked:
            t0, c0 = self._ask_gpu(t0, c0)
        gpu, identity = current_gpu_identity()
        answers = self._calls_answer.get(gpu.device)
        if answers is None:
            answers = self._calls_answer[gpu.device] = self._calls_answer_on(gpu)
        jit, args, kwargs = jit_call.jit, jit_call.args, jit_call.kwargs
        key = call_key(jit, args, kwargs, identity) if identity and answers else None
        request_key = self.calls.get(key) if key else None
        hit = self.index.get(request_key) if request_key else None
        served = None
        if request_key is not None and hit is not None and runs_on(hit[2], gpu.cc):
            served = self._served.get(request_key)
            if served is None:
                t1, c1 = time.perf_counter(), self._cpu()
                served = self._first_served(request_key, hit, jit_call)
                t0, c0 = self._first_use(t0, c0, t1, c1)
        self._looked_up(t0, c0, by_call=True)
        return served

    def _calls_answer_on(self, gpu: Gpu) -> bool:
        """Whether call keys may answer on ``gpu``: its model is one the libraries were captured on (or unknown).

        A call key covers what a factory reads of the GPU as the driver's traits (compute capability,
        SMs, shared memory, L2), not its model's name, which an H100 SXM and an H200 share the rest of.
        A factory choosing by name (TileOPs chooses a kernel by ``"H200" in torch.cuda.get_device_name()``)
        would be answered another model's kernel. Captured on both, such a call key names two requests
        and is shipped for neither (:func:`tl_aot.capture.record_specs.recorded_calls`); captured on one,
        nothing shows it. So on a model the libraries were not captured on, each request is traced and
        served by its prim_func's key, which is exact.
        """
        model = gpu_name(gpu) if self.captured_on else ""
        if not model or model in self.captured_on:
            return True
        self.stats.other_model = model
        return False

    def _first_served(self, request_key: str, hit: tuple[Library, str, tuple[Image, ...]], jit_call: JitCall) -> ServedKernel:
        """The kernel a call key's first hit serves (kept for the calls after): the request it stands for, its entry."""
        from ..jit.seam import CompileRequest
        from .served_kernel import ServedKernel

        jit, args, kwargs = jit_call.jit, jit_call.args, jit_call.kwargs
        with self._lock:
            served = self._served.get(request_key)
            if served is None:
                lib, name, _ = hit
                req = CompileRequest.of(
                    None, jit.out_idx, pass_configs=jit.pass_configs, compile_flags=jit.compile_flags, target=jit.target
                )
                served = self._served[request_key] = ServedKernel(lib[name], name, lib, req, lambda: jit.get_tir(*args, **kwargs))
        return served

    def lookup(self, req: CompileRequest, jit_call: JitCall | None = None) -> tuple[ServedKernel | None, str]:
        """The served kernel for ``req``, or None (a miss): its key names a prebuilt image that runs on the current GPU."""
        t0, c0 = time.perf_counter(), self._cpu()
        key = self.keys.key(req, jit_call)
        hit = self.index.get(key)
        served = None
        if hit is not None and not self._gpu_asked:
            t0, c0 = self._ask_gpu(t0, c0)
        if hit is not None and runs_on(hit[2], current_gpu_identity()[0].cc):
            with self._lock:
                served = self._served.get(key)
                if served is None:
                    from .served_kernel import ServedKernel

                    lib, name, _ = hit
                    t1, c1 = time.perf_counter(), self._cpu()
                    served = self._served[key] = ServedKernel(lib[name], name, lib, req)
                    t0, c0 = self._first_use(t0, c0, t1, c1)
        self._looked_up(t0, c0)
        return served, key

    def _ask_gpu(self, t0: float, c0: float) -> tuple[float, float]:
        """The process's first question to the GPU, counted apart from lookups (``t0``, ``c0`` moved past it).

        Its first answer loads the NVIDIA driver (``cuInit`` included, if nothing in the process
        used CUDA yet) and reads the device's traits: once per process, like an entry's first use,
        not per request. It is not asked when serving starts: ``cuInit`` before a ``fork`` would
        leave the child unable to use CUDA.
        """
        t1, c1 = time.perf_counter(), self._cpu()
        current_gpu_identity()
        self._gpu_asked = True
        t2, c2 = time.perf_counter(), self._cpu()
        self.stats.gpu_first_s += t2 - t1
        return t0 + (t2 - t1), c0 + (c2 - c1)

    def _first_use(self, t0: float, c0: float, t1: float, c1: float) -> tuple[float, float]:
        """Count an entry's first use (from ``t1``, ``c1``) apart from lookups: the lookup's start (``t0``, ``c0``) moved past it."""
        t2, c2 = time.perf_counter(), self._cpu()
        self.stats.first_use_s += t2 - t1
        return t0 + (t2 - t1), c0 + (c2 - c1)

    def _looked_up(self, t0: float, c0: float, *, by_call: bool = False) -> None:
        spent = time.perf_counter() - t0
        st = self.stats
        st.lookup_cpu_s += self._cpu() - c0
        st.lookups += 1
        st.lookup_s += spent
        if by_call:
            st.call_lookups += 1
            st.call_lookup_s += spent

    def tune(self, tuner: Any, proceed: Callable[[], Any]) -> Any:
        """Answer one run of TileLang's autotuner: the recorded choice, served; else refused (strict) or run by TileLang.

        A recorded tuning is answered by asking for its chosen kernel (served like any request:
        nothing is compiled or timed). Strict serving with no recorded tuning lets TileLang's tuner
        go on only as far as serving allows: a run whose tunable arguments were given compiles one
        kernel, served; one that would tune has every candidate refused, and fails naming the tuning.
        """
        from ..tune.runtime_choice import answer, describe, tuning_key

        gpu = current_gpu()
        try:
            key, material = tuning_key(tuner, gpu.cc)
        except Exception as e:  # noqa: BLE001 (a tuner tl_aot cannot key is never answered from a record)
            what = f"TileLang's autotuner ran for {getattr(tuner, 'fn', '?')!r}, whose tuning tl_aot cannot key ({type(e).__name__}: {e})"
            if self.strict:
                raise KernelNotServed(f"tl_aot.serve: {what}") from None
            _log.warning("tl_aot.serve: %s; TileLang tunes it", what)
            return proceed()
        hit = self.tunings.get(key)
        if hit is not None:
            result = answer(tuner, hit[0].tunings[hit[1]])
            if result is not None:
                self.stats.tunings_served += 1
                return result
        if self.strict:
            try:
                return proceed()  # a kernel refused outside tuning (tunable arguments given) raises its own KernelNotServed
            except RuntimeError as e:  # every candidate refused: "Auto-tuning failed: No configuration successfully compiled ..."
                if "Auto-tuning failed" not in str(e):
                    raise
            self.stats.tunings_refused += 1
            raise KernelNotServed(tuning_message(self, material, key, gpu)) from None
        with self._lock:
            first = key not in self._warned_tunings
            self._warned_tunings.add(key)
        if first:
            _log.warning(
                "%s; TileLang's autotuner tunes it (compiling and timing each candidate)", tuning_message(self, material, key, gpu)
            )
        self.stats.tunings_run += 1
        _fallback_tunings.append(describe(material))
        try:
            return proceed()
        finally:
            _fallback_tunings.pop()


_active: Server | None = None
_lock = threading.Lock()


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
    libs = [load(f) for f in files]
    if _active is None:
        _active = Server(libs, strict=strict, capturing=capturing, cpu_time=cpu_time)
    else:
        if cpu_time:
            _active._cpu = time.thread_time
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
_fallback_tunings: list[str] = []  # tunings TileLang's autotuner runs now (not strict, not recorded): its candidates compile quietly


def _patch(tl_jit: Any) -> None:
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
            if key not in warned and not _fallback_tunings and not server.capturing:  # a tuning run is warned about once
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
    time too), entries' first use and the process's first question to the GPU apart.
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
        started.append(_load(path, strict, capturing=capturing, cpu_time=cpu_time))
        _patch(tl_jit)

    def report() -> None:
        if not started or capturing:  # under capture --serve, the capture's report counts what was served
            return
        from ..jit.code_source import source_reads

        st = started[0].stats
        print(
            f"tl_aot serve (pid {os.getpid()}): {st.served} served, {st.compiled} compiled by the JIT, {st.refused} refused; "
            f"tunings {st.tunings_served} served, {st.tunings_run} run by TileLang, {st.tunings_refused} refused; "
            f"{st.lookups} lookups in {st.lookup_s * 1e3:.1f} ms{f', {st.lookup_cpu_s * 1e3:.1f} ms of CPU' if cpu_time else ''} "
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

    on_import("tilelang.jit", start)
    atexit.register(report)


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
