"""A build on a machine without a CUDA toolkit: every system CUDA path removed from PATH, no CUDA_HOME.

The compiler is the one ``tl_aot[build]`` installed from PyPI, found with no configuration
(tl_aot.cuda.cuda_toolkit); the library records it and the oldest driver that loads it. Skipped where no
pip compiler is installed (CI installs ``tl_aot[build]``, which brings one).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.helpers import tl_aot_cli

from tl_aot.cuda.cuda_toolkit import pip_toolkits

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "tests" / "kernels"

pytestmark = pytest.mark.skipif(not pip_toolkits(), reason="no CUDA compiler from PyPI installed (pip install 'tl_aot[build]')")


def scrubbed_env() -> dict:
    """This environment with every folder holding an nvcc removed from PATH and no CUDA_HOME / CUDA_PATH / TL_AOT_NVCC."""
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "nvcc").exists())
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "TL_AOT_NVCC", "TL_AOT_ARCHS", "TL_AOT_CACHE_DIR")}
    env.update(PATH=path, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    return env


def _tl_aot(*args, env) -> subprocess.CompletedProcess:
    return tl_aot_cli(*args, cwd=ROOT, env=env)


def test_builds_with_the_pip_compiler_and_records_it(tmp_path):
    env = scrubbed_env()
    assert subprocess.run(["sh", "-c", "command -v nvcc"], env=env, capture_output=True).returncode != 0
    target = KERNELS / "elementwise.py:add_one"
    proc = _tl_aot("build", target, "--arch", "90a", "--arch", "80", "-o", tmp_path, "--cache-dir", tmp_path / "c", env=env)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "compiler: " in proc.stdout and " from pip (" in proc.stdout
    inspect = _tl_aot("inspect", "--json", tmp_path / "libadd_one.so", env=env)
    assert inspect.returncode == 0, inspect.stderr
    data = json.loads(inspect.stdout)
    tk = pip_toolkits()[0]
    major = "12" if tk.kind == "nvrtc" else "13"
    assert data["driver"]["min_cuda"] == f"{major}.0"
    assert data["driver"]["min_version"] == {"12": "525.60.13", "13": "580.65.06"}[major]
    assert data["compiler"].startswith("NVRTC + ptxas 12." if major == "12" else "nvcc 13.")
    variants = [v for e in data["entries"] for v in e["variants"]]
    assert {v["cuda_version"].split(".")[0] for v in variants} == {major}
    human = _tl_aot("inspect", tmp_path / "libadd_one.so", env=env).stdout
    assert f"loads on NVIDIA drivers supporting CUDA {major}.0 or newer" in human


def test_the_locators_name_the_pip_compiler():
    env = scrubbed_env()
    home = _tl_aot("--cuda-home", env=env)
    assert home.returncode == 0, home.stderr
    assert "nvidia" in home.stdout
    nvcc = _tl_aot("--nvcc", env=env)
    if pip_toolkits()[0].kind == "nvcc":
        assert nvcc.returncode == 0 and nvcc.stdout.strip().endswith("nvidia/cu13/bin/nvcc")
    else:
        assert nvcc.returncode == 1 and "has no nvcc" in nvcc.stderr
