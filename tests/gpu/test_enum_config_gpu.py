"""A kernel configured by a user's enum, served on the GPU; after the enum's value is edited, never the old kernel.

The call key spells a user's enum member with its value and its class's methods: served, the
call is answered before any trace; edited (``FAST = 2.0`` to ``3.0``), the old library refuses the
call instead of serving the kernel built for 2.0, and ``capture --serve`` records only the new one.
"""

from __future__ import annotations

import re
import textwrap

import pytest
from support.served_project import ServedProject, serve_line

pytest.importorskip("torch")

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


def test_an_enum_configured_kernel_is_served_by_call_key_and_an_edited_value_is_never_served_stale(tmp_path, cache_dir):
    pytest.importorskip("tilelang")
    (tmp_path / "kernels.py").write_text(textwrap.dedent(KERNELS))
    (tmp_path / "workload.py").write_text(textwrap.dedent(WORKLOAD))
    project = ServedProject(tmp_path, "enums", cache_dir)
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    out = project.capture(first)
    assert "2 kernels" in out.stdout, out.stdout + out.stderr
    project.build(first)
    served = project.serve()
    assert served.returncode == 0, served.stderr
    line = serve_line(served)
    assert "2 served, 0 compiled by the JIT, 0 refused" in line and re.search(r"\b2 kernels served before TileLang traced them", line), line

    # the user edits the enum's value: the library built for 2.0 must not answer the call for 3.0
    (tmp_path / "kernels.py").write_text(textwrap.dedent(KERNELS).replace("FAST = 2.0", "FAST = 3.0"))
    refused = project.serve()
    assert refused.returncode != 0 and "KernelNotServed" in refused.stderr, refused.stderr[-2000:]
    proc = project.capture(second, serve=True)
    assert "1 compiled by TileLang's JIT" in proc.stdout, proc.stdout + proc.stderr  # only FAST's kernel is new
    project.build(first, second)
    served = project.serve()
    assert served.returncode == 0, served.stderr
    assert "2 served, 0 compiled by the JIT, 0 refused" in serve_line(served)
