"""The synthetic workload of ``bench/build_parallelism.py``: kernel ``i`` of a mix in TileOPs' shapes, each a distinct variant.

Run under ``python -m tl_aot capture --device H100-SXM -- python bench/parallelism_workload.py N J``:
asks TileLang's JIT for kernels ``0 .. N-1`` from ``J`` processes (shares round robin), so the
capture records N kernels. The mix, by ``i % 10``: six elementwise (``shift`` / ``scale`` of
``tests/kernels/tileops_shapes.py``, three dtypes, a size per kernel), three RMS norms and one
pipelined GEMM (``tests/kernels/specialised.py``), sizes and dtypes varied so that no two are the
same request. The kernels are the tests' own; this module only chooses which.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

KERNELS = Path(__file__).resolve().parent.parent / "tests" / "kernels"
DTYPES = ("float32", "float16", "bfloat16")
HALF = ("float16", "bfloat16")


def kind_of(i: int) -> str:
    """Which kernel family index ``i`` is: ``elementwise`` (6 in 10), ``norm`` (3 in 10) or ``gemm`` (1 in 10)."""
    r = i % 10
    return "elementwise" if r < 6 else "norm" if r < 9 else "gemm"


def request(i: int) -> None:
    """Ask TileLang's JIT for kernel ``i`` (under a capture: recorded, nothing compiled)."""
    if str(KERNELS) not in sys.path:
        sys.path.insert(0, str(KERNELS))
    import specialised
    import tileops_shapes

    k = i // 10
    r = i % 10
    if r < 6:
        factory = tileops_shapes.scale if r % 2 else tileops_shapes.shift
        factory(256 * (1 + k * 6 + r), DTYPES[r % 3])()
    elif r < 9:
        specialised.rms_norm(N=256 * (1 + k * 3 + (r - 6)), dtype=HALF[k % 2])
    else:
        specialised.gemm(N=128 * (1 + k % 16), K=64 * (1 + k // 16), dtype=HALF[k % 2])


def main(argv: list[str]) -> int:
    """``N J``: request kernels 0..N-1 from J processes; ``--share S J N``: this process's share."""
    if argv[:1] == ["--share"]:
        share, nshares, n = (int(x) for x in argv[1:4])
        for i in range(share, n, nshares):
            request(i)
        return 0
    n, procs = int(argv[0]), int(argv[1]) if len(argv) > 1 else 1
    cmd = [sys.executable, str(Path(__file__).resolve()), "--share"]
    children = [subprocess.Popen([*cmd, str(s), str(procs), str(n)]) for s in range(procs)]
    return max(c.wait() for c in children)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
