"""``bench/examples_pool.py``: the sweep's examples a few at a time, in the sample's order, under one budget.

Fake work stands for the examples (sleeps of milliseconds, ``sleep`` processes the budget kills):
no TileLang, each test well under a second.
"""

import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.examples_pool import RunControl, Stopped, run_in_order  # noqa: E402


def _unfinished(item, why, seconds):
    return (item, why)


def test_results_come_out_in_the_items_order_as_soon_as_those_before_are_done_whatever_order_they_finish_in():
    durations = {"first": 0.0, "slow": 0.3, "quick": 0.0}
    finished, emitted = [], []

    def work(item, control):
        time.sleep(durations[item])
        finished.append(item)
        return (item, "done")

    def emit(result):
        emitted.append((result[0], list(finished)))

    out = run_in_order(list(durations), work, jobs=3, control=RunControl(), unfinished=_unfinished, emit=emit)
    assert out == [(item, "done") for item in durations]
    assert finished == ["first", "quick", "slow"] or finished == ["quick", "first", "slow"]  # finished out of order...
    assert [item for item, _ in emitted] == ["first", "slow", "quick"]  # ...came out in order
    assert "slow" not in emitted[0][1]  # "first" came out while "slow" still ran, not at the end of the run
    assert emitted[2][1][-1] == "slow"  # "quick", done long before, waited for "slow"


def test_no_more_than_jobs_items_run_at_once():
    running, peak, lock = [0], [0], threading.Lock()

    def work(item, control):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return item

    assert run_in_order(list(range(8)), work, jobs=3, control=RunControl(), unfinished=_unfinished) == list(range(8))
    assert peak[0] == 3


def test_the_budget_stops_the_running_items_and_starts_no_more_and_every_item_is_reported(tmp_path):
    start = time.monotonic()

    def work(item, control):
        control.run(["sleep", "30"], tmp_path, timeout=60)
        return (item, "done")

    emitted = []
    out = run_in_order(["a", "b", "c", "d"], work, jobs=2, control=RunControl(0.3), unfinished=_unfinished, emit=emitted.append)
    wall = time.monotonic() - start
    assert wall < 3, wall  # the sleeps were killed at the budget, not waited for
    assert [item for item, _ in out] == ["a", "b", "c", "d"] and emitted == out
    assert out[0][1].startswith("not finished: the run's budget was spent after") and out[1][1].startswith("not finished:")
    assert out[2][1].startswith("not started: the run's budget was spent after") and out[3][1].startswith("not started:")


def test_a_stopped_command_takes_its_whole_process_group_with_it(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    control = RunControl(0.5)
    script = f"sleep 30 & echo $! > {pid_file}; wait"
    try:
        control.run(["sh", "-c", script], tmp_path, timeout=60)
        raise AssertionError("the budget did not stop it")
    except Stopped as exc:
        assert "budget was spent" in str(exc)
    grandchild = int(pid_file.read_text())
    time.sleep(0.1)
    assert not _alive(grandchild)  # the sleep the shell started (as nvcc under a build) died too
    try:
        control.run(["true"], tmp_path, timeout=5)
        raise AssertionError("a command started after the budget")
    except Stopped:
        pass


def test_a_command_past_its_own_timeout_is_exit_124_and_the_run_goes_on(tmp_path):
    control = RunControl(30)
    proc = control.run(["sleep", "30"], tmp_path, timeout=0.2)
    assert proc.returncode == 124 and "timed out after 0 s: 30" in proc.stderr
    assert not control.stopped and control.run(["echo", "next"], tmp_path, timeout=5).stdout == "next\n"


def test_an_item_stopped_by_ctrl_c_style_stop_is_reported_not_finished_with_the_reason(tmp_path):
    control = RunControl()

    def work(item, ctl):
        if item == "first":
            threading.Timer(0.2, ctl.stop, args=("interrupted",)).start()
        ctl.run(["sleep", "30"], tmp_path, timeout=60)
        return (item, "done")

    out = run_in_order(["first", "second", "third"], work, jobs=2, control=control, unfinished=_unfinished)
    assert out[:2] == [("first", "not finished: interrupted"), ("second", "not finished: interrupted")]
    assert out[2] == ("third", "not started: interrupted")


def test_an_item_whose_work_fails_is_reported_with_its_error_and_the_others_go_on():
    def work(item, control):
        if item == "broken":
            raise ValueError("inspect printed no JSON")
        return (item, "done")

    out = run_in_order(["a", "broken", "c", "d"], work, jobs=1, control=RunControl(), unfinished=_unfinished)
    assert out == [("a", "done"), ("broken", "failed: ValueError: inspect printed no JSON"), ("c", "done"), ("d", "done")]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie (killed, not yet reaped by init) counts as dead
        return f.read().split()[2] != "Z"
