"""``python bench/examples_sweep.py`` as documented (docs/conformance.md), on a stand-in examples folder, two at once.

TileLang's examples are not part of this repository; the stand-in holds two scripts at paths of the
sweep's sample, with our own kernel. The first is written as most of TileLang's examples are
(inputs made on "cuda" first, then the kernel compiled with ``tilelang.compile`` and called):
without a GPU it records nothing as it is, so the sweep runs it again under the CUDA shim. The
second compiles first, so it records as it is. Both run at once (``-j 2``); the JSON lines and the
table keep the sample's order.
"""

from __future__ import annotations

import json
import sys

import pytest
from support.helpers import ROOT, child_env, run
from support.sweep_examples import ONLY, stand_in, write_examples

pytest.importorskip("tilelang")

CUDA_FIRST = stand_in(
    """
    x = torch.randn(1024, device="cuda")
    y = torch.empty_like(x)
    kernel = tilelang.compile(add_one(), target="cuda")
    kernel(x, y)
    torch.testing.assert_close(y, x + 1)
    """
)

COMPILE_FIRST = stand_in(
    """
    from tilelang.contrib import nvcc

    # as examples/flash_attention/example_gqa_bwd_tma_reduce.py starts: capture --device answers as its GPU
    assert nvcc.get_target_compute_version() == "9.0", nvcc.get_target_compute_version()
    kernel = tilelang.compile(add_one(), target="cuda")
    x = torch.randn(1024, device="cuda")
    """
)


def test_the_sweep_runs_two_examples_at_once_captures_builds_and_tabulates_them_in_the_samples_order(tmp_path, cache_dir):
    checkout = write_examples(tmp_path / "tilelang", CUDA_FIRST, COMPILE_FIRST)
    work, table = tmp_path / "work", tmp_path / "table.md"
    cmd = [sys.executable, "bench/examples_sweep.py", "--examples", str(checkout), "--arch", "80"]
    cmd += [*ONLY, "-j", "2", "--out", str(work), "--table", str(table)]
    proc = run(cmd, cwd=ROOT, env=child_env(cache_dir, checkout_first=True), timeout=600)
    assert proc.returncode == 0, proc.stderr
    first, second = (json.loads(line) for line in proc.stdout.splitlines()[:2])
    assert first["example"] == "elementwise/example_elementwise_add.py" and first["shim"] is True
    assert second["example"] == "norm/rms_norm.py" and second["shim"] is False
    for outcome in (first, second):
        assert outcome["captured"] == 1 and outcome["built"] == {"sm_80": 1} and outcome["left_out"] == []
        assert outcome["unfinished"] == "" and outcome["served"] == ""
    # the script stopped at its launch, told why: capture --device compiled nothing (not build-time advice)
    assert "kernel 'main' was called, but tl_aot capture --device compiles nothing" in first["script_error"]
    rows = table.read_text().splitlines()
    assert rows[2:] == ["| `elementwise/example_elementwise_add.py` | 1 (shim) | 1 |  |", "| `norm/rms_norm.py` | 1 | 1 |  |"]
    assert (work / "elementwise__example_elementwise_add" / "libcaptured.so").is_file()
    assert (work / "norm__rms_norm" / "libcaptured.so").is_file()
    assert proc.stderr.splitlines()[-1].endswith("with -j 2; 0 not finished")
