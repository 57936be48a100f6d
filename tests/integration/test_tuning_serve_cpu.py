"""Run-time autotuning captured, built and served, on the CPU (an H100 profile answers device queries).

Timing candidates needs a GPU, so TileLang's tuning here is a stand-in at the one place it runs
(``AutoTuner.run``, behind tl_aot's seam): it compiles the candidates the way TileLang does (through
the tuner's own compile function, so capture and serving see each request) and picks one. Everything
around it is real: the capture records the choice, ``build --capture`` ships it, a fresh process
serves ``tuned.gemm`` strictly with TileLang's tuner never running and nothing compiled.
tests/gpu/test_tuning_serve_gpu.py does the same with TileLang's real tuner on the GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.helpers import tl_aot_cli

pytest.importorskip("tilelang")

KERNELS = Path(__file__).parents[1] / "kernels"
TARGET = '{"kind": "cuda", "arch": "sm_90a"}'  # no GPU to detect: the target TileLang resolves on an H100
CHOSEN = 5  # the candidate the stand-in tuner picks (TileLang would pick the fastest)

#: The stand-in for TileLang's AutoTuner.run: compile candidates as TileLang's run does, then choose.
FAKE_TUNER = """
def fake_run(tuner, *args, **kwargs):
    from tilelang.autotuner.param import AutotuneResult
    from tl_aot.tune.runtime_choice import config_args, resolved_configs
    kernels = {}
    for i, config in enumerate(resolved_configs(tuner)):
        if MODE == "choose" and i != CHOSEN:
            continue  # compiling one candidate is enough to record a choice (and keeps the test fast)
        try:
            kernels[i] = tuner.jit_compile(**config_args(tuner, config))
        except Exception:  # noqa: BLE001 (TileLang's run skips a candidate that fails to compile)
            pass
    if not kernels:
        raise RuntimeError("Auto-tuning failed: No configuration successfully compiled and passed benchmarking/validation.")
    FAKE_RUNS.append(len(kernels))
    i = CHOSEN if CHOSEN in kernels else min(kernels)
    return AutotuneResult(latency=0.25, config=resolved_configs(tuner)[i], kernel=kernels[i])
"""


def _env() -> dict:
    return dict(os.environ, TILELANG_DEFAULT_TARGET=TARGET, PYTHONPATH=f"{KERNELS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> Path:
    """A capture of ``tuned.gemm(512, 512, 512)``, tuned (by the stand-in) to candidate CHOSEN."""
    path = tmp_path_factory.mktemp("capture") / "tuned.capture.json"
    script = f"""
import sys
from tl_aot.jit import seam as jit_seam
from tl_aot.capture.recorder import Capturer
from tl_aot.gpu.device import emulate, find_profile
MODE, CHOSEN, FAKE_RUNS = "choose", {CHOSEN}, []
{FAKE_TUNER}
cap = Capturer({str(path)!r}, compile_for_real=False)
with emulate(find_profile("H100-SXM")):
    import tuned
    with jit_seam.intercepting(jit_seam.Interception(cap._on_request, on_tune=cap._on_tune)):
        jit_seam._real["run"] = fake_run
        tuned.gemm(512, 512, 512)
cap.flush()
print("runs", FAKE_RUNS, "errors", cap.errors)
"""
    out = subprocess.run([sys.executable, "-c", script], env=_env(), capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "runs [1] errors 0" in out.stdout, out.stdout + out.stderr
    return path


def _tuned_kernels():
    """``tests/kernels/tuned.py``, imported here to read its candidate configs."""
    sys.path.insert(0, str(KERNELS))
    try:
        import tuned
    finally:
        sys.path.pop(0)
    return tuned


def test_the_record_holds_the_tuners_choice_and_its_kernel(record):
    tuned = _tuned_kernels()
    data = json.loads(record.read_text())
    (key, t), *rest = data["tunings"].items()
    assert not rest and len(key) == 32
    assert t["function"] == "tuned.gemm" and t["index"] == CHOSEN and t["candidates"] == len(tuned._configs())
    assert json.loads(t["config"]) == tuned._configs()[CHOSEN]
    assert t["request_key"] in data["kernels"] and t["cc"] == "90" and t["latency_ms"] == 0.25
    assert data["kernels"][t["request_key"]]["origins"][0]["args"]["block_M"] == str(tuned._configs()[CHOSEN]["block_M"])


@pytest.fixture(scope="module")
def served_lib(record, tmp_path_factory, cache_dir) -> Path:
    out = tmp_path_factory.mktemp("served")
    proc = tl_aot_cli("build", "--capture", record, "--arch", "90a", "--name", "tuned_served", "-o", out, "--cache-dir", cache_dir, "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out / "libtuned_served.so"


def test_the_library_ships_the_tuning(served_lib, record):
    import tl_aot

    lib = tl_aot.load(served_lib)
    (t,) = lib.manifest.tunings
    recorded = json.loads(record.read_text())["tunings"]
    assert t.key in recorded and t.index == CHOSEN and t.request_key == lib.manifest.entries[0].capture_key
    from tl_aot.frontends.cli import describe

    text = describe(lib.manifest)  # what inspect prints
    assert "run-time tunings served: 1" in text and f"tuned.gemm([[512,512,512],[]]) on sm_90: candidate {CHOSEN + 1}/15" in text


SERVE = """
import json, logging, sys
import tl_aot
from tl_aot.jit import seam as jit_seam
from tl_aot.gpu.device import emulate, find_profile
MODE, CHOSEN, FAKE_RUNS = "all", -1, []
{fake}
def no_tuning(tuner, *a, **kw):
    raise AssertionError("TileLang's tuner ran")
