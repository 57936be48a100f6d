"""CPU checks of ``bench/examples_sweep.py`` (TileLang's examples through capture and build) and its CUDA shim."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.examples_sweep import SAMPLE, Outcome, table  # noqa: E402


def test_the_table_says_per_example_what_was_captured_built_and_left_out_and_why():
    outcomes = [
        Outcome("gemm/example_gemm.py", 1, built={"sm_90a": 1, "sm_80": 1}),
        Outcome("gemm_splitk/example_tilelang_gemm_splitk.py", 1, shim=True, built={"sm_90a": 1, "sm_80": 1}),
        Outcome("deepseek_mla/example_mla_decode.py", 1, built={"sm_90a": 1}, left_out=("flashattn_d9 (sm_80): 231424 bytes | of smem",)),
        Outcome("rand/rand_uint.py", 0, script_error="AttributeError: module 'tilelang.language' has no attribute 'rng_init'"),
    ]
    lines = table(outcomes, ["90a", "80"]).splitlines()
    assert lines[0] == "| example | captured | built sm_90a | built sm_80 | left out / why | served |"
    assert lines[3] == "| `gemm_splitk/example_tilelang_gemm_splitk.py` | 1 (shim) | 1 | 1 |  |  |"
    assert lines[4] == "| `deepseek_mla/example_mla_decode.py` | 1 | 1 | 0 | flashattn_d9 (sm_80): 231424 bytes \\| of smem |  |"
    assert "no attribute 'rng_init'" in lines[5] and lines[5].startswith("| `rand/rand_uint.py` | 0 | 0 | 0 |")


def test_the_sample_spans_the_example_families_the_sweep_promises():
    families = {path.split("/")[0] for path in SAMPLE}
    assert len(SAMPLE) >= 30 and len(families) >= 25
    assert {"gemm", "flash_attention", "deepseek_mla", "convolution", "dynamic_shape", "gdn"} <= families


def test_the_shim_runs_a_script_whose_cuda_tensors_land_on_the_cpu(tmp_path):
    script = tmp_path / "uses_cuda.py"
    script.write_text(
        "import sys, torch\n"
        "torch.cuda.manual_seed(0)\n"
        "a = torch.randn(4, 8, device='cuda')\n"
        "b = torch.zeros(4, device=torch.device('cuda', 0)).cuda().to('cuda')\n"
        "torch.cuda.synchronize()\n"
        "print(a.device, b.device, sys.argv[1:])\n"
    )
    cmd = [sys.executable, str(ROOT / "bench" / "examples_cuda_shim.py"), script.name, "--flag"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "cpu cpu ['--flag']"


def test_the_refusal_check_tells_a_kernel_tilelang_refuses_from_one_it_lowers(tmp_path):
    pytest.importorskip("tilelang")
    sys.path.insert(0, str(ROOT / "tests" / "kernels"))
    from tma_only import tma_rows

    from bench.examples_refusal import verdict
    from tl_aot.jit.ir_record import save_ir

    kernels = {"0a1b2c3d4e" + "0" * 22: tma_rows()}
    record = tmp_path / "rec.json"
    record.write_text(json.dumps({"kernels": {k: {"ir": save_ir(f), "options": {"pass_configs": {}}} for k, f in kernels.items()}}))
    refused = verdict(str(record), "tma_rows_0a1b2c3d4e", "sm_80")
    assert refused["tilelang"] == "refuses" and "tma_copy" in refused["error"], refused
    assert verdict(str(record), "tma_rows_0a1b2c3d4e", "sm_90a") == {"tilelang": "lowers"}
