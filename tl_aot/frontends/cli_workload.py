"""The commands that run the user's workload under a hook: ``capture``, ``run --serve`` and ``verify``.

Each takes the command to run after ``--`` and starts it with tl_aot's start-up hook on
``PYTHONPATH`` (:mod:`tl_aot.serving.startup`): ``capture`` records what its TileLang JIT compiles,
``run`` answers those compiles from libraries, ``verify`` captures a workload (or reads a record)
and checks a library holds what it asked for. :mod:`tl_aot.frontends.cli` dispatches to them.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..capture.record import CaptureRecord
from ..capture.record_parts import PARTS_ENV, capture_summary, merge_parts, parts_dir
from ..common.errors import TlAotError
from ..common.why_listing import why_lines
from ..gpu.device import find_profile
from ..runtime.manifest_file import index_of_file, manifest_of_file
from ..serving.startup import environment
from ..serving.verify import report, verify

__all__ = ["cmd_capture", "cmd_run", "cmd_verify"]


def _command(args, what: str) -> list:
    """The workload's command line, given after ``--``; none is an error naming how to give one."""
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        msg = f"{what}: give the command to run after --, e.g. python -m tl_aot {what} ... -- python -m pytest tests"
        raise TlAotError(msg)
    return cmd


class WorkloadNotStarted(Exception):
    """The command after ``--`` could not be started (not found, not executable): ``status`` is 127 or 126, as ``env``'s."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _start(cmd: list, env: dict[str, str], verb: str) -> int:
    """Run the workload ``cmd`` to its end: its exit status. :class:`WorkloadNotStarted` when it cannot be started.

    An error about anything else (a file the command never got to) is raised as it is.
    """
    try:
        return subprocess.call(cmd, env=env)
    except (FileNotFoundError, PermissionError, NotADirectoryError) as e:
        if e.filename != cmd[0]:
            raise
        found = isinstance(e, PermissionError)
        why = "not executable (no permission to run it)" if found else "no such command (not a file, nor found on PATH)"
        raise WorkloadNotStarted(f"tl_aot {verb}: cannot run {cmd[0]}: {why}", 126 if found else 127) from None


def cmd_capture(args, verb: str = "capture") -> int:
    """Run the command with the capture hook (each process writing parts), merge the parts, report what it did.

    Exits with the command's status; 1 when the command succeeded but a kernel could not be
    recorded (``--keep-going``: the command's status, the kernels still listed).
    """
    cmd = _command(args, verb)
    record = Path(args.output).resolve()
    parts = parts_dir(record)
    if parts.is_dir():  # a capture killed before its merge left them: they are this record's too
        left = merge_parts(record)
        if left.parts:
            print(f"tl_aot capture: merged {left.parts} part(s) an earlier capture of {record.name} left unmerged", file=sys.stderr)
    before = len(CaptureRecord.load(record, missing_ok=True).kernels)
    parts.mkdir(parents=True, exist_ok=True)
    extra = {"TL_AOT_CAPTURE": str(record), PARTS_ENV: str(parts)}
    if args.device:
        extra["TL_AOT_CAPTURE_DEVICE"] = find_profile(args.device).name
    serve = getattr(args, "serve", None)
    if serve:
        extra["TL_AOT_SERVE"] = str(_served_libraries(serve, "capture"))
        extra["TL_AOT_SERVE_STRICT"] = "0"
    t0 = time.monotonic()
    try:
        code = _start(cmd, environment(extra), verb)
    finally:  # interrupted too: what the processes wrote is kept
        merged = merge_parts(record)
    print(
        f"tl_aot capture: {merged.kernels} kernels in {record} ({merged.kernels - before} new); the command exited with {code}", flush=True
    )
    print(capture_summary(merged.reports, time.monotonic() - t0, serve), flush=True)
    unrecorded = [x for r in merged.reports for x in r.unrecorded]
    for what, items in (("kernel", unrecorded), ("autotuner choice", [x for r in merged.reports for x in r.tunings_unrecorded])):
        if items:
            print(f"tl_aot capture: {len(items)} {what}(s) NOT recorded (a build from this record will not hold them):", file=sys.stderr)
            for name, why in items:
                print(f"  {name}: {why}", file=sys.stderr)
    _say_unkeyed(merged.reports)
    if unrecorded and code == 0 and not getattr(args, "keep_going", False):
        print("tl_aot capture: failing: kernels were left out of the record (--keep-going accepts that)", file=sys.stderr)
        return 1
    return code


#: How many functions the capture names when it says which calls have no call key (the rest are counted).
_UNKEYED_SHOWN = 8


def _say_unkeyed(reports) -> None:
    """Name the ``@tilelang.jit`` functions whose calls were recorded with no call key, and what their key could not spell.

    Such a call is still served, exactly, but only after TileLang has traced its prim_func (a few
    ms to tens of ms a lookup, where a call key costs a fraction of one): worth knowing when a
    library is served in latency-bound processes.
    """
    seen = dict.fromkeys(x for r in reports for x in r.unkeyed)
    if not seen:
        return
    functions = len({name for name, _ in seen})
    print(
        f"tl_aot capture: {functions} @tilelang.jit function(s) called with no call key (served, such a call is looked up "
        "only after TileLang traces its prim_func; docs/guide/capture.md says what a call key spells); what each could not spell:",
        file=sys.stderr,
    )
    for line in why_lines(seen, _UNKEYED_SHOWN):
        print(line, file=sys.stderr)


def _served_libraries(where: str, verb: str) -> Path:
    """The tl_aot libraries ``run --serve`` / ``capture --serve`` name (a ``lib*.so`` or a folder of them), checked.

    Each is checked here, before the command starts, as loading checks it (:func:`index_of_file`:
    the file, its index's digest and ABI), and tvm-ffi must be installed: a program that never
    imports TileLang would otherwise exit 0 as if served, and one that does would stop in its
    start-up hook. Neither loaded nor its whole manifest parsed: that cost the command seconds
    (tvm-ffi's import imports torch) before its first line, and each process loads what it serves.
    """
    if importlib.util.find_spec("tvm_ffi") is None:
        msg = f"{verb} --serve needs apache-tvm-ffi in the command's environment: pip install apache-tvm-ffi"
        raise TlAotError(msg)
    path = Path(where)
    if path.is_dir():
        files = sorted(path.glob("lib*.so"))
        if not files:
            msg = f"{verb} --serve {where}: the folder holds no tl_aot library (lib*.so)"
            raise TlAotError(msg)
    elif path.is_file():
        files = [path]
    else:
        msg = f"{verb} --serve {where}: no such library or folder"
        raise TlAotError(msg)
    for f in files:
        index_of_file(f)
    return path.resolve()


def cmd_run(args) -> int:
    """Run the command with TileLang's JIT served from the libraries (checked first: they must load)."""
    cmd = _command(args, "run")
    extra = {"TL_AOT_SERVE": str(_served_libraries(args.serve, "run")), "TL_AOT_SERVE_STRICT": "1" if args.strict else "0"}
    return _start(cmd, environment(extra), "run")


def cmd_verify(args) -> int:
    """Check the library's variants against the requests of a workload (run now, or a record)."""
    path = Path(args.library)
    files = sorted(path.glob("lib*.so")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        msg = f"verify: {path} is not a tl_aot library or a folder holding some"
        raise TlAotError(msg)
    manifests = [(f.name, manifest_of_file(f)) for f in files]  # read, not loaded: no tvm-ffi, no torch
    if args.record:
        if args.cmd:
            msg = "verify: give either --record RECORD or a command after --, not both"
            raise TlAotError(msg)
        kernels = CaptureRecord.load(args.record).kernels
    else:
        with tempfile.TemporaryDirectory(prefix="tl_aot_verify_") as tmp:
            args.output = str(Path(tmp) / "requests.json")
            code = cmd_capture(args, "verify")  # a workload that cannot start ends verify as it ends capture
            if code != 0:
                print(f"tl_aot verify: the workload exited with {code}; checking what it asked for before that", file=sys.stderr)
            kernels = CaptureRecord.load(args.output, missing_ok=True).kernels
    text, passed = report(verify(manifests, kernels), allow_unreached=args.allow_unreached)
    print(text)
    return 0 if passed else 1
