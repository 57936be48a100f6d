"""Running a sweep's examples a few at a time under one whole-run budget, their results kept in the sample's order.

``bench/examples_sweep.py`` runs each example as a chain of commands (capture, build, a served
run); this module is how several chains share a machine:

* :class:`RunControl` runs every command of the sweep (an argument list, never a shell) in a
  process group of its own, under the command's own timeout and the run's budget, whichever ends
  first. When the budget is spent, or the sweep is interrupted, :meth:`RunControl.stop` kills the
  groups running (so the nvcc under a build and the Python under a capture die with them) and a
  command stopped so, or one asked for afterwards, raises :class:`Stopped`.
* :func:`run_in_order` gives ``jobs`` examples at once to ``work``; no example starts once the
  budget is spent; each result is handed to ``emit`` in the items' order, as soon as every item
  before it is done, whatever order they finish in. An example stopped by the budget, and one
  never started, is reported through ``unfinished`` with the reason: none goes missing.

No TileLang here: the unit tests drive it with fake work (``tests/unit/test_examples_pool.py``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

__all__ = ["Stopped", "RunControl", "run_in_order"]

T = TypeVar("T")
R = TypeVar("R")

_GRACE_S = 3.0  # how long a stopped group has between SIGTERM and SIGKILL


class Stopped(Exception):
    """The run was stopped (its budget spent, or interrupted) before this command could finish."""


class RunControl:
    """The whole run's budget (seconds from now, None: none) and the process groups running under it."""

    def __init__(self, budget: float | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.started = clock()
        self.deadline = None if budget is None else self.started + budget
        self.why = ""  # set once stopped: what stopped the run
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[str]] = set()

    @property
    def elapsed(self) -> float:
        """Seconds since the run started."""
        return self._clock() - self.started

    def remaining(self) -> float | None:
        """Seconds of budget left (never below 0), None without a budget."""
        return None if self.deadline is None else max(0.0, self.deadline - self._clock())

    @property
    def stopped(self) -> bool:
        """Whether the run was stopped or its budget is spent: no new command starts."""
        return bool(self.why) or self.remaining() == 0.0

    def stop(self, why: str) -> None:
        """Stop the run: every running command's process group is killed; later commands raise :class:`Stopped`."""
        with self._lock:
            self.why = self.why or why
            running = list(self._running)
        for proc in running:
            _kill_group(proc)

    def stop_reason(self) -> str:
        """Why the run stopped: the caller's words, else the budget's."""
        return self.why or f"the run's budget was spent after {self.elapsed:.0f} s"

    def run(self, cmd: Sequence[str], cwd: Path, timeout: float, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``cmd`` to its end, its ``timeout`` or the run's stop; a timeout is exit 124 with a line saying so.

        Raises :class:`Stopped` when the run is stopped before or while it runs.
        """
        if self.stopped:
            raise Stopped(self.stop_reason())
        proc = subprocess.Popen(
            list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        with self._lock:
            self._running.add(proc)
            stopped_meanwhile = bool(self.why)
        if stopped_meanwhile:  # stop() ran between the check above and the registration: it did not see this group
            _kill_group(proc)
        try:
            left = self.remaining()
            limit = timeout if left is None else min(timeout, left)
            try:
                out, err = proc.communicate(timeout=limit)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                out, err = proc.communicate()
                if limit < timeout:  # the budget ran out before the command's own timeout
                    self.stop(f"the run's budget was spent after {self.elapsed:.0f} s")
                    raise Stopped(self.stop_reason()) from None
                return subprocess.CompletedProcess(list(cmd), 124, out, err + f"\ntimed out after {timeout:.0f} s: {cmd[-1]}\n")
        finally:
            with self._lock:
                self._running.discard(proc)
        if self.why:  # killed by stop() from another thread
            raise Stopped(self.stop_reason())
        return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """End ``proc``'s process group: SIGTERM, then SIGKILL to whatever is left after a grace period."""
    pgid = proc.pid  # started with start_new_session: its own group, which outlives its leader
    for sig, wait in ((signal.SIGTERM, _GRACE_S), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        end = time.monotonic() + wait
        while time.monotonic() < end:
            proc.poll()  # reap the leader once it is dead
            if not _group_alive(pgid):
                return
            time.sleep(0.05)


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (zombies waiting for a reaper do not count)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


class _Slots(Generic[T, R]):
    """The items, the next to start, and the results so far (by index), guarded by one condition."""

    def __init__(self, items: Sequence[T]) -> None:
        self.items = items
        self.next = 0
        self.results: dict[int, R] = {}
        self.cond = threading.Condition()

    def take(self, control: RunControl) -> int | None:
        """The index of the next item to start, None when all started or the run is stopped."""
        with self.cond:
            if self.next >= len(self.items) or control.stopped:
                return None
            self.next += 1
            return self.next - 1

    def put(self, index: int, result: R) -> None:
        with self.cond:
            self.results[index] = result
            self.cond.notify_all()


def run_in_order(
    items: Sequence[T],
    work: Callable[[T, RunControl], R],
    *,
    jobs: int,
    control: RunControl,
    unfinished: Callable[[T, str, float], R],
    emit: Callable[[R], None] = lambda _r: None,
) -> list[R]:
    """``work(item, control)`` for every item, ``jobs`` at a time; the results in ``items``' order.

    ``work`` raising :class:`Stopped` (the budget spent while it ran) gives ``unfinished(item,
    "not finished: <why>", seconds)``; an item never started gives ``unfinished(item, "not
    started: <why>", 0.0)``; any other exception of ``work``, ``unfinished(item, "failed: <it>",
    seconds)``, the other items going on. ``emit`` is called from this thread with each result in order, as
    soon as it and all before it are there. Ctrl-C stops every running command, reports them as
    not finished, then raises ``KeyboardInterrupt``.
    """
    slots: _Slots[T, R] = _Slots(items)

    def worker() -> None:
        while (index := slots.take(control)) is not None:
            item, start = items[index], time.monotonic()
            try:
                result = work(item, control)
            except Stopped as exc:
                result = unfinished(item, f"not finished: {exc}", round(time.monotonic() - start, 1))
            except Exception as exc:  # noqa: BLE001 (the sweep's own fault on one item: reported, the others go on)
                result = unfinished(item, f"failed: {type(exc).__name__}: {exc}", round(time.monotonic() - start, 1))
            slots.put(index, result)

    threads = [threading.Thread(target=worker, name=f"sweep-{k}", daemon=True) for k in range(max(1, min(jobs, len(items))))]
    for t in threads:
        t.start()
    emitted, interrupted = 0, False
    try:
        while any(t.is_alive() for t in threads) or emitted < len(slots.results):
            with slots.cond:
                while emitted in slots.results:
                    emit(slots.results[emitted])
                    emitted += 1
                if not any(t.is_alive() for t in threads):
                    break
                left = control.remaining()
                slots.cond.wait(timeout=0.5 if left is None else min(0.5, left + 0.01))
            if control.remaining() == 0.0 and not control.why:
                control.stop(f"the run's budget was spent after {control.elapsed:.0f} s")
    except KeyboardInterrupt:
        interrupted = True
        control.stop("interrupted")
    for t in threads:
        t.join()
    results = [slots.results.get(k) for k in range(len(items))]
    final = [r if r is not None else unfinished(items[k], f"not started: {control.stop_reason()}", 0.0) for k, r in enumerate(results)]
    for r in final[emitted:]:
        emit(r)
    if interrupted:
        raise KeyboardInterrupt
    return final
