"""One ``python -m tl_aot build ...`` run in this process, measured: ``python bench/build_probe.py OUT.json -- BUILD ARGS``.

The build runs here (``tl_aot.frontends.cli.main``), so this process *is* the build's driver:
``getrusage(RUSAGE_SELF)`` is the driver's CPU (every thread of it), ``RUSAGE_CHILDREN`` the CPU
of everything it started and waited for (lowering workers, nvcc, cicc, ptxas, the host compiler,
the linker). A sampling thread reads ``/proc`` every ``--every`` seconds for the driver's CPU and
its live descendants', so the profile says how many cores the build kept busy in each interval
and when (e.g. a serial tail). Writes one JSON object to OUT.json; the build's own output is
kept in ``log``. Linux only (``/proc``). Imports only the standard library before the build, so
whichever tl_aot is on ``PYTHONPATH`` is the one measured (bench/build_parallelism.py runs this
file against the main branch's checkout too).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds of its own threads) for every process /proc lists now."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2 :].split()  # after the command name, which may hold spaces
        table[int(name)] = (int(rest[1]), (int(rest[11]) + int(rest[12])) / _TICK)
    return table


def _descendants_cpu(root: int) -> float:
    """CPU seconds of the live descendants of ``root`` (not ``root`` itself)."""
    table = _proc_table()
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    total, stack = 0.0, list(kids.get(root, ()))
    while stack:
        pid = stack.pop()
        total += table[pid][1]
        stack.extend(kids.get(pid, ()))
    return total


def _cpu_now() -> tuple[float, float]:
    """(driver CPU, children's CPU: waited for + still running) in seconds."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime + _descendants_cpu(os.getpid())


class Sampler(threading.Thread):
    """Samples (seconds since start, driver CPU, children CPU) every ``every`` seconds until stopped."""

    def __init__(self, every: float) -> None:
        super().__init__(daemon=True)
        self.every, self.samples, self._done = every, [], threading.Event()
        self.t0 = time.perf_counter()

    def run(self) -> None:
        while not self._done.wait(self.every):
            self.samples.append((round(time.perf_counter() - self.t0, 2), *(round(x, 2) for x in _cpu_now())))

    def stop(self) -> None:
        self._done.set()
        self.join()


def main(argv: list[str]) -> int:
    """``OUT.json [--every S] -- BUILD ARGS``."""
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != Path(here)]  # bench/'s modules never shadow a build's
    out = Path(argv[0])
    every = float(argv[argv.index("--every") + 1]) if "--every" in argv[: argv.index("--")] else 1.0
    build_args = argv[argv.index("--") + 1 :]
    log = io.StringIO()
    sampler = Sampler(every)
    t0 = time.perf_counter()
    sampler.start()
    from tl_aot.frontends.cli import main as cli

    with contextlib.redirect_stdout(log):
        code = cli(["build", *build_args])
    wall = time.perf_counter() - t0
    sampler.stop()
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = {
        "exit": code,
        "wall_s": round(wall, 2),
        "driver_cpu_s": round(me.ru_utime + me.ru_stime, 2),
        "children_cpu_s": round(kids.ru_utime + kids.ru_stime, 2),
        "samples": sampler.samples,
        "log": log.getvalue(),
    }
    out.write_text(json.dumps(result))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
