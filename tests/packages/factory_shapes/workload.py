"""A tlops workload: the shapes an application runs. ``--prepare`` builds the kernels without running
them (what a capture without a GPU needs); ``--check OUT.pt`` runs them and saves the results."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import torch  # noqa: E402
from tlops import api as ops  # noqa: E402

GEMMS = [(64, 256, 128), (256, 256, 128), (512, 256, 256)]
NORMS = [(128, 128), (256, 256)]
SCALES = [(1000, 2.0), (4096, 0.5)]
RELUS = [(64, 256)]


def prepare(device=None):
    dt = torch.float16
    for m, n, k in GEMMS:
        ops.gemm_kernel_for(m, n, k, dt, device)
    for rows, cols in NORMS:
        ops.rms_norm_kernel_for(rows, cols, dt, device)
    for n, f in SCALES:
        ops.relu6_scale_kernel_for(n, f, device)
    for rows, cols in RELUS:
        ops.relu_kernel_for(rows, cols, "float16", device)


def run() -> dict:
    g = torch.Generator().manual_seed(0)

    def r(*shape, dtype=torch.float16):
        return torch.randn(*shape, generator=g).to(dtype).cuda()

    out = {}
    for m, n, k in GEMMS:
        out[f"gemm{m}x{n}x{k}"] = ops.gemm(r(m, k), r(k, n))
    for rows, cols in NORMS:
        out[f"norm{rows}x{cols}"] = ops.rms_norm(r(rows, cols))
    for n, f in SCALES:
        out[f"relu6_{n}_{f}"] = ops.relu6(r(n, dtype=torch.float32) * 4, f)
    for rows, cols in RELUS:
        out[f"relu{rows}x{cols}"] = ops.relu(r(rows, cols))
    torch.cuda.synchronize()
    return {k: v.cpu() for k, v in out.items()}


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--prepare", action="store_true")
    p.add_argument("--check")
    a = p.parse_args()
    if a.prepare:
        prepare()
    if a.check:
        torch.save(run(), a.check)
