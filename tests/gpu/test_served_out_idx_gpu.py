"""A served kernel answers ``out_idx`` and returns its outputs as TileLang's ``JITKernel`` does, on the GPU.

One script, run three ways: by TileLang's JIT, under ``tl_aot capture``, and served strictly from the
library built from that capture. Its kernel has two outputs asked out of parameter order
(``out_idx=[-1, -2]``): the JIT answers ``out_idx == [3, 2]`` and returns the last parameter first;
the served kernel must too (the library itself returns them in parameter order).
"""

from __future__ import annotations

import os
import sys

import pytest
from support.helpers import run_ok, tl_aot_argv

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

SCRIPT = """import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1, -2])
def two_outputs(N, block=128):
    @T.prim_func
    def main(a: T.Tensor((N,), "float32"), s: T.float32, doubled: T.Tensor((N,), "float32"), shifted: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                j = bx * block + i
                if j < N:
                    doubled[j] = a[j] * s
                    shifted[j] = a[j] + s

    return main


kernel = two_outputs(1024)
a = torch.randn(1024, device="cuda")
first, second = kernel(a, 2.0)
assert list(kernel.out_idx) == [3, 2], kernel.out_idx
torch.testing.assert_close(first, a + 2.0, rtol=0, atol=0)  # shifted: out_idx's first
torch.testing.assert_close(second, a * 2.0, rtol=0, atol=0)
print(type(kernel).__name__, "answered out_idx [3, 2] and returned its outputs in that order")
"""


def test_a_served_kernel_answers_out_idx_and_orders_its_outputs_as_the_jit_kernel(tmp_path, cache_dir):
    pytest.importorskip("tilelang")
    script = tmp_path / "two_outputs.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp_path / "jit-cache"))
    assert "JITKernel answered out_idx [3, 2]" in run_ok([sys.executable, script.name], tmp_path, env).stdout
    record, lib = tmp_path / "two.capture.json", tmp_path / "lib"
    run_ok(tl_aot_argv("capture", "-o", record, "--", sys.executable, script.name), tmp_path, env)
    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}{minor}{'a' if major >= 9 else ''}"
    run_ok(tl_aot_argv("build", "--capture", record, "--arch", arch, "-o", lib, "--cache-dir", cache_dir, "-q"), tmp_path, env)
    served = run_ok(tl_aot_argv("run", "--serve", lib, "--strict", "--", sys.executable, script.name), tmp_path, env)
    assert "ServedKernel answered out_idx [3, 2] and returned its outputs in that order" in served.stdout
    assert "1 served, 0 compiled by the JIT" in served.stdout + served.stderr
