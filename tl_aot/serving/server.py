"""The server: prebuilt tl_aot libraries' kernels by request key and call key, and the lookup that answers TileLang's JIT.

A :class:`Server` (made and installed in TileLang's JIT by :mod:`tl_aot.serving.active`:
``tl_aot.serve(path)``, ``$TL_AOT_SERVE``) indexes its libraries' manifest indexes. A compile
request whose key (prim_func without source locations, options, headers by content:
:func:`tl_aot.jit.request_key.request_key`) is the key of a loaded library's variant (every kernel
built from a capture, or reached through TileLang's JIT from a spec entry, records the request it
answers), on a GPU the library has an image for, is answered with a :class:`ServedKernel`: the
library's entry, called like TileLang's compiled kernel; a ``@tilelang.jit`` call whose call key
a library recorded is answered so before TileLang traces it. Any other request is a miss:
compiled by the JIT with one warning per kernel, or, ``strict``, a :class:`KernelNotServed` error
naming the kernel and the nearest prebuilt one. A different IR or different options are always a
miss: nothing else is ever served for them.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..common.arch import Arch
from ..common.errors import KernelNotServed
from ..gpu.cuda_driver import Gpu, current_gpu, current_gpu_identity, gpu_name
from ..gpu.image_select import Image, image_of, runs_on
from .misses import tuning_message

if TYPE_CHECKING:
    from ..jit.request_key import RequestKeys
    from ..jit.seam import CompileRequest, JitCall
    from ..runtime.loader import Library
    from .served_kernel import ServedKernel

# What answers a request (the seam with TileLang's JIT, the call and request keys, served kernels) is
# imported when TileLang's JIT is (:meth:`Server.prepare_lookups`: before any request can come), not by ``serve``:
# a process pays for it with TileLang's import, and a served library's start-up is its index alone.

__all__ = ["Server", "Stats", "KernelNotServed"]

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
    # passes of Python's cyclic collector that ran within the lookups, and of them full ones (read with the CPU time): a
    # full pass walks every object of the process (~80 ms after torch), wherever the allocation that set it off falls
    lookup_gc_passes: int = 0
    lookup_gc_full: int = 0
    call_lookups: int = 0  # of which by a @tilelang.jit call's key (before TileLang traces)
    call_lookup_s: float = 0.0  # their time (the rest hashed a traced prim_func: what TileLang's own cache key costs too)
    first_use_s: float = 0.0  # entries made ready on first use: the record parsed, the function found
    gpu_first_s: float = 0.0  # the process's first question to the GPU: the NVIDIA driver loaded, the device's traits read
    missed: dict[str, str] = field(default_factory=dict)  # kernel name -> key
    #: served only after TileLang traced the prim_func: ``@tilelang.jit`` function (else prim_func) -> why no call key
    #: answered it (what the key could not spell, or that no library recorded it), first reason met, at most TRACED_KEPT
    traced: dict[str, str] = field(default_factory=dict)
    #: this GPU's model, when it is none the libraries were captured on: call keys are not used on it (see answer_call)
    other_model: str = ""


class Server:
    """Prebuilt kernels by capture key, from one or more libraries."""

    def __init__(self, libraries: Iterable[Library], *, strict: bool = False, capturing: bool = False, cpu_time: bool = False) -> None:
        # tl_aot.call_keys.key.keyed_call: (key, why none), see prepare_lookups
        self._call_key: Callable[..., tuple[str | None, str]] | None = None
        # what an entry's first use builds (tl_aot.jit.seam.CompileRequest, .served_kernel.ServedKernel): see prepare_lookups
        self._kinds: tuple[type[CompileRequest], type[ServedKernel]] | None = None
        self._gpu_asked = False  # whether a lookup asked current_gpu_identity() (its first answer loads the driver)
        self._cpu: Callable[[], float] = time.thread_time if cpu_time else float  # float() is 0.0: no CPU time read
        # the collector's passes (all, full) as the last lookup began, read with the CPU time (threads looking up at once
        # may count one another's passes: a diagnostic)
        self._gc_at_lookup: tuple[int, int] | None = None
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
        self.tuning_now: list[str] = []  # tunings TileLang's autotuner runs now (not strict, not recorded): its candidates compile quietly
        self.tunings: dict[str, tuple[Library, int]] = {}  # tuning key -> (library, its index in the library's tunings)
        self.calls: dict[str, str] = {}  # call key -> request key (tl_aot.call_keys.key)
        self.captured_on: frozenset[str] = frozenset()  # the GPU models the libraries' kernels were captured on
        self._calls_answer: dict[int, bool] = {}  # device -> whether call keys answer on it (its model was captured)
        # id(JitCall) -> (function, why no call key answered it): the call's request, traced next, says if it is served
        self._unanswered: dict[int, tuple[weakref.ref[JitCall], str, str]] = {}
        self.libraries: list[Library] = []
        self.add(libraries)

    def count_cpu_time(self) -> None:
        """Read the looking-up thread's CPU time too (``stats.lookup_cpu_s``): a later ``serve`` asked for it."""
        self._cpu = time.thread_time

    def _lookup_began(self) -> tuple[float, float]:
        """A lookup's start: the wall clock, the thread's CPU time and, with it, the collector's passes so far."""
        if self._cpu is time.thread_time:
            self._gc_at_lookup = _gc_passes()
        return time.perf_counter(), self._cpu()

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

    def _call_keys(self) -> Callable[..., tuple[str | None, str]]:
        """:func:`tl_aot.call_keys.key.keyed_call`, imported (with what a first answer uses) on first use."""
        if self._call_key is None:
            from ..call_keys.key import keyed_call
            from ..common import metadata, metadata_json  # noqa: F401 (an entry's first use parses its record)

            self._call_key = keyed_call
            self._answer_kinds()
        return self._call_key

    def _answer_kinds(self) -> tuple[type[CompileRequest], type[ServedKernel]]:
        """What an entry's first use builds, imported once (an import statement run per entry costs a few microseconds)."""
        if self._kinds is None:
            from ..jit.seam import CompileRequest
            from .served_kernel import ServedKernel

            self._kinds = (CompileRequest, ServedKernel)
        return self._kinds

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
        t0, c0 = self._lookup_began()
        if not self._gpu_asked:
            t0, c0 = self._ask_gpu(t0, c0)
        gpu, identity = current_gpu_identity()
        answers = self._calls_answer.get(gpu.device)
        if answers is None:
            answers = self._calls_answer[gpu.device] = self._calls_answer_on(gpu)
        jit, args, kwargs = jit_call.jit, jit_call.args, jit_call.kwargs
        key, why = call_key(jit, args, kwargs, identity) if identity and answers else (None, "")
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
        if served is None and (key or why):
            self._note_unanswered(jit_call, why if key is None else _NOT_RECORDED if request_key is None else _NO_IMAGE)
        return served

    def _note_unanswered(self, jit_call: JitCall, why: str) -> None:
        """Keep why ``jit_call``'s key did not answer it until its traced request is looked up (:meth:`lookup`)."""
        if len(self._unanswered) >= 256:  # requests that never came (their trace failed): dropped, never grown without end
            self._unanswered.clear()
        from ..jit.request_origin import jit_name

        # a weak reference: a call whose trace failed never pins its arguments (tensors); its id, reused, is told apart
        self._unanswered[id(jit_call)] = (weakref.ref(jit_call), jit_name(jit_call.jit), why)

    def _traced_and_served(self, req: CompileRequest, jit_call: JitCall | None) -> None:
        """Count a request served only after TileLang traced it: its function and why its call did not answer it."""
        if jit_call is None:
            name, why = req.name, _NO_JIT_CALL
        else:
            from ..jit.request_origin import jit_name

            held = self._unanswered.pop(id(jit_call), None)
            name, why = (held[1], held[2]) if held is not None and held[0]() is jit_call else (jit_name(jit_call.jit), _NOT_ASKED)
        traced = self.stats.traced
        if name not in traced and len(traced) < TRACED_KEPT:
            traced[name] = why

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
        request, served_kernel = self._kinds or self._answer_kinds()
        jit, args, kwargs = jit_call.jit, jit_call.args, jit_call.kwargs
        with self._lock:
            served = self._served.get(request_key)
            if served is None:
                lib, name, _ = hit
                req = request.of(None, jit.out_idx, pass_configs=jit.pass_configs, compile_flags=jit.compile_flags, target=jit.target)
                served = self._served[request_key] = served_kernel(lib[name], name, lib, req, lambda: jit.get_tir(*args, **kwargs))
        return served

    def lookup(self, req: CompileRequest, jit_call: JitCall | None = None) -> tuple[ServedKernel | None, str]:
        """The served kernel for ``req``, or None (a miss): its key names a prebuilt image that runs on the current GPU."""
        t0, c0 = self._lookup_began()
        key = self.keys.key(req, jit_call)
        hit = self.index.get(key)
        served = None
        if hit is not None and not self._gpu_asked:
            t0, c0 = self._ask_gpu(t0, c0)
        if hit is not None and runs_on(hit[2], current_gpu_identity()[0].cc):
            with self._lock:
                served = self._served.get(key)
                if served is None:
                    lib, name, _ = hit
                    t1, c1 = time.perf_counter(), self._cpu()
                    served = self._served[key] = (self._kinds or self._answer_kinds())[1](lib[name], name, lib, req)
                    t0, c0 = self._first_use(t0, c0, t1, c1)
        self._looked_up(t0, c0)
        if served is not None and not self.capturing:
            self._traced_and_served(req, jit_call)
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
        if self._gc_at_lookup is not None:
            passes, full = _gc_passes()
            st.lookup_gc_passes += passes - self._gc_at_lookup[0]
            st.lookup_gc_full += full - self._gc_at_lookup[1]
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
        self.tuning_now.append(describe(material))
        try:
            return proceed()
        finally:
            self.tuning_now.pop()


#: the functions :attr:`Stats.traced` names (the exit line shows fewer: :func:`tl_aot.serving.active.traced_lines`)
TRACED_KEPT = 64
_NOT_RECORDED = "its call key is none the libraries recorded (captured through other calls, or a value the key reads differs)"
_NO_IMAGE = "its call key's kernel has no image for this GPU"
_NOT_ASKED = "no call key was asked for it (the libraries record none, or this GPU's model is none they were captured on)"
_NO_JIT_CALL = "compiled by tilelang.compile (or TileLang's profiler or autotuner), not by a @tilelang.jit call, which a call key spells"


def _gc_passes() -> tuple[int, int]:
    """Python's cyclic collector's passes in this process so far: all of them, and the full ones (its oldest generation's)."""
    stats = gc.get_stats()
    return sum(s["collections"] for s in stats), stats[-1]["collections"]
