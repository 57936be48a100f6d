"""Lowering in worker processes: TileLang is not thread safe, so a build lowers in several processes.

Each worker (``python -m tl_aot.lower.lower_worker``) imports TileLang once and lowers the variants the
build sends it, one at a time: ``(KernelSpec, Arch)`` in, the :class:`~tl_aot.common.metadata.LoweredVariant`
as tl_aot's metadata JSON (plain Python values: no TileLang or tvm_ffi object crosses) or an error
out, as length-prefixed pickles over its stdin / stdout (a captured entry without its record's
tunings and call keys, which lowering never reads: a library's record holds thousands, and each
variant would carry them all). A worker is an ordinary
subprocess, not ``multiprocessing``: that would re-import the parent's ``__main__`` (a user's
``setup.py``). An error comes back as its class, message and fields (``entry``, ``arch``,
``location``: the user's ``file:line``, and any other plain attribute), and is raised as it was.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import queue
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from ..common.errors import LoweringError, TlAotError
from ..config.capture_ref import RecordChoices
from ..config.kernel_spec import KernelSpec
from .native_log import NATIVE_LOG_ENV, NATIVE_LOG_FILE_ENV

__all__ = ["LoweringPool", "main", "lowering_view"]

_PLAIN = (str, int, float, bool, type(None), list, tuple)


def _send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)))
    stream.write(data)
    stream.flush()


def _recv(stream):
    """The next message, or None at end of stream."""
    head = stream.read(8)
    if len(head) < 8:
        return None
    (n,) = struct.unpack("<Q", head)
    data = stream.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)  # noqa: S301 (our own parent or child, over a private pipe)


def main() -> int:
    """The worker loop: lower each task from stdin until it closes."""
    channel_in, channel_out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # prints from TileLang or kernel files must not corrupt the channel
    from ..common.metadata_json import to_json
    from .lower import lower_variant

    while (task := _recv(channel_in)) is not None:
        spec, arch = task
        try:
            reply: tuple[object, ...] = ("ok", to_json(lower_variant(spec, arch)))
        except TlAotError as e:
            state = {k: v for k, v in vars(e).items() if isinstance(v, _PLAIN)}
            reply = ("error", _sendable(type(e)), str(e), {**state, "entry": e.entry or spec.name, "arch": e.arch or arch.sm})
        except Exception as e:  # noqa: BLE001 (lower_variant wraps TileLang's; anything else is still the build's error)
            message = f"entry {spec.name!r} ({arch}): {type(e).__name__}: {e}"
            reply = ("error", LoweringError, message, {"entry": spec.name, "arch": arch.sm})
        _send(channel_out, reply)
    return 0


def lowering_view(spec: KernelSpec) -> KernelSpec:
    """``spec`` as a worker lowers it: a captured entry without its record's choices (tunings, call keys).

    They are the record's, shared by all its entries, and go into the manifest, which the build
    makes; lowering one kernel reads only the kernel. Sending them would make each variant's
    message as large as the record's choices: quadratic in a library's kernels.
    """
    ref = spec.capture
    if ref is None or not (ref.choices.tunings or ref.choices.calls):
        return spec
    return dataclasses.replace(spec, capture=dataclasses.replace(ref, choices=RecordChoices(ref.choices.record, (), ())))


def _sendable(cls: type) -> type:
    """``cls``, or its nearest base defined by tl_aot: the parent unpickles a class by importing its module."""
    return next(c for c in cls.__mro__ if issubclass(c, TlAotError) and c.__module__.startswith("tl_aot."))


def _rebuilt(cls: type[TlAotError], message: str, state: dict[str, Any]) -> TlAotError:
    """The worker's error as it was raised there: its class, message and fields (whatever its ``__init__`` takes)."""
    if not (isinstance(cls, type) and issubclass(cls, TlAotError)):
        cls = LoweringError
    err = cls.__new__(cls)
    TlAotError.__init__(err, message, **{k: state.get(k) for k in ("entry", "arch", "location")})
    err.__dict__.update(state)
    return err


class LoweringPool:
    """Up to ``size`` worker processes, started on demand and reused; :meth:`lower` is thread safe."""

    def __init__(self, size: int, *, native_log: str = "warnings") -> None:
        self.size = max(1, size)
        self.native_log = native_log  # how much of TileLang's C++ log the workers show (tl_aot.lower.native_log)
        self._idle: queue.Queue = queue.Queue()
        self._all: list[subprocess.Popen] = []
        self._logs: list[str] = []  # each worker's capture file, by start order (removed at close)
        self._lock = threading.Lock()
        self._closed = False

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ)
        # the parent's import path (tl_aot from a source tree, a build env's site-packages)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env[NATIVE_LOG_ENV] = self.native_log
        fd, log = tempfile.mkstemp(prefix="tl_aot_lowering_", suffix=".log")
        os.close(fd)
        env[NATIVE_LOG_FILE_ENV] = log
        self._logs.append(log)
        return subprocess.Popen([sys.executable, "-m", "tl_aot.lower.lower_worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def _take(self) -> subprocess.Popen:
        with self._lock:
            if self._closed:
                msg = "the lowering pool is closed"
                raise LoweringError(msg)
            if self._idle.empty() and len(self._all) < self.size:
                proc = self._start()
                self._all.append(proc)
                return proc
        return self._idle.get()

    def lower(self, spec, arch):
        """Lower one variant in a worker; raises the worker's error with its own kind and message."""
        proc = self._take()
        try:
            _send(proc.stdin, (lowering_view(spec), arch))
            reply = _recv(proc.stdout)
        except (BrokenPipeError, OSError, pickle.UnpicklingError):
            reply = None
        if reply is None:
            code = proc.poll()
            said = self._last_words(proc)
            msg = f"entry {spec.name!r} ({arch}): the lowering worker died (exit {code}) while lowering {spec.source}"
            msg += f"; its last output:\n{said}" if said else "; it wrote nothing"
            raise LoweringError(msg, entry=spec.name, arch=arch.sm)
        self._idle.put(proc)
        if reply[0] == "ok":
            from ..common.metadata import LoweredVariant
            from ..common.metadata_json import from_json

            return from_json(LoweredVariant, reply[1])
        raise _rebuilt(reply[1], reply[2], reply[3])

    def _last_words(self, proc: subprocess.Popen) -> str:
        """What a dead worker wrote to fd 2 while lowering its last variant (indented), or ''."""
        try:
            text = Path(self._logs[self._all.index(proc)]).read_text(errors="replace").strip()
        except (OSError, ValueError, IndexError):
            return ""
        return "\n".join("    " + line for line in text.splitlines()[-40:])

    def close(self, *, kill: bool = False) -> None:
        """Stop the workers: closing stdin ends them; ``kill`` for a build that failed or was interrupted."""
        with self._lock:
            self._closed = True
            procs = list(self._all)
        for p in procs:
            try:
                if kill:
                    p.kill()
                elif p.stdin is not None:
                    p.stdin.close()
            except OSError:
                pass
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in self._logs:
            Path(log).unlink(missing_ok=True)

    def __enter__(self) -> LoweringPool:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(kill=exc_type is not None)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the build says "interrupted" once
        sys.exit(130)
