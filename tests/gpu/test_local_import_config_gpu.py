"""Kernels reading their sizes from the user's own module, served on the GPU; after a size is edited, never the old kernel.

Kernel factories often import inside the function (``from .tiles import BLOCK``: an import cycle
dodged) or read a module imported at the top (``tiles.BLOCK``). The call key spells what either
reads: served, every call is answered before any trace; with ``tiles.py`` edited, the old
library refuses the calls instead of serving kernels built for the old value, and ``capture
--serve`` records only the kernels that read it.
"""

from __future__ import annotations

import re
import textwrap

import pytest
from support.served_project import ServedProject, serve_line

pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

TILES = """
BLOCK = 128
SCALE = 2.0
"""

KERNELS = """
import tilelang
import tilelang.language as T

from . import tiles


@tilelang.jit(out_idx=[-1])
def scaled(N):
    from .tiles import BLOCK, SCALE

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < N:
                    Y[bx * BLOCK + i] = X[bx * BLOCK + i] * SCALE

    return main


@tilelang.jit(out_idx=[-1])
def shifted(N):
    from .tiles import BLOCK

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < N:
                    Y[bx * BLOCK + i] = X[bx * BLOCK + i] + 1.0

    return main


@tilelang.jit(out_idx=[-1])
def by_attribute(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, tiles.BLOCK), threads=tiles.BLOCK) as bx:
            for i in T.Parallel(tiles.BLOCK):
                if bx * tiles.BLOCK + i < N:
                    Y[bx * tiles.BLOCK + i] = X[bx * tiles.BLOCK + i] - tiles.SCALE

    return main
"""

#: The workload: the three kernels checked against torch with the scale as ``tiles.py`` holds it now.
WORKLOAD = """
import torch

from ops import kernels, tiles

x = torch.arange(1000, dtype=torch.float32, device="cuda")
assert torch.equal(kernels.scaled(1000)(x), x * tiles.SCALE)
assert torch.equal(kernels.shifted(1000)(x), x + 1.0)
assert torch.equal(kernels.by_attribute(1000)(x), x - tiles.SCALE)
"""


def test_a_kernel_importing_its_sizes_is_served_by_call_key_and_an_edited_size_is_never_served_stale(tmp_path, cache_dir):
    pytest.importorskip("tilelang")
    package = tmp_path / "ops"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tiles.py").write_text(textwrap.dedent(TILES))
    (package / "kernels.py").write_text(textwrap.dedent(KERNELS))
    (tmp_path / "workload.py").write_text(textwrap.dedent(WORKLOAD))
    project = ServedProject(tmp_path, "imports", cache_dir)
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    out = project.capture(first)
    assert "3 kernels" in out.stdout, out.stdout + out.stderr
    project.build(first)
    served = project.serve()
    assert served.returncode == 0, served.stderr
    line = serve_line(served)
    assert "3 served, 0 compiled by the JIT, 0 refused" in line and re.search(r"\b3 kernels served before TileLang traced them", line), line

    # the user edits the imported scale: the library built for 2.0 must not answer the call for 3.0
    (package / "tiles.py").write_text(textwrap.dedent(TILES).replace("SCALE = 2.0", "SCALE = 3.0"))
    refused = project.serve()
    assert refused.returncode != 0 and "KernelNotServed" in refused.stderr, refused.stderr[-2000:]
    proc = project.capture(second, serve=True)
    assert "2 compiled by TileLang's JIT" in proc.stdout, proc.stdout + proc.stderr  # scaled's and by_attribute's are new
    project.build(first, second)
    served = project.serve()
    assert served.returncode == 0, served.stderr
    assert "3 served, 0 compiled by the JIT, 0 refused" in serve_line(served)
