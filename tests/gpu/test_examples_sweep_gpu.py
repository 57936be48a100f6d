"""``python bench/examples_sweep.py --device gpu --serve`` as docs/conformance.md gives it to the GPU machine, on stand-ins.

Two stand-in examples at paths of the sweep's sample, with our own kernel, run at once (``-j 2``)
under a budget: each is captured on the GPU (run to its end, its own check passing), built for the
GPU's own arch, then run again served strictly. The first needs only what it compiled when
captured: its served run passes with 0 compiles seen. The second asks, only when served, for a
kernel it never compiled before: strict serving refuses it, the run fails, and the table says so,
with the miss counted.
"""

from __future__ import annotations

import json
import sys

import pytest
from support.helpers import ROOT, child_env, run
from support.sweep_examples import ONLY, stand_in, write_examples

from tl_aot.serving.server import _NO_JIT_CALL

pytestmark = pytest.mark.gpu

SERVED_WHOLE = stand_in(
    """
    x = torch.randn(4096, device="cuda")
    y = torch.empty_like(x)
    tilelang.compile(add_one(), target="cuda")(x, y)
    torch.testing.assert_close(y, x + 1)
    print("All checks pass.")
    """
)

NEEDS_MORE_WHEN_SERVED = stand_in(
    """
    x = torch.randn(4096, device="cuda")
    y = torch.empty_like(x)
    block = 128 if os.environ.get("TL_AOT_SERVE") else 256  # a kernel the captured run never compiled
    tilelang.compile(add_one(block=block), target="cuda")(x, y)
    torch.testing.assert_close(y, x + 1)
    """,
    imports=("os",),
)


def test_the_gpu_sweep_captures_builds_for_the_gpu_and_serves_each_example_strictly_in_one_invocation(tmp_path, cache_dir):
    checkout = write_examples(tmp_path / "tilelang", SERVED_WHOLE, NEEDS_MORE_WHEN_SERVED)
    work, table = tmp_path / "work", tmp_path / "table.md"
    cmd = [sys.executable, "bench/examples_sweep.py", "--examples", str(checkout), "--device", "gpu", "--serve"]
    cmd += [*ONLY, "-j", "2", "--budget", "450", "--timeout", "300"]
    cmd += ["--out", str(work), "--table", str(table)]
    proc = run(cmd, cwd=ROOT, env=child_env(cache_dir, checkout_first=True), timeout=600)
    assert proc.returncode == 0, proc.stderr
    whole, more = (json.loads(line) for line in proc.stdout.splitlines()[:2])
    arch = next(iter(whole["built"]))  # the GPU's own, e.g. sm_90a on an H100 or H200
    for outcome in (whole, more):
        assert outcome["captured"] == 1 and outcome["built"] == {arch: 1} and outcome["script_error"] == "", outcome
        assert outcome["gpu"] is True and outcome["unfinished"] == ""
    assert whole["served"] == "pass" and whole["served_kernels"] == 1 and whole["served_misses"] == 0
    assert whole["tilelang_compiles"] == 0
    assert more["served"] == "exit 1" and more["served_misses"] == 1 and "KernelNotServed" in more["served_error"], more
    assert more["tilelang_compiles"] == 0  # refused, not compiled
    # tilelang.compile of a prim_func the example built: no @tilelang.jit call to key, looked up by its prim_func
    assert [(o["call_lookups"], o["traced_lookups"]) for o in (whole, more)] == [(0, 1), (0, 1)]
    # the served run names it, and why (a refused request is a miss, not named)
    assert [w.split(": ", 1)[1] for w in whole["traced_why"]] == [_NO_JIT_CALL] and more["traced_why"] == [], whole
    rows = table.read_text().splitlines()
    head = f"| example | captured | built {arch} | served run | compiles while served | lookups: by call key / traced | left out / why |"
    assert rows[0] == head
    assert rows[2] == f"| `elementwise/example_elementwise_add.py` | 1 | 1 | pass | 0 | 0 / 1 (traced: {whole['traced_why'][0]}) |  |"
    assert rows[3].startswith("| `norm/rms_norm.py` | 1 | 1 | exit 1 | 1 not served, 0 compiled by TileLang | 0 / 1 | served run: ")
