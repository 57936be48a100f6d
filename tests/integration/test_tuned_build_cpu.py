"""A build with no GPU takes its configs from a tuning record made on one (tests/kernels/tuned.tune.json, H100)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.helpers import ok, tl_aot_cli

pytest.importorskip("tilelang")

KERNELS = Path(__file__).parents[1] / "kernels"


@pytest.fixture(scope="module")
def built(tmp_path_factory, cache_dir):
    out = tmp_path_factory.mktemp("tuned")
    proc = tl_aot_cli("build", "--spec", KERNELS / "tuned.toml", "-o", out, "--cache-dir", cache_dir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc


def test_the_record_next_to_the_spec_chooses_every_config(built):
    out, proc = built
    assert "tuning record tuned.tune.json: configs for 3 of 3 entries" in proc.stdout
    assert "digest" not in proc.stderr and "tuned on" not in proc.stderr  # the record matches today's sources
    import tl_aot

    lib = tl_aot.load(out / "libtl_tuned.so")
    record = {i["entry"]: i for i in json.loads((KERNELS / "tuned.tune.json").read_text())["items"]}
    for name in ("gemm", "flash_fwd", "rms_norm"):
        (v,) = lib.signature(name).variants
        assert dict(v.config) == record[name]["chosen"], name
        assert v.config_source == f"record (NVIDIA H100 80GB HBM3, {record[name]['ms']:.4g} ms)"
    text = ok(tl_aot_cli("inspect", lib.path)).stdout
    assert "config (record (NVIDIA H100 80GB HBM3, 0.2616 ms)): block_K=64, block_M=128, block_N=128, stages=3, threads=128" in text


def test_a_stale_record_warns_and_strict_fails(tmp_path, cache_dir):
    for f in ("tuned.toml", "tuned.tune.json", "tuned.py", "specialised.py"):
        shutil.copy(KERNELS / f, tmp_path / f)
    (tmp_path / "conformance").mkdir()
    shutil.copy(KERNELS / "conformance" / "flash_fwd_autotune.py", tmp_path / "conformance")
    with (tmp_path / "tuned.py").open("a") as f:
        f.write("\n# edited after tuning\n")
    cmd = [
        sys.executable,
        "-m",
        "tl_aot",
        "build",
        "--spec",
        str(tmp_path / "tuned.toml"),
        "-o",
        str(tmp_path / "o"),
        "--cache-dir",
        str(cache_dir),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "entry 'gemm' (sm_90a) was tuned on" in proc.stderr and "from a different tuned.py" in proc.stderr
    strict = subprocess.run([*cmd, "--strict-tune"], capture_output=True, text=True, check=False)
    assert strict.returncode == 1 and "re-run python -m tl_aot tune" in strict.stderr


def test_tune_without_a_gpu_says_what_it_needs(tmp_path):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    proc = tl_aot_cli("tune", "--spec", KERNELS / "tuned.toml", "-o", tmp_path / "r.json")
    assert proc.returncode == 1 and "it needs a CUDA GPU and torch with CUDA (build needs neither)" in proc.stderr
