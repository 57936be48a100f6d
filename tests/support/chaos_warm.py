"""A warm Python for kill trials: TileLang and tl_aot imported once, each build a fork of it.

A cold ``python -m tl_aot build`` spends two to three CPU seconds importing torch, TVM and
TileLang before it touches a file; a kill drawn in that span tests nothing a later kill does not
(no file is written yet), and it doubles the cost of a trial. :class:`WarmPython` starts one
server process that imports what a build imports (:data:`WARM_MODULES`) and nothing else (no
build runs in it, so no memo of a tool or a cache is filled), then forks it once per build: the
child starts a session of its own (so a group SIGKILL takes it and every tool it starts, as with
a real process), takes the build's folder, environment, argv and log, and runs the front end's
``__main__`` (``python -m tl_aot …``) or script (``python setup.py …``) as the interpreter
would. What runs after the fork is the build's own code, so every kill instant on it is one a
real build meets; cold trials (a real process) still cover the imports.

The server is single-threaded and forks only between builds; it answers each request with the
child's pid, then its exit status.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["WARM_MODULES", "WarmPython", "WarmProcess"]

#: What every build imports before its first file operation (the front ends and TileLang).
WARM_MODULES = (
    "tilelang",
    "setuptools",
    "tl_aot.frontends.cli",
    "tl_aot.frontends.setuptools",
    "tl_aot.pipeline.library",
    "tl_aot.lower.lower",
)


def _child(request: dict) -> None:
    """In the forked child: become the build (session, folder, environment, output, argv) and run it; never returns."""
    code = 1
    try:
        os.setsid()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.close(null)
        import runpy

        argv = request["argv"]
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path[0] = request["cwd"]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            script = str(Path(request["cwd"], argv[0]))
            sys.argv = [script, *argv[1:]]
            sys.path[0] = str(Path(script).parent)
            runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve() -> None:
    """The server's loop: import :data:`WARM_MODULES`, then per request line fork a build, answer its pid, then its status."""
    import importlib

    for name in WARM_MODULES:
        importlib.import_module(name)
    out = sys.stdout
    out.write(json.dumps({"ready": os.getpid()}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        out.write(json.dumps({"pid": pid}) + "\n")
        out.flush()
        _, status = os.waitpid(pid, 0)
        out.write(json.dumps({"pid": pid, "rc": os.waitstatus_to_exitcode(status)}) + "\n")
        out.flush()


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


class WarmProcess:
    """A build forked from a :class:`WarmPython`, with the part of :class:`subprocess.Popen` a trial uses."""

    def __init__(self, server: WarmPython, pid: int) -> None:
        self._server, self.pid, self.returncode = server, pid, None

    def poll(self, wait_s: float = 0.0) -> int | None:
        """The exit status, or None while the build runs (waiting up to ``wait_s`` for it)."""
        if self.returncode is None:
            self.returncode = self._server._status(self.pid, timeout=wait_s)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll(wait_s=0.5) is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(["warm build"], timeout)
        return self.returncode


class WarmPython:
    """One warm server (:func:`serve`) with ``env``; :meth:`start` forks a build from it. One build at a time."""

    def __init__(self, env: dict) -> None:
        here = str(Path(__file__).resolve().parent)
        env = dict(env, PYTHONPATH=os.pathsep.join([here, env.get("PYTHONPATH", "")]))
        cmd = [sys.executable, "-c", "import chaos_warm; chaos_warm.serve()"]
        self.proc = subprocess.Popen(
            cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1, start_new_session=True
        )
        self._buf = ""
        ready = self._line(timeout=300)
        if ready is None or "ready" not in ready:
            self.close()
            msg = "the warm Python did not start (its imports failed?)"
            raise RuntimeError(msg)
        self._busy: int | None = None

    def _line(self, timeout: float | None) -> dict | None:
        """The server's next answer, or None if none comes within ``timeout``."""
        fd = self.proc.stdout.fileno()
        end = None if timeout is None else time.monotonic() + timeout
        while "\n" not in self._buf:
            left = None if end is None else max(0.0, end - time.monotonic())
            if not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096).decode()
            if not chunk:
                msg = f"the warm Python ended (exit {self.proc.wait()})"
                raise RuntimeError(msg)
            self._buf += chunk
        line, self._buf = self._buf.split("\n", 1)
        return json.loads(line)

    def _status(self, pid: int, *, timeout: float) -> int | None:
        """The exit status of build ``pid`` (answered once: :class:`WarmProcess` keeps it), or None if none came within ``timeout``."""
        if self._busy != pid:
            msg = f"build {pid} is not the warm Python's running build"
            raise RuntimeError(msg)
        answer = self._line(timeout)
        if answer is None:
            return None
        self._busy = None
        return answer["rc"]

    def start(self, argv: list[str], *, cwd: Path, env: dict, log: Path) -> WarmProcess:
        """Fork a build: ``argv`` is what follows ``python`` (``-m tl_aot build …`` or ``setup.py build_ext …``)."""
        if self._busy is not None:
            msg = "the warm Python runs one build at a time"
            raise RuntimeError(msg)
        request = {"argv": list(argv), "cwd": str(cwd), "env": dict(env), "log": str(log)}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = self._line(timeout=60)
        if answer is None:
            msg = "the warm Python did not fork"
            raise RuntimeError(msg)
        pid = self._busy = answer["pid"]
        # The kill goes to the child's group: wait until it has one (its first act; microseconds).
        while _pgid(pid) not in (pid, None):
            time.sleep(0.001)
        return WarmProcess(self, pid)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
