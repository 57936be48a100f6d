"""Commands that check what they are given before doing anything: `run --serve` and a misspelt arch."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from support.helpers import tl_aot_cli

KERNEL = Path(__file__).parents[1] / "kernels" / "elementwise.py"


def _cli(*args, cwd=None):
    return tl_aot_cli(*args, cwd=cwd, env=dict(os.environ))


def test_run_serve_refuses_a_missing_or_foreign_library_before_running_the_command(tmp_path):
    marker = tmp_path / "ran"
    cmd = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    proc = _cli("run", "--serve", tmp_path / "nothere.so", "--", *cmd)
    assert proc.returncode == 1 and "run --serve" in proc.stderr and "no such library or folder" in proc.stderr
    (tmp_path / "empty").mkdir()
    proc = _cli("run", "--serve", tmp_path / "empty", "--", *cmd)
    assert proc.returncode == 1 and "holds no tl_aot library" in proc.stderr
    (tmp_path / "libfake.so").write_bytes(b"not a library")
    proc = _cli("run", "--serve", tmp_path / "libfake.so", "--", *cmd)
    assert proc.returncode == 1 and "libfake.so" in proc.stderr
    assert "Traceback" not in proc.stderr and not marker.exists()


def test_an_arch_no_gpu_has_is_named_a_misspelling(tmp_path):
    proc = _cli("build", f"{KERNEL}:add_one", "--arch", "sm_99", "-o", tmp_path)
    assert proc.returncode == 1 and "sm_99 is no compute capability NVIDIA has released" in proc.stderr
    assert "needs CUDA" not in proc.stderr
