"""The kill sweep's bookkeeping (``bench/chaos_kills.py``, ``tests/support/chaos.py``), without a build.

What a reader of docs/reliability.md relies on: the same ``--seed`` draws the same kills however
many lanes run them; a kill is named by the stage it landed in; ``--summary`` of a sweep's lines
counts per front end, warmth and stage, and fails when any kill left damage.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import chaos_kills  # noqa: E402
from support import chaos  # noqa: E402

WEIGHTS = chaos_kills._weights(chaos_kills.WARMTH_MIX)


def test_a_seed_draws_the_same_kills_and_a_longer_sweep_extends_a_shorter_one():
    names = list(chaos_kills.ALL)
    short, long = chaos_kills.draws(42, 50, names, WEIGHTS), chaos_kills.draws(42, 200, names, WEIGHTS)
    assert short == long[:50]
    assert short != chaos_kills.draws(43, 50, names, WEIGHTS)
    assert {d.name for d in long} == set(names)
    assert {d.warmth for d in long} == set(chaos.WARMTHS)
    # a worker kill needs work on the workers: never drawn with the variants cached
    assert {d.warmth for d in long if d.name == "cluster-worker"} <= set(chaos_kills.WORKER_WARMTHS)
    assert all(0 <= d.at < 1 for d in long)


def _trial(running=(), before=(), killed=True, front_end="cli") -> chaos.Trial:
    return chaos.Trial(front_end, 0, 0.5, 1.0, killed, "", running=tuple(running), tools_before=tuple(before))


def test_a_kill_is_named_by_the_tools_running_when_it_came():
    assert _trial(killed=False).where == "finished first"
    assert _trial(["nvcc", "cicc"]).where == "nvcc"
    assert _trial(["nvcc", "ptxas", "c++", "cc1plus"]).where == "nvcc+host compile"
    assert _trial(["c++", "cc1plus"]).where == "host compile"
    assert _trial(["c++", "collect2", "ld"]).where == "link"
    # a bare compiler driver before any real work is a version probe: still the Python start
    assert _trial([], ["nvcc", "c++"]).where == "python: start, plan, lowering"
    assert _trial([], ["cicc", "ptxas"]).where == "python: between tools"
    assert _trial([], ["cc1plus", "collect2", "ld"]).where == "python: publish"
    assert _trial(["worker working"], front_end="cluster-worker").where == "worker working"


def test_summary_of_a_sweep_counts_per_front_end_warmth_and_stage_and_fails_on_damage(tmp_path):
    rows = [
        {"kill": 0, "front_end": "cli", "warmth": "cold", "killed": True, "damage": [], "where": "nvcc"},
        {"kill": 1, "front_end": "cli", "warmth": "full", "killed": False, "damage": [], "where": "finished first"},
        {"kill": 2, "front_end": "cmake", "warmth": "variant", "killed": True, "damage": [], "where": "link"},
    ]
    lines = tmp_path / "chaos.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in [{"undisturbed": "cli", "cpu_s": 1.0}, *rows]))
    cmd = [sys.executable, str(ROOT / "bench" / "chaos_kills.py"), "--summary", str(lines)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["kills"], summary["landed"], summary["damaged"]) == (3, 2, 0)
    assert summary["per_front_end"]["cli"] == {"kills": 2, "landed": 1, "damaged": 0}
    assert summary["warmths"] == {"cli:cold": 1, "cli:full": 1, "cmake:variant": 1}
    assert summary["stages"]["cmake:link"] == 1

    rows[2]["damage"] = ["libadd_one.so: next build's bytes differ from the undisturbed build's"]
    lines.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["damaged"] == 1
