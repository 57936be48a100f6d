"""Capture: record every kernel TileLang's JIT is asked to compile while any command runs.

A record (JSON) holds, per distinct request, the prim_func as TVM JSON (re-lowered at build time
without the library's code), the options (``out_idx``, pass configs, compile flags and the
contents of the headers they name, target, backend), the device it was asked for and where the
request came from. The request's **key** is a digest of the prim_func (source locations dropped)
and of those options (header paths replaced by their contents' digests): the same kernel asked
for on another machine, from another install path, has the same key. Serving matches by that key.

Under ``python -m tl_aot capture`` each process (its :class:`Capturer` installed from the
environment: :mod:`tl_aot.capture.process_hooks`) writes its own parts of the record
(:mod:`tl_aot.capture.record_writer`, :mod:`tl_aot.capture.record_parts`), merged when the command
ends: pytest-xdist's workers, a multiprocessing pool's (forked ones included) and any subprocess
add to one record. With
``capture --serve LIB`` a request a library already holds is recorded (its IR from the request,
its device code digest from the library) and answered by the library: only what the library
lacks is compiled or lowered. A request that cannot be recorded is never left out silently: a
warning names the kernel and why, and the capture's final report counts it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..call_keys.key import keyed_call
from ..common.errors import TlAotError
from ..common.fileutil import StrPath
from ..common.json_types import JsonObject
from ..common.tilelang_compat import tilelang_version
from ..gpu.cuda_driver import current_gpu, gpu_identity
from ..jit.ir_record import round_trip_problem
from ..jit.pristine_ir import pristine_ir
from ..jit.request_key import backend_kind, options_of, request_key
from ..jit.request_origin import caller_origin, jit_origin, origin_text, request_device
from ..jit.seam import CompiledStandIn, CompileRequest, Interception, JitCall, install
from ..tune.runtime_choice import chosen_index, describe, resolved_configs, spelled_config, tunables_given, tuning_key
from .device_code import jit_kernel_code, jit_target, lowered_code
from .headers import HeaderNotFound, record_headers
from .record import CaptureRecord
from .record_parts import ProcessReport, claim
from .record_writer import RecordWriter
from .source_hooks import source_hook_problem

__all__ = ["Capturer"]

#: What a kernel returned by ``capture --device`` cannot do: it was recorded, never compiled.
_NOT_RUN = (
    "tl_aot capture --device compiles nothing (no GPU is used): the kernel was recorded and the command "
    "cannot run it here; kernels compiled after this point are recorded by a capture on a GPU"
)

#: A request's device code digests: arch -> ``{sha256, tilelang, from[, target]}``.
DeviceCode = dict[str, JsonObject]


class Capturer:
    """Records compile requests into a record; ``compile_for_real`` passes them on to TileLang (a GPU run).

    ``parts``: the folder this process writes its parts and report into (set by ``capture``);
    without it, each flush merges into the record under its lock. ``held``: request key ->
    the device code a served library holds for it (``{arch: {sha256, tilelang, from}}``), or None
    when no library holds it (set by ``capture --serve``).
    """

    def __init__(self, path: StrPath, *, compile_for_real: bool = True, lower_arch: str = "", parts: StrPath | None = None) -> None:
        self.path = Path(path)
        self.compile_for_real = compile_for_real
        self.lower_arch = lower_arch  # without a GPU: lower each new request for this arch to record its device code
        self.parts = Path(parts) if parts else None
        self.writer = RecordWriter(self.path, self.parts)
        self.held: Callable[[str], DeviceCode | None] | None = None  # what capture --serve's libraries hold
        self.lowering_s = 0.0
        self.kernels: dict[str, JsonObject] = {}  # request key -> its record item
        self.tunings: dict[str, JsonObject] = {}  # tuning key -> its record item
        self.errors = 0
        self.unfaithful = 0
        self.counts = {"requests": 0, "served": 0, "compiled": 0, "lowered": 0}
        self.unrecorded: list[tuple[str, str]] = []  # (kernel, why)
        self.tunings_unrecorded: list[tuple[str, str]] = []  # (tuning, why)
        self.unkeyed: dict[tuple[str, str], None] = {}  # (@tilelang.jit function, why it has no call key), in order met
        self._checked: set[str] = set()  # keys whose round trip was checked in this process
        self._lowered: set[str] = set()  # keys lowered here for their device code
        self._lock = threading.RLock()
        self._flushed = time.monotonic()
        self._pid = os.getpid()
        self._kernel_keys: dict[
            int, tuple[Any, str]
        ] = {}  # id(kernel TileLang compiled) -> (kernel, request key): which kernel a tuner chose

    def record(self, req: CompileRequest, jit_call: JitCall | None = None) -> str:
        """Add one request; returns its key ('' when it cannot be recorded: a capture never breaks the workload).

        A request seen for the first time is checked: its stored IR must load back into the
        prim_func the JIT got (:func:`tl_aot.jit.ir_record.round_trip_problem`); if not, the item
        says why (``unfaithful``) and a warning is printed once. A request that cannot be recorded
        (a header its flags name is nowhere, IR that cannot be saved) is warned about by name
        and counted (:meth:`report`).
        """
        origin: JsonObject = {}
        try:
            origin = {**caller_origin(), **jit_origin(jit_call), "time": int(time.time())}
            self.counts["requests"] += 1
            options = options_of(req)
            text = pristine_ir(req.func)  # as first seen: TileLang's lowering renames variables in place
            key = request_key(req.func, options, text=text)
            headers, tilelang_headers = record_headers(options["compile_flags"])
            item: JsonObject = {
                "name": req.name,
                "ir": text,
                "options": options,
                "headers": headers,
                "devices": [d] if (d := request_device()) else [],
                "origins": [origin],
            }
            if tilelang_headers:
                item["tilelang_headers"] = tilelang_headers
            call, why = keyed_call(jit_call.jit, jit_call.args, jit_call.kwargs, gpu_identity()) if jit_call is not None else (None, "")
            if call:
                item["calls"] = [call]  # serving answers this @tilelang.jit call before TileLang traces it
            elif why:
                self.unkeyed.setdefault((str(origin.get("jit", req.name)), why))  # served only after TileLang traces it
            hooked = source_hook_problem()  # process state, not the request's: asked at every compile
            if hooked:
                item["unfaithful"] = hooked
                self._warn_unfaithful(req.name, hooked)
            elif key not in self._checked:
                self._checked.add(key)
                problem = round_trip_problem(req.func, text)
                if problem:
                    item["unfaithful"] = problem
                    self._warn_unfaithful(req.name, problem)
            with self._lock:
                CaptureRecord(self.path, self.kernels).merge({key: item})
            if time.monotonic() - self._flushed > 15:  # a killed workload keeps what it captured
                self.flush()
            return key
        except Exception as e:  # noqa: BLE001
            self.errors += 1
            why = str(e) if isinstance(e, HeaderNotFound) else f"{type(e).__name__}: {e}"
            if not isinstance(e, HeaderNotFound):
                traceback.print_exc()
            self._not_recorded(req, origin, why)
            return ""

    def _not_recorded(self, req: CompileRequest, origin: JsonObject, why: str) -> None:
        """Say which kernel is left out of the record and why (every time: each is a kernel a build will lack)."""
        name = getattr(req, "name", "?")
        where = origin_text({"name": name, "origins": [origin]}) if origin else f"prim_func {name!r}"
        with self._lock:
            self.unrecorded.append((where, why))
        print(
            f"tl_aot capture: warning: kernel {where} is NOT recorded: {why}. A build from this record will not hold it",
            file=sys.stderr,
            flush=True,
        )

    def record_tuning(self, tuner: Any, result: Any) -> None:
        """Add the choice TileLang's autotuner made (never raises): tuning key -> config and the chosen kernel's request key."""
        try:
            config = getattr(result, "config", None)
            if config is None:
                return  # the tunable arguments were given: nothing was tuned, the one kernel is an ordinary request
            have = self._kernel_keys.get(id(getattr(result, "kernel", None)))
            key, material = tuning_key(tuner, current_gpu().cc)
            if have is None or have[0] is not result.kernel:
                why = "its kernel was not compiled in this run (a cache of TileLang's answered?); serving will not know it"
                self.tunings_unrecorded.append((describe(material), why))
                print(f"tl_aot capture: warning: the autotuner's choice for {describe(material)} is NOT recorded: {why}", file=sys.stderr)
                return
            item = {
                "function": material["function"],
                "args": json.dumps(material["args"], separators=(",", ":"))[:400],
                "config": spelled_config(config),
                "index": chosen_index(tuner, config),
                "candidates": len(resolved_configs(tuner)),
                "request_key": have[1],
                "cc": material["cc"],
                "device": request_device().get("name", ""),
                "latency_ms": float(getattr(result, "latency", 0.0) or 0.0),
                "time": int(time.time()),
            }
            with self._lock:
                self.tunings.setdefault(key, item)
        except Exception as e:  # noqa: BLE001
            self.errors += 1
            traceback.print_exc()
            self.tunings_unrecorded.append((str(getattr(tuner, "fn", "?")), f"{type(e).__name__}: {e}"))

    def report(self) -> None:
        """At exit: under ``capture``, this process's :class:`ProcessReport` for the final report; else one line to stderr.

        The line (a capture into a record directly) says what lowering cost, and how many kernels
        were marked unfaithful or could not be recorded.
        """
        if self.parts is not None:
            with self._lock:
                try:
                    self.writer.write_report(self.process_report())
                except OSError as e:
                    print(f"tl_aot capture (pid {os.getpid()}): cannot write its report into {self.parts}: {e}", file=sys.stderr)
            return
        what = (
            f"lowered new kernels for {self.lower_arch} in {self.lowering_s:.1f} s to record their device code" if self.lowering_s else ""
        )
        bad = f"{self.unfaithful} kernel(s) marked unfaithful (a build refuses them)" if self.unfaithful else ""
        lost = f"{len(self.unrecorded)} kernel(s) NOT recorded (see the warnings above)" if self.unrecorded else ""
        if what or bad or lost:
            print(f"tl_aot capture (pid {os.getpid()}): " + "; ".join(x for x in (what, bad, lost) if x), file=sys.stderr, flush=True)

    def process_report(self) -> ProcessReport:
        """What this process did, for the capture's final report."""
        return ProcessReport(
            pid=os.getpid(),
            requests=self.counts["requests"],
            recorded=len(self._checked),
            served=self.counts["served"],
            compiled=self.counts["compiled"],
            lowered=self.counts["lowered"],
            lowering_s=round(self.lowering_s, 3),
            unfaithful=self.unfaithful,
            unrecorded=tuple(self.unrecorded),
            tunings_unrecorded=tuple(self.tunings_unrecorded),
            flush_error=self.writer.error,
            unkeyed=tuple(self.unkeyed),
        )

    def record_device_code(self, key: str, code: DeviceCode) -> None:
        """Add the device code digests (arch -> {sha256, tilelang, from[, target]}) of a recorded request."""
        if not key or not code:
            return
        with self._lock:
            item = self._held_item(key)
            for arch, c in code.items():
                item.setdefault("device_code", {}).setdefault(arch, c)

    def record_compile_time(self, key: str, seconds: float) -> None:
        """Note how long the JIT took to compile (or the capture to lower) a recorded request: ``compile_s``, in ms steps.

        The longest time seen is kept. A build lowers its longest kernels first, so that one met late in
        its plan does not run alone at the end of the build.
        """
        if not key:
            return
        with self._lock:
            item = self._held_item(key)
            item["compile_s"] = max(item.get("compile_s", 0.0), round(seconds, 3))

    def _held_item(self, key: str) -> JsonObject:
        """The item of ``key`` this process holds (call under the lock); one flushed since starts empty, merged at the next flush."""
        item = self.kernels.get(key)
        if item is None:
            item = self.kernels[key] = {"devices": [], "origins": []}
        return item

    def _warn_unfaithful(self, name: str, problem: str) -> None:
        self.unfaithful += 1
        if self.unfaithful == 1:
            print(
                f"tl_aot capture: warning: kernel {name!r} is recorded but does not rebuild into what the JIT compiled: "
                f"{problem}; a build from this record refuses it (further such kernels are marked in the record silently)",
                file=sys.stderr,
                flush=True,
            )

    def flush(self) -> int:
        """Write what was captured through :attr:`writer`: a part of the record (under ``capture``), else merged into it.

        Returns the kernels new to the record (0 for a part: the capture merges the parts at the end).
        """
        with self._lock:
            if not self.kernels and not self.tunings:
                return 0
            new = self.writer.write(self.kernels, self.tunings)
            self.kernels, self.tunings = {}, {}
            self._flushed = time.monotonic()
        return new

    def at_exit(self) -> None:
        """Flush and leave this process's report (once per process: atexit, or multiprocessing's finaliser in a fork)."""
        if getattr(self, "_exited", None) == os.getpid():
            return
        self._exited = os.getpid()
        try:
            self.flush()
        except Exception:  # noqa: BLE001 (at exit: say so, and the report says it too)
            traceback.print_exc()
        self.report()

    def forked(self) -> None:
        """In a child made by ``fork``: start empty (the parent writes what it captured itself)."""
        self._lock = threading.RLock()
        self.kernels, self.tunings = {}, {}
        self.counts = dict.fromkeys(self.counts, 0)
        self.unrecorded, self.tunings_unrecorded = [], []
        self.lowering_s, self.unfaithful, self.errors = 0.0, 0, 0
        self._checked, self._lowered = set(), set()
        self.writer.forked()

    def install(self) -> None:
        """Patch TileLang's compile in this process (now if imported, else when ``tilelang.jit`` is)."""
        from ..jit.import_hooks import on_import

        on_import("tilelang.jit", self._patch)

    def _patch(self, tl_jit: Any) -> None:
        install(Interception(self._on_request, name="capture", on_tune=self._on_tune), tl_jit)

    def _on_request(self, req: CompileRequest, jit_call: JitCall | None, proceed: Callable[[], Any]) -> Any:
        key = self.record(req, jit_call)
        held = self.held(key) if key and self.held is not None else None
        if held:
            self.record_device_code(key, held)
        cuda = backend_kind(req.execution_backend, req.target) == "cuda"
        if not self.compile_for_real:
            if held is not None and (not self.lower_arch or self.lower_arch in held):
                self.counts["served"] += 1  # the library has it for this arch: its digest is the proof, nothing to lower
            elif key and key not in self._lowered and self.lower_arch and cuda and self._claim(key):
                self._lowered.add(key)
                t0 = time.perf_counter()
                code = lowered_code(req, self.lower_arch)
                seconds = time.perf_counter() - t0
                self.lowering_s += seconds
                self.record_compile_time(key, seconds)
                self.counts["lowered"] += 1
                if code is not None:
                    made = {"sha256": code[1], "tilelang": tilelang_version(), "from": "lowered at capture"}
                    self.record_device_code(key, {code[0]: made})
            self._flush_new(key)
            return self._remember(CompiledStandIn(req, _NOT_RUN), key)
        t0 = time.perf_counter()
        kernel = proceed()  # with capture --serve: the library answers what it holds, TileLang compiles the rest
        if held is None:  # TileLang compiled it: how long, per arch, a build will take to lower it
            self.record_compile_time(key, time.perf_counter() - t0)
        code = jit_kernel_code(kernel) if cuda else None
        if code is not None:
            self.counts["compiled"] += 1
            made = {"sha256": code[1], "tilelang": tilelang_version(), "from": "JIT", "target": jit_target(kernel)}
            self.record_device_code(key, {code[0]: made})
        elif held is not None:
            self.counts["served"] += 1
        self._flush_new(key)
        return self._remember(kernel, key)

    def _claim(self, key: str) -> bool:
        """Whether this process lowers ``key`` (under ``capture``, the first process of the capture to meet it does)."""
        return self.parts is None or claim(self.parts, f"{key}.{self.lower_arch}")

    def _flush_new(self, key: str) -> None:
        """Under ``capture``, write a kernel this process has not written yet at once.

        A process killed, or ended with ``os._exit``, then loses nothing it had recorded.
        """
        if self.parts is not None and key and key not in self.writer.sent:
            try:
                self.flush()
            except OSError as e:
                print(f"tl_aot capture: warning: cannot write into {self.parts}: {e} (retried at exit)", file=sys.stderr)

    def _remember(self, kernel: Any, key: str) -> Any:
        """Note which request ``kernel`` answers (a tuner's result names its kernel, not the request)."""
        if key:
            with self._lock:
                self._kernel_keys[id(kernel)] = (kernel, key)
        return kernel

    def _on_tune(self, tuner: Any, proceed: Callable[[], Any]) -> Any:
        """One run of TileLang's autotuner: let it tune (it compiles and times every candidate), then record its choice."""
        try:
            result = proceed()
        except Exception:
            if self.compile_for_real or tunables_given(tuner):
                raise  # given its config, TileLang tuned nothing: what failed is the call itself (a stand-in used)
            _, material = tuning_key(tuner, current_gpu().cc)
            msg = (
                f"tl_aot capture --device: {describe(material)} is tuned by TileLang's autotuner at run time, which times "
                "every candidate on the GPU; a capture without one cannot record the tuner's choice. Capture this workload "
                "on the GPU (python -m tl_aot capture -o RECORD -- CMD), or give the op its config instead of tuning it"
            )
            raise TlAotError(msg) from None
        self.record_tuning(tuner, result)
        return result
