"""TileLang's ``Profiler`` for a served kernel: ``kernel.get_profiler()`` as TileLang's JIT kernels answer it.

TileLang's own examples and many users check and time a kernel through its profiler
(``profiler.assert_allclose(ref)``, ``profiler.do_bench()``): TileLang's ``Profiler`` made from the
kernel's parameters (``JITKernel.params``: dtype and shape, a ``tvm`` variable per dynamic dim), its
outputs (``out_idx``) and a callable that launches it. A served kernel gives the same from its
library's manifest, which lists the parameters in the launcher's (TileLang's) order with the
outputs marked, and launches through the library: nothing is traced or compiled.
"""

from __future__ import annotations

import re
from typing import Any

from ..common.metadata import LoweredEntry

__all__ = ["kernel_params", "result_idx", "profiler_of"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def kernel_params(entry: LoweredEntry) -> list[Any]:
    """The entry's parameters as TileLang's ``KernelParam`` list: static dims as ints, one shared ``tvm`` variable per symbol.

    A dim solved from an expression (``n * 2``) becomes a variable named by that text: TileLang's
    tensor supply refuses any dynamic dim with its own message, and ``do_bench``'s
    ``dynamic_symbolic_constraints`` names the symbols.
    """
    from tilelang import tvm
    from tilelang.engine.param import KernelParam

    tir = getattr(tvm, "tirx", None) or tvm.tir
    symbols: dict[str, Any] = {}

    def dim(d: int | str) -> Any:
        if isinstance(d, int):
            return d
        text = str(d)
        if text not in symbols:
            symbols[text] = tir.Var(text if _NAME.fullmatch(text) else f"({text})", "int32")
        return symbols[text]

    return [KernelParam(tvm.DataType(p.dtype), [dim(d) for d in p.shape] if p.is_tensor else []) for p in entry.params]


def result_idx(entry: LoweredEntry) -> list[int]:
    """The outputs' positions among the parameters, as TileLang's adapter legalises ``out_idx`` (non-negative)."""
    return [i for i, p in enumerate(entry.params) if p.output]


def profiler_of(kernel: Any, entry: LoweredEntry, tensor_supply_type: Any = None, *, outputs: list[int] | None = None) -> Any:
    """TileLang's ``Profiler`` over ``entry``'s parameters, launching ``kernel`` (called with the inputs, returning the outputs).

    ``outputs``: the kernel's ``out_idx`` (the order its outputs come back in); by default the entry's, in parameter order.
    """
    from tilelang.profiler import Profiler
    from tilelang.utils.tensor import TensorSupplyType

    supply = TensorSupplyType.Auto if tensor_supply_type is None else tensor_supply_type
    return Profiler(kernel_params(entry), result_idx(entry) if outputs is None else outputs, supply).with_default_adapter(kernel)
