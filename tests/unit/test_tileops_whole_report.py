"""The whole-library demonstration's goals table (bench/tileops_whole_report.py), read from a run's files on the CPU."""

import gzip
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.tileops_whole_report import rows, served_lines  # noqa: E402

# Exit lines as served processes print them ($TL_AOT_SERVE_CPU_TIME=1): the second traced one prim_func.
CLEAN = (
    "tl_aot serve (pid 11): 20 served, 0 compiled by the JIT, 0 refused; tunings 0 served, 0 run by TileLang, 0 refused; "
    "20 lookups in 7.3 ms, 6.0 ms of CPU, 0 passes of the cyclic collector within (0 full) (20 in 7.3 ms, 0.365 ms each by "
    "call key, 0 in 0.0 ms, 0.000 ms each by a traced prim_func; kernel sources read from disk: 3 files in 0.5 ms of them; "
    "entries' first use 7.3 ms and the GPU's first question 0.2 ms apart; 20 kernels served before TileLang traced them)"
)
TRACED = (
    "tl_aot serve (pid 12): 47 served, 0 compiled by the JIT, 6 refused; tunings 0 served, 0 run by TileLang, 0 refused; "
    "59 lookups in 159.7 ms, 119.3 ms of CPU, 6 passes of the cyclic collector within (0 full) (53 in 30.0 ms, 0.566 ms each "
    "by call key, 6 in 129.7 ms, 21.611 ms each by a traced prim_func; kernel sources read from disk: 0 files in 0.0 ms of "
    "them; entries' first use 16.0 ms and the GPU's first question 0.2 ms apart; 47 kernels served before TileLang traced them)"
)
WALL_ONLY = CLEAN.replace(", 6.0 ms of CPU, 0 passes of the cyclic collector within (0 full)", "")


def _junit(outcomes: dict[str, str]) -> bytes:
    cases = "".join(
        f'<testcase classname="tests.test_{name}" name="t">{"" if kind == "passed" else f"<{kind}/>"}</testcase>'
        for name, kind in outcomes.items()
    )
    return gzip.compress(f'<testsuites><testsuite name="pytest">{cases}</testsuite></testsuites>'.encode())


def _run(w: Path, *, served: dict[str, str], lines: str = f"{CLEAN}\n{TRACED}\n", cache: int = 0, load_ms: float = 17.7) -> None:
    """A run's folder as the script leaves it: times, logs, JUnit reports, the library and its wheels."""
    (w / "times").mkdir(parents=True)
    for step, line in {
        "capture": "capture exit 1 after 293.6 s\ncapture-rest exit 0 after 20.0 s",
        "build": "build exit 0 after 153.4 s (90a, -j 64)",
        "serve": "serve exit 1 after 87.5 s",
        "jit-warm": "jit-warm exit 1 after 86.7 s",
    }.items():
        (w / "times" / step).write_text(line + "\n")
    (w / "collected.txt").write_text("tests/test_a.py::t\ntests/test_b.py::t\n")
    (w / "complete.txt").write_text("tests/test_a.py\ntests/test_b.py\n")
    (w / "capture.log").write_text("tl_aot capture: 1777 kernels in /tmp/w/record.json (1777 new)\n")
    (w / "build.log").write_text("image packs: 1 (libx.sm_90a.tlpack); 1000 images, 1000 stored once each\n")
    (w / "serve.log").write_text(lines + "57 failed, 2841 passed in 77.33s\n")
    (w / "serve.xml.gz").write_bytes(_junit(served))
    (w / "jit-warm.xml.gz").write_bytes(_junit({"a": "passed", "b": "failure"}))
    (w / "served-facts.txt").write_text(
        f"files in the served run's TileLang cache: {cache}\nload: {load_ms} ms wall / 17.7 ms CPU\nserve: 17.4 ms wall / 17.4 ms CPU\n"
    )
    (w / "lib").mkdir()
    (w / "lib" / "libx.so").write_bytes(b"\0" * 15_000_000)
    (w / "lib" / "libx.sm_90a.tlpack").write_bytes(b"\0" * 5_000_000)
    (w / "dist").mkdir()
    (w / "dist" / "x-0.1-py3-none-any.whl").write_bytes(b"\0" * 3_000_000)
    (w / "dist" / "x_sm90a-0.1-py3-none-any.whl").write_bytes(b"\0" * 14_000_000)