if not {strict}:  # what serving passes on to TileLang's JIT gets a stand-in here (nvcc would take minutes)
    jit_seam.install(jit_seam.Interception(lambda req, call, proceed: jit_seam.CompiledStandIn(req), name="no-compile"))
server = tl_aot.serve({lib!r}, strict={strict})
out = {{}}
with emulate(find_profile("H100-SXM")):
    import tuned
    jit_seam._real["run"] = no_tuning
    kernel = tuned.gemm(512, 512, 512)
    again = tuned.gemm(512, 512, 512)
    out["first"] = dict(type=type(kernel).__name__, config=kernel.config, same=again is kernel, entry=kernel.entry)
    out["after_first"] = vars(server.stats).copy()
    jit_seam._real["run"] = fake_run
    try:
        other = tuned.gemm(256, 256, 256)
        out["other"] = type(other).__name__
    except Exception as e:
        out["other_error"] = (type(e).__name__, str(e))
out["stats"] = vars(server.stats)
out["fake_runs"] = FAKE_RUNS
print(json.dumps(out, default=str))
"""


def _serve(lib: Path, strict: bool) -> tuple[dict, str]:
    script = SERVE.format(fake=FAKE_TUNER, lib=str(lib), strict=strict)
    proc = subprocess.run([sys.executable, "-c", script], env=_env(), capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def test_strict_serving_answers_the_tuner_with_the_recorded_kernel_and_refuses_another_tuning(served_lib):
    tuned = _tuned_kernels()
    out, _ = _serve(served_lib, strict=True)
    first = out["first"]
    assert first["type"] == "ServedKernel" and first["same"] and first["config"] == tuned._configs()[CHOSEN]
    st = out["after_first"]
    assert (st["tunings_served"], st["served"], st["compiled"], st["refused"]) == (1, 1, 0, 0)
    kind, msg = out["other_error"]  # another shape: no recorded tuning; every candidate refused, then one clear error
    assert kind == "KernelNotServed"
    assert "TileLang's autotuner was asked to tune tuned.gemm([[256,256,256],[]]) over 15 configs on sm_90" in msg
    assert "the libraries hold 1 tuning(s) of that function" in msg and "Capture a run that tunes it" in msg
    assert out["stats"]["tunings_refused"] == 1 and out["stats"]["refused"] == len(tuned._configs())
    assert out["stats"]["compiled"] == 0 and out["fake_runs"] == []


def test_non_strict_serving_warns_once_and_lets_tilelang_tune(served_lib):
    tuned = _tuned_kernels()
    out, err = _serve(served_lib, strict=False)
    assert out["first"]["type"] == "ServedKernel" and out["after_first"]["tunings_served"] == 1
    assert out["other"] == "CompiledStandIn"  # TileLang's tuner (the stand-in) ran and chose
    n = len(tuned._configs())
    assert out["fake_runs"] == [n] and out["stats"]["tunings_run"] == 1 and out["stats"]["compiled"] == n
    assert err.count("TileLang's autotuner tunes it") == 1, err  # one warning for the tuning...
    assert "compiling it with TileLang's JIT" not in err  # ...none per candidate


def test_run_serve_loads_the_library_when_tilelang_is_imported(served_lib):
    probe = (
        "import sys; before = 'tl_aot.runtime.loader' in sys.modules; import tilelang\n"
        "from tl_aot.serving.active import active_server; s = active_server()\n"
        "print(before, [lib.path.name for lib in s.libraries], len(s.tunings))"
    )
    # $TL_AOT_SERVE_CPU_TIME: the exit line gives the lookups' CPU time beside their wall clock, and the collector's passes
    proc = tl_aot_cli(
        "run", "--serve", served_lib, "--strict", "--", sys.executable, "-c", probe, env={**_env(), "TL_AOT_SERVE_CPU_TIME": "1"}
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[0] == "False ['libtuned_served.so'] 1"
    assert "tl_aot serve (pid" in proc.stderr and "0 compiled by the JIT" in proc.stderr
    assert "0 lookups in 0.0 ms, 0.0 ms of CPU, 0 passes of the cyclic collector within (0 full)" in proc.stderr
    assert "the GPU's first question 0.0 ms apart" in proc.stderr
