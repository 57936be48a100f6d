"""Quick start: build ``kernels.py:matmul`` ahead of time, then load and run it (on a GPU) or inspect it.

    python samples/quickstart/quickstart.py [--out build/quickstart] [--arch 90a --arch 80]

The build is the same command a user runs by hand:

    python -m tl_aot build samples/quickstart/kernels.py:matmul --name gemm_fp16 \
        --arch 90a --arch 80 --arg M=4096 --arg N=4096 --arg K=4096 -o build/quickstart
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="build/quickstart")
    p.add_argument("--arch", action="append", default=None)
    p.add_argument("--size", type=int, default=4096)
    args = p.parse_args()
    archs = args.arch or ["90a", "80"]
    n = args.size
    cmd = [sys.executable, "-m", "tl_aot", "build", f"{HERE / 'kernels.py'}:matmul", "--name", "gemm_fp16", "-o", args.out]
    cmd += [f"--arch={a}" for a in archs] + [f"--arg=M={n}", f"--arg=N={n}", f"--arg=K={n}"]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    lib_path = Path(args.out) / "libgemm_fp16.so"
    subprocess.run([sys.executable, "-m", "tl_aot", "inspect", str(lib_path)], check=True)

    import tl_aot

    lib = tl_aot.load(lib_path)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        print(f"\nloaded {lib}; no CUDA device here, so the kernel is not run (a call would fail with a clear error).")
        return 0
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = lib.gemm_fp16(a, b)  # like TileLang's JIT: C is allocated (by torch) and returned
    torch.testing.assert_close(c, (a.float() @ b.float()).half(), rtol=2e-2, atol=5e-1)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        lib.gemm_fp16(a, b, c)  # or into a C you allocated
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / 20
    print(f"\ngemm_fp16 {n}x{n}x{n}: correct, {2 * n**3 / ms / 1e9:.0f} TFLOP/s on {torch.cuda.get_device_name()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
