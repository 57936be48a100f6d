"""Ctrl-C during a build reaches every lowering worker: each must stop quietly, the build reporting it once."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

_READ = {"x86_64": "0", "aarch64": "63"}  # the read syscall's number


def _wait_reading_stdin(pid: int, timeout: float = 60) -> None:
    """Until the worker blocks reading its stdin (its loop), not still starting up; a fixed wait where /proc cannot tell."""
    number = _READ.get(os.uname().machine)
    deadline = time.monotonic() + timeout
    while number is not None and time.monotonic() < deadline:
        try:
            fields = Path(f"/proc/{pid}/syscall").read_text().split()
        except OSError:
            break
        if fields[:2] == [number, "0x0"]:
            return
        time.sleep(0.05)
    time.sleep(3)


def test_interrupted_worker_exits_quietly():
    # The worker blocks reading its first task (as an idle worker of an interrupted build does).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    worker = subprocess.Popen(
        [sys.executable, "-m", "tl_aot.lower.lower_worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        # as a terminal's Ctrl-C finds it: a shell's background job (CI started with `&`) inherits SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    _wait_reading_stdin(worker.pid)
    worker.send_signal(signal.SIGINT)
    _, err = worker.communicate(timeout=60)
    assert "Traceback" not in err.decode(), err.decode()
    assert worker.returncode == 130
