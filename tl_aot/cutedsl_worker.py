"""The CuTeDSL compile of one variant, in its own process: ``python -m tl_aot.cutedsl_worker FOLDER``.

FOLDER holds ``kernel.py`` (the module TileLang's CuTeDSL backend generated for one arch) and
``arguments.json`` (:func:`tl_aot.cutedsl.fake_arguments`). The module's own cubin step runs
with stand-ins for the tensors (shape and layout only) and typed scalars, CuTeDSL compiles for the
arch baked into the module, leaving ``kernel.cubin`` in FOLDER. No
GPU is needed; nothing is launched.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
from pathlib import Path

__all__ = ["main"]


class _TensorShape:
    """What the cubin step reads of a tensor: its shape and dim order (dense row-major)."""

    def __init__(self, shape, dtype: str) -> None:
        self.shape = tuple(shape)
        self.dtype = f"torch.{dtype}"

    def dim_order(self) -> tuple:
        return tuple(range(len(self.shape)))


def _scalar(dtype: str):
    """A scalar of the kernel's type: int32/float32 as Python values (as TileLang's JIT passes them), others typed."""
    if dtype == "int32":
        return 1
    if dtype == "float32":
        return 1.0
    import cutlass

    typed = {
        "int64": cutlass.Int64,
        "uint32": cutlass.Uint32,
        "uint64": cutlass.Uint64,
        "int16": cutlass.Int16,
        "int8": cutlass.Int8,
        "uint8": cutlass.Uint8,
        "bool": cutlass.Boolean,
        "float16": cutlass.Float16,
        "bfloat16": cutlass.BFloat16,
        "float64": cutlass.Float64,
    }
    if dtype not in typed:
        msg = f"a scalar argument of type {dtype} has no CuTeDSL spelling here"
        raise TypeError(msg)
    return typed[dtype](0 if "int" in dtype else 1.0)


def main(argv=None) -> int:
    """Compile FOLDER/kernel.py's kernels to FOLDER/kernel.cubin."""
    folder = Path((argv or sys.argv[1:])[0])
    arguments = json.loads((folder / "arguments.json").read_text())
    import tilelang  # noqa: F401 (puts TileLang's tvm on the path the generated module imports)

    spec = importlib.util.spec_from_file_location("tl_aot_cutedsl_kernel", folder / "kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    step = module._generate_cubin_if_needed
    values = []
    for name in inspect.signature(step).parameters:
        a = arguments.get(name)
        if a is None:
            print(f"the generated module's cubin step takes {name!r}, which the lowered signature lacks", file=sys.stderr)
            return 2
        values.append(_TensorShape(a["shape"], a["dtype"]) if a["kind"] == "tensor" else _scalar(a["dtype"]))
    step(*values)
    return 0


if __name__ == "__main__":
    sys.exit(main())
