"""tlops' kernels in a wheel, the entries given as Python objects (dtypes, configs, enums) as the library passes them."""

import sys
from pathlib import Path

import torch
from setuptools import setup

sys.path.insert(0, str(Path(__file__).parent))
from tlops.kernels.common import Act, Problem, TileConfig  # noqa: E402

from tl_aot.frontends.setuptools import TileLangExtension, bdist_wheel, build_ext  # noqa: E402

K = "tlops/kernels/"
entries = [
    {
        "name": "gemm",
        "source": K + "gemm.py",
        "function": "gemm_kernel",
        "args": {"m": 256, "n": 256, "k": 128, "dtype": torch.float16},
        "jit_args": {"block_m": 128, "num_stages": 3},
    },
    {"name": "relu6_scale", "source": K + "scale.py", "function": "relu6_scale", "args": {"n": 1000, "factor": 2.0}},
    {"name": "relu6_half", "source": K + "scale.py", "function": "relu6_half", "args": {"n": 1000}},
    {
        "name": "rms_norm",
        "source": K + "norm.py",
        "function": "rms_norm",
        "args": {"rows": 256, "cols": 128, "dtype": torch.float16, "clip": float("inf"), "config": TileConfig(block=64, threads=64)},
    },
    {
        "name": "act_fwd",
        "source": K + "multi.py",
        "function": "activation",
        "select": "fwd",
        "args": {"shape": Problem(rows=64, cols=256), "dtype": "float16", "act": Act.RELU},
    },
    {
        "name": "act_bwd",
        "source": K + "multi.py",
        "function": "activation",
        "select": "bwd",
        "args": {"shape": Problem(rows=64, cols=256), "dtype": "float16", "act": Act.RELU},
    },
    {
        "name": "negate",
        "source": K + "dispatch.py",
        "function": "from_registry",
        "imports": ["tlops.ops"],
        "args": {"op": "negate", "n": 4096},
        "out_idx": [-1],
    },
    {"name": "fill_like", "source": K + "cached.py", "function": "fill_like", "args": {"n": 1024}},
]

# Every kernel a captured workload asked for (python -m tl_aot capture -o tlops.capture.json ...), served at import.
captured = Path(__file__).parent / "tlops.capture.json"
served = [TileLangExtension("tlops._served", capture=["tlops.capture.json"], archs=["90a"])] if captured.is_file() else []

setup(
    ext_modules=[TileLangExtension("tlops._aot", entries=entries, archs=["90a"]), *served],
    cmdclass={"build_ext": build_ext, "bdist_wheel": bdist_wheel},
)
