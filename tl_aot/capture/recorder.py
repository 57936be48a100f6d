"""Capture: record every kernel TileLang's JIT is asked to compile while any command runs.

A record (JSON) holds, per distinct request, the prim_func as TVM JSON (re-lowered at build time
without the library's code), the options (``out_idx``, pass configs, compile flags and the
contents of the headers they name, target, backend), the device it was asked for and where the
request came from. The request's **key** is a digest of the prim_func (source locations dropped)
and of those options (header paths replaced by their contents' digests): the same kernel asked
for on another machine, from another install path, has the same key. Serving matches by that key.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path

from ..common.errors import TlAotError
from ..common.tilelang_compat import tilelang_version
from ..config.options import flag_inputs
from ..gpu.cuda_driver import current_gpu, emulating, gpu_identity
from ..jit.call_key import call_key
from ..jit.ir_record import round_trip_problem
from ..jit.pristine_ir import pristine_ir
from ..jit.request_key import backend_kind, options_of, request_key
from ..jit.request_origin import caller_origin, jit_origin, request_device
from ..jit.seam import CompiledStandIn, Interception, install
from ..tune.runtime_choice import chosen_index, describe, resolved_configs, spelled_config, tuning_key
from .device_code import arch_of_cc, jit_kernel_code, jit_target, lowered_code
from .record import CaptureRecord

__all__ = ["Capturer", "install_from_env"]


class Capturer:
    """Records compile requests into a record; ``compile_for_real`` passes them on to TileLang (a GPU run)."""

    def __init__(self, path: str | os.PathLike, *, compile_for_real: bool = True, lower_arch: str = "") -> None:
        self.path = Path(path)
        self.compile_for_real = compile_for_real
        self.lower_arch = lower_arch  # without a GPU: lower each new request for this arch to record its device code
        self.lowering_s = 0.0
        self.kernels: dict = {}
        self.tunings: dict = {}
        self.errors = 0
        self.unfaithful = 0
        self._checked: set = set()  # keys whose round trip was checked in this process
        self._lowered: set = set()  # keys lowered here for their device code
        self._lock = threading.RLock()
        self._flushed = time.monotonic()
        self._kernel_keys: dict = {}  # id(kernel TileLang compiled) -> (kernel, request key): which kernel a tuner chose

    def record(self, req, jit_call=None) -> str:
        """Add one request; returns its key ('' on failure: a capture never breaks the workload).

        A request seen for the first time is checked: its stored IR must load back into the
        prim_func the JIT got (:func:`tl_aot.jit.ir_record.round_trip_problem`); if not, the item
        says why (``unfaithful``) and a warning is printed once.
        """
        try:
            options = options_of(req)
            text = pristine_ir(req.func)  # as first seen: TileLang's lowering renames variables in place
            key = request_key(req.func, options, text=text)
            headers = {p: base64.b64encode(Path(p).read_bytes()).decode() for p, _ in flag_inputs(options["compile_flags"])}
            item = {
                "name": req.name,
                "ir": text,
                "options": options,
                "headers": headers,
                "devices": [d] if (d := request_device()) else [],
                "origins": [{**caller_origin(), **jit_origin(jit_call), "time": int(time.time())}],
            }
            call = call_key(*jit_call, gpu_identity()) if jit_call is not None else None
            if call:
                item["calls"] = [call]  # serving answers this @tilelang.jit call before TileLang traces it
            if key not in self._checked:
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
        except Exception:  # noqa: BLE001
            self.errors += 1
            traceback.print_exc()
            return ""

    def record_tuning(self, tuner, result) -> None:
        """Add the choice TileLang's autotuner made (never raises): tuning key -> config and the chosen kernel's request key."""
        try:
            config = getattr(result, "config", None)
            if config is None:
                return  # the tunable arguments were given: nothing was tuned, the one kernel is an ordinary request
            have = self._kernel_keys.get(id(getattr(result, "kernel", None)))
            key, material = tuning_key(tuner, current_gpu().cc)
            if have is None or have[0] is not result.kernel:
                print(
                    f"tl_aot capture: the autotuner's choice for {describe(material)} is not recorded: its kernel was not "
                    "compiled in this run (a cache of TileLang's answered?); serving will not know it",
                    file=sys.stderr,
                )
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
        except Exception:  # noqa: BLE001
            self.errors += 1
            traceback.print_exc()

    def report(self) -> None:
        """One line to stderr at exit when the capture lowered kernels (what the device code digests cost) or found unfaithful ones."""
        if self.lowering_s or self.unfaithful:
            what = f"lowered new kernels for {self.lower_arch} in {self.lowering_s:.1f} s to record their device code"
            what = what if self.lowering_s else ""
            bad = f"{self.unfaithful} kernel(s) marked unfaithful (a build refuses them)" if self.unfaithful else ""
            print(f"tl_aot capture (pid {os.getpid()}): " + "; ".join(x for x in (what, bad) if x), file=sys.stderr, flush=True)

    def record_device_code(self, key: str, code: dict) -> None:
        """Add the device code digests (arch -> {sha256, tilelang, from[, target]}) of a recorded request."""
        if not key or not code:
            return
        with self._lock:
            item = self.kernels.get(key)
            if item is None:  # flushed since: merged into the file with the next flush
                item = self.kernels[key] = {"devices": [], "origins": []}
            for arch, c in code.items():
                item.setdefault("device_code", {}).setdefault(arch, c)

    def _warn_unfaithful(self, name: str, problem: str) -> None:
        self.unfaithful += 1
        if self.unfaithful == 1:
            print(
                f"tl_aot capture: warning: kernel {name!r} is recorded but its IR does not rebuild into what the JIT compiled: "
                f"{problem}; a build from this record refuses it (further such kernels are marked in the record silently)",
                file=sys.stderr,
                flush=True,
            )

    def flush(self) -> int:
        """Merge what was captured into the record file (under a lock: several processes may capture). Returns new kernels."""
        if not self.kernels and not self.tunings:
            return 0
        from ..common.fileutil import exclusive_lock

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, exclusive_lock(self.path.with_name(self.path.name + ".lock")):
            rec = CaptureRecord.load(self.path, missing_ok=True)
            new = rec.merge(self.kernels, self.tunings)
            rec.save()
            self.kernels, self.tunings = {}, {}
            self._flushed = time.monotonic()
        return new

    def install(self) -> None:
        """Patch TileLang's compile in this process (now if imported, else when ``tilelang.jit`` is)."""
        from ..jit.import_hooks import on_import

        on_import("tilelang.jit", self._patch)

    def _patch(self, tl_jit) -> None:
        install(Interception(self._on_request, name="capture", on_tune=self._on_tune), tl_jit)

    def _on_request(self, req, jit_call, proceed):
        key = self.record(req, jit_call)
        if not self.compile_for_real:
            if key and key not in self._lowered and self.lower_arch and backend_kind(req.execution_backend, req.target) == "cuda":
                self._lowered.add(key)
                t0 = time.perf_counter()
                code = lowered_code(req, self.lower_arch)
                self.lowering_s += time.perf_counter() - t0
                if code is not None:
                    made = {"sha256": code[1], "tilelang": tilelang_version(), "from": "lowered at capture"}
                    self.record_device_code(key, {code[0]: made})
            return self._remember(CompiledStandIn(req), key)
        kernel = proceed()
        code = jit_kernel_code(kernel) if backend_kind(req.execution_backend, req.target) == "cuda" else None
        if code is not None:
            made = {"sha256": code[1], "tilelang": tilelang_version(), "from": "JIT", "target": jit_target(kernel)}
            self.record_device_code(key, {code[0]: made})
        return self._remember(kernel, key)

    def _remember(self, kernel, key: str):
        """Note which request ``kernel`` answers (a tuner's result names its kernel, not the request)."""
        if key:
            with self._lock:
                self._kernel_keys[id(kernel)] = (kernel, key)
        return kernel

    def _on_tune(self, tuner, proceed):
        """One run of TileLang's autotuner: let it tune (it compiles and times every candidate), then record its choice."""
        try:
            result = proceed()
        except Exception:
            if self.compile_for_real:
                raise
            _, material = tuning_key(tuner, current_gpu().cc)
            msg = (
                f"tl_aot capture --device: {describe(material)} is tuned by TileLang's autotuner at run time, which times "
                "every candidate on the GPU; a capture without one cannot record the tuner's choice. Capture this workload "
                "on the GPU (python -m tl_aot capture -o RECORD -- CMD), or give the op its config instead of tuning it"
            )
            raise TlAotError(msg) from None
        self.record_tuning(tuner, result)
        return result


