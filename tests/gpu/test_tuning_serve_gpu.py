"""Run-time autotuning on the GPU: TileLang's tuner captured, then served strictly with no compile and no timing.

A workload calls the ``@autotune`` GEMM of tests/kernels/tuned.py (TileLang's autotuner compiles and
times its 15 candidates). Captured on this GPU, built from the record, then run again strictly
served from an empty TileLang cache: the tuner is answered with the recorded choice -- the same
config, nothing compiled, no candidate timed -- and the GEMM's result is the JIT's, bit for bit.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support.helpers import run_ok, tl_aot_argv

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

KERNELS = Path(__file__).parents[1] / "kernels"

WORKLOAD = """
import json, sys
import torch
from tilelang.autotuner import tuner as tl_tuner

timed = []
real = getattr(tl_tuner.AutoTuner, "_benchmark_target", None)
if real is not None:  # every candidate TileLang times goes through it
    def counting(self, *args, **kwargs):
        timed.append(1)
        return real(self, *args, **kwargs)
    tl_tuner.AutoTuner._benchmark_target = counting

import tuned

kernel = tuned.gemm(1024, 1024, 1024)
g = torch.Generator(device="cuda").manual_seed(0)
a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16, generator=g)
b = torch.randn(1024, 1024, device="cuda", dtype=torch.float16, generator=g)
c = kernel(a, b)
torch.cuda.synchronize()
torch.save(c.cpu(), sys.argv[1])
from tl_aot.serving.active import active_server
server = active_server()
stats = vars(server.stats) if server is not None else {}
print("RESULT " + json.dumps({"type": type(kernel).__name__, "config": kernel.config, "timed": len(timed), "stats": stats}, default=str))
"""


def _run(cmd, env) -> dict:
    proc = run_ok(cmd, env=env)
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("RESULT ")), None)
    return json.loads(line[len("RESULT ") :]) if line else {"stdout": proc.stdout}


@pytest.fixture(scope="module")
def tuned_run(tmp_path_factory, cache_dir):
    """The workload under capture (TileLang's real tuner), and the library built from its record for this GPU."""
    pytest.importorskip("tilelang")
    tmp = tmp_path_factory.mktemp("tuning")
    script = tmp / "workload.py"
    script.write_text(WORKLOAD)
    record = tmp / "tuned.capture.json"
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp / "jit-cache"), PYTHONPATH=f"{KERNELS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    jit = _run(tl_aot_argv("capture", "-o", record, "--", sys.executable, script, tmp / "jit.pt"), env)
    assert jit["type"] == "JITKernel" and jit["timed"] > 1, jit  # TileLang tuned: it timed the candidates
    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}{minor}{'a' if major >= 9 else ''}"
    build = tl_aot_argv("build", "--capture", record, "--arch", arch, "-o", tmp / "lib", "--cache-dir", cache_dir)
    _run([*build, "-q"], env)
    return tmp, env, script, jit, json.loads(record.read_text())


def test_the_capture_records_the_tuners_choice(tuned_run):
    _, _, _, jit, record = tuned_run
    (t,) = record["tunings"].values()
    assert json.loads(t["config"]) == jit["config"] and t["request_key"] in record["kernels"]
    assert len(record["kernels"]) >= 2  # the candidates TileLang compiled while tuning, the chosen one among them


def test_strict_serving_answers_the_tuner_with_no_compile_and_no_timing(tuned_run):
    tmp, env, script, jit, _ = tuned_run
    empty = tmp / "served-cache"
    empty.mkdir()
    env = dict(env, TILELANG_CACHE_DIR=str(empty))
    served = _run(tl_aot_argv("run", "--serve", tmp / "lib", "--strict", "--", sys.executable, script, tmp / "served.pt"), env)
    assert served["type"] == "ServedKernel" and served["config"] == jit["config"]  # the same config chosen
    assert served["timed"] == 0  # no candidate timed
    st = served["stats"]
    assert (st["tunings_served"], st["served"], st["compiled"], st["refused"]) == (1, 1, 0, 0)
    assert torch.equal(torch.load(tmp / "jit.pt"), torch.load(tmp / "served.pt"))
    written = [p for p in empty.rglob("*") if p.is_file()]
    assert not written, f"serving wrote {written} into TileLang's cache (a compile happened)"
