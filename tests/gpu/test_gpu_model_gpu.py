"""A library captured on one GPU model, served on another of the same arch (an H100's library on an H200).

TileOPs runs one GQA kernel on an H200 only (chosen by ``torch.cuda.get_device_name()``), so a library
captured on an H100 lacks it on an H200 with nothing wrong in its keys. Here the same with our own
kernels (``tileops_shapes.by_model``), as processes, as a user runs them: the library captured (as the
other model) and built; served strictly on this GPU, the kernel it asks for is refused naming both
models and the command that adds it; after that ``capture --serve`` and a build, served with no compile.
"""

from __future__ import annotations

import shutil
import sys

import pytest
from support.helpers import KERNELS, child_env, ok, run, tl_aot_argv

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

#: The workload: this GPU model's kernel for Y = X + 1, checked against torch.
SCRIPT = (
    "import torch, tileops_shapes as o\n"
    "x = torch.arange(256, dtype=torch.float32, device='cuda')\n"
    "assert torch.equal(o.by_model(256)()(x), x + 1)\n"
)


def test_a_kernel_only_this_gpu_model_asks_for_is_refused_by_name_then_captured_incrementally(tmp_path, cache_dir):
    pytest.importorskip("tilelang")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 GPU: an H100 or an H200")
    here = torch.cuda.get_device_name()
    other, other_name = ("H100-SXM", "NVIDIA H100 80GB HBM3") if "H200" in here else ("H200", "NVIDIA H200")
    shutil.copy(KERNELS / "tileops_shapes.py", tmp_path)
    env = child_env(cache_dir, checkout_first=True, TILELANG_CACHE_DIR=str(tmp_path / "jit-cache"))

    def tl_aot(*args):
        return run(tl_aot_argv(*args), tmp_path, env)

    def build(*records):
        captures = [a for r in records for a in ("--capture", r)]
        ok(tl_aot("build", *captures, "--arch", "90a", "--name", "ops", "-o", tmp_path / "lib", "-q"))

    # the library as the other model's capture made it (no GPU used: its kernel is recorded, never run)
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    ok(tl_aot("capture", "--device", other, "-o", first, "--", sys.executable, "-c", "import tileops_shapes as o; o.by_model(256)()"))
    build(first)
    refused = tl_aot("run", "--serve", tmp_path / "lib", "--strict", "--", sys.executable, "-c", SCRIPT)
    assert refused.returncode != 0 and "KernelNotServed" in refused.stderr
    assert f"captured on {other_name}, and this GPU is an {here}" in refused.stderr
    assert f"python -m tl_aot capture --serve {tmp_path / 'lib' / 'libops.so'} -o NEW.json -- COMMAND" in refused.stderr

    # what the message says to run: only the kernel the library lacks is compiled, then the build adds it
    proc = ok(tl_aot("capture", "--serve", tmp_path / "lib" / "libops.so", "-o", second, "--", sys.executable, "-c", SCRIPT))
    assert "1 compiled by TileLang's JIT" in proc.stdout
    build(first, second)
    served = ok(tl_aot("run", "--serve", tmp_path / "lib", "--strict", "--", sys.executable, "-c", SCRIPT))
    assert "1 served, 0 compiled by the JIT, 0 refused" in served.stderr + served.stdout
