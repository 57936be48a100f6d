"""A kernel configured by a user's enum, served on the GPU; after the enum's value is edited, never the old kernel.

The call key spells a user's enum member with its value and its class's methods: served, the
call is answered before any trace; edited (``FAST = 2.0`` to ``3.0``), the old library refuses the
call instead of serving the kernel built for 2.0, and ``capture --serve`` records only the new one.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap

import pytest
from support.helpers import run, run_ok, tl_aot_argv

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

KERNELS = """
import enum

import tilelang
import tilelang.language as T


class Mode(enum.Enum):
    FAST = 2.0
    EXACT = 1.0

    def threads(self):
        return 128 if self is Mode.FAST else 64


def scaled(mode):
    @tilelang.jit(out_idx=[-1])
    def kernel(N):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, mode.threads()), threads=mode.threads()) as bx:
                for i in T.Parallel(mode.threads()):
                    if bx * mode.threads() + i < N:
                        Y[bx * mode.threads() + i] = X[bx * mode.threads() + i] * mode.value

        return main

    return kernel
"""

#: The workload: each mode's kernel checked against torch with the enum's value as the file holds it now.
WORKLOAD = """
import torch

import kernels

x = torch.arange(1000, dtype=torch.float32, device="cuda")
for mode in kernels.Mode:
    assert torch.equal(kernels.scaled(mode)(1000)(x), x * mode.value), mode
"""


def _serve_line(proc) -> str:
    return next(ln for ln in proc.stderr.splitlines() if ln.startswith("tl_aot serve"))


def test_an_enum_configured_kernel_is_served_by_call_key_and_an_edited_value_is_never_served_stale(tmp_path, cache_dir):
    pytest.importorskip("tilelang")
    (tmp_path / "kernels.py").write_text(textwrap.dedent(KERNELS))
    (tmp_path / "workload.py").write_text(textwrap.dedent(WORKLOAD))
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp_path / "jit-cache"))
    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}{minor}{'a' if major >= 9 else ''}"
    lib = tmp_path / "lib" / "libenums.so"

    def build(*records):
        captures = [a for r in records for a in ("--capture", r)]
        argv = tl_aot_argv("build", *captures, "--arch", arch, "--name", "enums", "-o", lib.parent, "--cache-dir", cache_dir, "-q")
        run_ok(argv, tmp_path)

    def serve():
        return run(tl_aot_argv("run", "--serve", lib.parent, "--strict", "--", sys.executable, "workload.py"), tmp_path, env)

    first, second = tmp_path / "first.json", tmp_path / "second.json"
    out = run_ok(tl_aot_argv("capture", "-o", first, "--", sys.executable, "workload.py"), tmp_path, env)
    assert "2 kernels" in out.stdout, out.stdout + out.stderr
    build(first)
    served = serve()
    assert served.returncode == 0, served.stderr
    line = _serve_line(served)
    assert "2 served, 0 compiled by the JIT, 0 refused" in line and re.search(r"\b2 kernels served before TileLang traced them", line), line

    # the user edits the enum's value: the library built for 2.0 must not answer the call for 3.0
    (tmp_path / "kernels.py").write_text(textwrap.dedent(KERNELS).replace("FAST = 2.0", "FAST = 3.0"))
    refused = serve()
    assert refused.returncode != 0 and "KernelNotServed" in refused.stderr, refused.stderr[-2000:]
    proc = run_ok(tl_aot_argv("capture", "--serve", lib, "-o", second, "--", sys.executable, "workload.py"), tmp_path, env)
    assert "1 compiled by TileLang's JIT" in proc.stdout, proc.stdout + proc.stderr  # only FAST's kernel is new
    build(first, second)
    served = serve()
    assert served.returncode == 0, served.stderr
    assert "2 served, 0 compiled by the JIT, 0 refused" in _serve_line(served)
