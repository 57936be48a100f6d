"""``python bench/examples_sweep.py`` as documented (docs/conformance.md), on a stand-in examples folder.

TileLang's examples are not part of this repository; the stand-in holds one script at a path of the
sweep's sample, written as most of TileLang's examples are (inputs made on "cuda" first, then the
kernel compiled with ``tilelang.compile`` and called), with our own kernel. Without a GPU it records
nothing as it is, so the sweep runs it again under the CUDA shim, builds the record and tabulates it.
"""

from __future__ import annotations

import json
import sys

import pytest
from support.helpers import KERNELS, ROOT, child_env, run

pytest.importorskip("tilelang")

EXAMPLE = f"""import sys
import torch
import tilelang

sys.path.insert(0, {str(KERNELS)!r})
from elementwise import add_one

x = torch.randn(1024, device="cuda")
y = torch.empty_like(x)
kernel = tilelang.compile(add_one(), target="cuda")
kernel(x, y)
torch.testing.assert_close(y, x + 1)
"""


def test_the_sweep_captures_a_cuda_first_example_under_the_shim_builds_it_and_tabulates_it(tmp_path, cache_dir):
    examples = tmp_path / "tilelang" / "examples"
    (examples / "elementwise").mkdir(parents=True)
    (examples / "elementwise" / "example_elementwise_add.py").write_text(EXAMPLE)
    work, table = tmp_path / "work", tmp_path / "table.md"
    cmd = [sys.executable, "bench/examples_sweep.py", "--examples", str(tmp_path / "tilelang"), "--arch", "80"]
    cmd += ["--only", "elementwise/", "--out", str(work), "--table", str(table)]
    proc = run(cmd, cwd=ROOT, env=child_env(cache_dir, checkout_first=True), timeout=600)
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout.splitlines()[0])
    assert outcome["example"] == "elementwise/example_elementwise_add.py" and outcome["shim"] is True
    assert outcome["captured"] == 1 and outcome["built"] == {"sm_80": 1} and outcome["left_out"] == []
    # the script stopped at its launch, told why: capture --device compiled nothing (not build-time advice)
    assert "kernel 'main' was called, but tl_aot capture --device compiles nothing" in outcome["script_error"]
    rows = table.read_text().splitlines()
    assert rows[2] == "| `elementwise/example_elementwise_add.py` | 1 (shim) | 1 |  |  |"
    assert (work / "elementwise__example_elementwise_add" / "libcaptured.so").is_file()
