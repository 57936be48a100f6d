"""CuTeDSL compiles in a worker process (``python -m tl_aot.lower.cutedsl_worker``), reused across variants.

The build sends a FOLDER per variant on stdin and reads a JSON line back. FOLDER holds
``kernel.py`` (the module TileLang's CuTeDSL backend generated for one arch) and
``arguments.json`` (:func:`tl_aot.lower.cutedsl.fake_arguments`). The module's own cubin step runs with
stand-ins for the tensors (shape and layout only) and typed scalars; CuTeDSL compiles for the arch
baked into the module, leaving ``kernel.cubin`` in FOLDER (its diagnostics in ``compile.log``).
No GPU is needed; nothing is launched. TileLang and CuTeDSL are imported once per worker (about
9 s), not once per variant.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
import os
import sys
import traceback
from pathlib import Path

__all__ = ["main"]


class _TensorShape:
    """What the cubin step reads of a tensor: its shape and dim order (dense row-major)."""

    def __init__(self, shape, dtype: str) -> None:
        self.shape = tuple(shape)
        self.dtype = f"torch.{dtype}"

    def dim_order(self) -> tuple[int, ...]:
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


def _compile(folder: Path) -> None:
    """Run FOLDER/kernel.py's cubin step with stand-ins for its arguments."""
    arguments = json.loads((folder / "arguments.json").read_text())
    spec = importlib.util.spec_from_file_location(f"tl_aot_cutedsl_{folder.name.replace('.', '_')}", folder / "kernel.py")
    if spec is None or spec.loader is None:  # a .py file always has both
        msg = f"Python has no loader for {folder / 'kernel.py'}"
        raise ImportError(msg)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    step = module._generate_cubin_if_needed
    values = []
    for name in inspect.signature(step).parameters:
        a = arguments.get(name)
        if a is None:
            msg = f"the generated module's cubin step takes {name!r}, which the lowered signature lacks"
            raise KeyError(msg)
        values.append(_TensorShape(a["shape"], a["dtype"]) if a["kind"] == "tensor" else _scalar(a["dtype"]))
    step(*values)


@contextlib.contextmanager
def _stderr_to(path: Path):
    """Send this process's stderr (CuTeDSL's diagnostics, from Python or native code) to ``path`` meanwhile."""
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)  # only an fd for stderr: nothing is written from here
    saved = os.dup(2)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def main() -> int:
    """Compile each FOLDER named on stdin (a line each), answering a JSON line each: ``{"ok": true}`` or the error."""
    channel, sys.stdout = sys.stdout, sys.stderr  # prints from the generated module must not corrupt the channel
    import tilelang  # noqa: F401 (puts TileLang's tvm on the path the generated module imports)

    for line in sys.stdin:
        folder = Path(line.rstrip("\n"))
        try:
            with _stderr_to(folder / "compile.log"):
                _compile(folder)
            reply: dict[str, object] = {"ok": True}
        except Exception as e:  # noqa: BLE001 (any failure is this variant's, reported by the build)
            reply = {"ok": False, "error": "".join(traceback.format_exception_only(type(e), e)).strip()}
        channel.write(json.dumps(reply) + "\n")
        channel.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
