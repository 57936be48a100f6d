"""CPU checks of the benchmark suite's bookkeeping (bench/): goals, report, CLI (the figures need the GPU machine)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench import goals, report  # noqa: E402

RECORDS = [
    {"section": "env", "name": "environment", "date": "2026-11-22", "gpu": "NVIDIA H100", "gpu_cc": "9.0", "torch": "2.11"},
    {"section": "launch", "name": "tl_aot", "us": 4.0, "min": 3.9, "p90": 4.2},
    {"section": "launch", "name": "jit_tvm_ffi", "us": 10.0},
    {"section": "launch", "name": "noop", "us": 0.5},
    {"section": "launch", "name": "culaunch", "us": 3.0},
    {"section": "launch", "name": "floor", "us": 3.5, "parts": {"noop": 0.5, "culaunch": 3.0}},
    {"section": "launch", "name": "jit_cython", "error": "RuntimeError: boom"},
    {"section": "throughput", "name": "gemm_f16:tl_aot", "kernel": "gemm_f16", "impl": "tl_aot", "ms": 2.0, "tflops": 550.0, "ok": True},
    {
        "section": "throughput",
        "name": "gemm_f16:jit_tvm_ffi",
        "kernel": "gemm_f16",
        "impl": "jit_tvm_ffi",
        "ms": 1.9,
        "tflops": 578.0,
        "ok": True,
    },
    {"section": "coldstart", "name": "add_one:tl_aot", "entry": "add_one", "mode": "tl_aot", "beyond_import_torch_s": 0.25, "ok": True},
    {"section": "build", "name": "serial", "s": 30.0, "jobs": 1},
    {"section": "build", "name": "parallel", "s": 15.0, "jobs": 2},
    {"section": "build", "name": "noop_rebuild", "s": 0.2, "runs": [0.2]},
]


def _by_goal(gs):
    return {(g["goal"], g["issue"]): g for g in gs}


def test_goals_are_ratios_of_one_run():
    g = _by_goal(goals.compute(RECORDS))
    assert g[("launch overhead / floor", 5)]["measured"] == round(4.0 / 3.5, 3)
    assert g[("launch overhead / floor", 5)]["ok"] is True
    assert g[("launch overhead / JIT tvm_ffi", 5)]["measured"] == 0.4
    assert g[("throughput gemm_f16 / JIT", 5)]["measured"] == round(1.9 / 2.0, 3)
    assert g[("throughput gemm_f16 / JIT", 5)]["ok"] is False
    assert g[("8192³ fp16 GEMM TFLOP/s / JIT", 2)]["ok"] is False
    assert g[("throughput gemm_bf16 / JIT", 5)]["ok"] is None  # not measured, still listed
    assert g[("cold start add_one beyond import torch (s)", 5)]["ok"] is True
    assert g[("parallel build / serial", 5)]["measured"] == 0.5
    assert g[("no-op rebuild (s)", 5)]["ok"] is True


def test_report_renders_tables_errors_and_raw_lines():
    text = report.render(RECORDS + [{"section": "goal", "name": "stale"}], ["bench.jsonl"])
    assert "NVIDIA H100" in text
    assert "| tl_aot | 4.00 |" in text
    assert "`launch` / `jit_cython`: RuntimeError: boom" in text
    assert "| gemm_f16 | tl_aot | 2.0000 | 550.0 TFLOP/s |" in text
    raw = text.split("```jsonl\n", 1)[1].split("\n```", 1)[0].splitlines()
    assert [json.loads(x) for x in raw] == RECORDS  # stored goal lines are recomputed, not kept


def test_report_later_file_wins(tmp_path):
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    a.write_text("\n".join(json.dumps(r) for r in RECORDS) + "\n")
    b.write_text(json.dumps({"section": "build", "name": "noop_rebuild", "s": 2.5}) + "\n")
    out = tmp_path / "benchmarks.md"
    assert report.main([str(a), str(b), "-o", str(out)]) == 0
    g = [line for line in out.read_text().splitlines() if line.startswith("| no-op rebuild")]
    assert g and "2.500" in g[0] and "**no**" in g[0]


def test_run_help_needs_no_gpu():
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--help"], capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    assert "--libs" in p.stdout and "coldstart" in p.stdout


def test_lookup_bench_help_names_its_workloads_and_output_but_not_its_inner_processes():
    """``python bench/lookup_cpu.py --help``, as its docstring runs it: the options a user passes, not the plumbing."""
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "lookup_cpu.py"), "--help"], capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    assert "{tileops,faithful,eager}" in p.stdout and "--json OUT" in p.stdout and "--repeat" in p.stdout
    assert "--inner" not in p.stdout and "--record" not in p.stdout


def test_sample_build_lines_are_preferred_for_build_goals():
    from bench.common import normalize

    sample = [
        normalize({"name": "full_serial", "jobs": 1, "seconds": 40.0}),
        normalize({"name": "full_parallel", "jobs": 2, "seconds": 22.0}),
        normalize({"name": "noop_rebuild", "seconds": 0.4}),
        normalize({"name": "entry", "entry": "gemm", "image_bytes": 1}),
    ]
    assert sample[0]["section"] == "build_sample" and sample[0]["s"] == 40.0
    assert sample[3]["name"] == "entry:gemm"
    g = _by_goal(goals.compute(RECORDS + sample))
    assert g[("parallel build / serial", 5)]["measured"] == 0.55
    assert g[("no-op rebuild (s)", 5)]["measured"] == 0.4
    assert "setuptools sample" in g[("parallel build / serial", 5)]["detail"]