def _table(w: Path) -> dict:
    return {r.figure: r for r in rows(w)}


def test_a_runs_table_reads_every_goal_from_its_files(tmp_path):
    _run(tmp_path, served={"a": "passed", "b": "error"})
    t = _table(tmp_path)
    assert t["smoke files captured, built, served"].met is True
    assert "2 of 2 files" in t["smoke files captured, built, served"].measured
    assert t["capture of the whole smoke suite"].measured.startswith("313.6 s")  # capture and capture-rest: one capture
    assert t["build of the whole capture"].goal == "<= 10 min on 64 cores" and t["build of the whole capture"].met
    wheel = t["largest wheel; installed bytes per kernel-arch"]
    assert "13.35 MiB (x_sm90a" in wheel.measured and "20.0 KB per kernel-arch" in wheel.measured and wheel.met
    assert t["tl_aot.load of the installed library"].met and t["tl_aot.serve of the installed library"].met
    # the lookup figure: the CPU time of processes that traced nothing, never the traced ones' 21 ms lookups
    lookup = t["lookup per served request"]
    assert lookup.measured.startswith("0.300 ms of CPU each (20 lookups in the 1 of 2 processes") and lookup.met is False
    assert "6 lookups traced a prim_func, 6 refused" in lookup.measured
    assert t["served suite vs TileLang's warm cache"].measured.endswith("= 1.009") and not t["served suite vs TileLang's warm cache"].met
    assert t["a second capture after one kernel changes"].measured == "not run"  # no recapture step ran
    assert t["a second capture after one kernel changes"].met is None


def test_a_test_the_jit_passes_failing_served_is_not_met(tmp_path):
    _run(tmp_path, served={"a": "failure", "b": "failure"})
    row = _table(tmp_path)["smoke files captured, built, served"]
    assert row.met is False and "(1 the JIT passes fail served)" in row.measured


def test_a_file_in_tilelangs_cache_or_a_slow_load_is_not_met(tmp_path):
    _run(tmp_path, served={"a": "passed", "b": "passed"}, cache=3, load_ms=60.5)
    t = _table(tmp_path)
    assert (
        t["smoke files captured, built, served"].met is False
        and "3 files in TileLang's cache" in t["smoke files captured, built, served"].measured
    )
    assert t["tl_aot.load of the installed library"].measured == "60.5 ms" and t["tl_aot.load of the installed library"].met is False


def test_exit_lines_without_cpu_time_are_read_by_the_wall_clock():
    cpu = served_lines(f"{CLEAN}\n{TRACED}")
    assert (cpu.processes, cpu.served, cpu.refused, cpu.lookups, cpu.traced, cpu.cpu) == (2, 67, 6, 79, 6, True)
    assert (cpu.clean_processes, cpu.clean_lookups, cpu.clean_ms) == (1, 20, 6.0)
    wall = served_lines(WALL_ONLY)
    assert wall.cpu is False and wall.clean_ms == 7.3


def test_the_scripts_report_step_prints_the_table(tmp_path):
    """``W=DIR bash bench/tileops_whole_gpu.sh report``, as docs/whole_library.md runs it: the table, also in DIR/out/goals.md."""
    _run(tmp_path, served={"a": "passed", "b": "passed"})
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    out = subprocess.run(
        ["bash", str(ROOT / "bench" / "tileops_whole_gpu.sh"), "report"], cwd=ROOT, env={**env, "W": str(tmp_path)},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert "| lookup per served request | 0.300 ms of CPU each" in out.stdout, out.stderr
    assert (tmp_path / "out" / "goals.md").read_text().startswith("| figure | measured | goal | met |")