#: Contexts entered for the whole process (kept alive: a collected generator would undo them).
_held: list = []


def _enter(ctx) -> None:
    ctx.__enter__()
    _held.append(ctx)


def install_from_env() -> Capturer | None:
    """In a process started by ``python -m tl_aot capture``: capture into ``$TL_AOT_CAPTURE`` until exit.

    With ``$TL_AOT_CAPTURE_DEVICE`` (a device profile) nothing is compiled (there may be no GPU):
    device queries answer as that GPU and each compile returns a stand-in. Each new request is
    then lowered by TileLang for that GPU's arch to record its device code digest (about the
    build's own lowering time per kernel; ``$TL_AOT_CAPTURE_LOWER=0`` skips it, and the build
    then has no digest to prove its device code against).
    """
    import atexit

    from ..jit.import_hooks import on_import

    path = os.environ.get("TL_AOT_CAPTURE")
    if not path:
        return None
    device = os.environ.get("TL_AOT_CAPTURE_DEVICE", "")
    cap = Capturer(path, compile_for_real=not device)
    # a tuning must run to be recorded: TileLang's own tuning cache would answer it unseen
    os.environ.setdefault("TILELANG_AUTO_TUNING_DISABLE_CACHE", "1")
    if device:
        from ..gpu.device import _emulate_tilelang, _emulate_torch, find_profile, traits_of

        profile = find_profile(device)
        _enter(emulating(profile.cc, traits_of(profile)))
        if os.environ.get("TL_AOT_CAPTURE_LOWER", "1") != "0":
            cap.lower_arch = arch_of_cc(profile.cc)
        on_import("torch", lambda _m: _enter(_emulate_torch(profile)))
        on_import("tilelang.carver.arch.driver.cuda_driver", lambda _m: _enter(_emulate_tilelang(profile)))
    cap.install()
    atexit.register(cap.report)
    atexit.register(cap.flush)  # runs first: atexit calls in reverse order
    return cap
