"""How tlops itself reaches each kernel through TileLang's JIT: the reference tl_aot's builds must equal.

``python jit_reference.py OUT.json`` compiles every kernel with TileLang's JIT (set
``TILELANG_DEFAULT_TARGET`` on a machine without a GPU) and writes, per entry of ``tlops.toml``,
the kernel source, the prim_func's structural hash and the options the JIT compiled it with.
The GPU tests import :func:`jit_kernels` and :func:`inputs` to compare results bit for bit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import tlops.ops  # noqa: E402,F401  (fills the registry, as the library's import does)
import torch  # noqa: E402
from tlops.kernels import cached, dispatch, gemm, multi, norm, scale  # noqa: E402
from tlops.kernels.common import Act, Problem, TileConfig  # noqa: E402


def jit_kernels() -> dict:
    """Entry name -> the JITKernel the library's own call compiles (same arguments as tlops.toml)."""
    act = multi.activation(Problem(rows=64, cols=256), "float16", act=Act.RELU)
    return {
        "gemm": gemm.gemm_kernel(256, 256, 128, torch.float16)(block_m=128, num_stages=3),
        "relu6_scale": scale.relu6_scale(1000, 2.0),
        "relu6_half": scale.relu6_half(1000),
        "rms_norm": norm.rms_norm(256, 128, torch.float16, clip=float("inf"), config=TileConfig(block=64, threads=64)),
        "act_fwd": act["fwd"](),
        "act_bwd": act["bwd"](),
        "negate": __import__("tilelang").compile(dispatch.from_registry("negate", 4096), out_idx=[-1]),
        "fill_like": cached.fill_like(1024),
    }


def inputs(entry: str, device="cuda") -> list:
    """Deterministic inputs of one entry (the outputs are returned)."""
    g = torch.Generator(device="cpu").manual_seed(hash(entry) % 1000)

    def r(*shape, dtype=torch.float16):
        return torch.randn(*shape, generator=g).to(dtype).to(device)

    return {
        "gemm": lambda: [r(256, 128), r(128, 256)],
        "relu6_scale": lambda: [r(1000, dtype=torch.float32) * 4],
        "relu6_half": lambda: [r(1000, dtype=torch.float32) * 4],
        "rms_norm": lambda: [r(256, 128)],
        "act_fwd": lambda: [r(64, 256)],
        "act_bwd": lambda: [r(64, 256), r(64, 256)],
        "negate": lambda: [r(4096, dtype=torch.float32)],
        "fill_like": lambda: [r(1024, dtype=torch.float32)],
    }[entry]()


def describe(kernel) -> dict:
    """What the JIT compiled: source, prim_func hash and options (JSON values)."""
    from tl_aot.config.options import plain_pass_configs
    from tl_aot.jit.resolve import func_hash

    flags = kernel.compile_flags or []
    return {
        "source": kernel.get_kernel_source(),
        "func_hash": func_hash(kernel.prim_func),
        "pass_configs": plain_pass_configs(dict(kernel.pass_configs or {})),
        "compile_flags": [flags] if isinstance(flags, str) else list(flags),
    }


if __name__ == "__main__":
    out = {name: describe(k) for name, k in jit_kernels().items()}
    Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
