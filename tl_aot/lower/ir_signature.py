"""Read a lowered prim_func's signature: parameters, returned outputs, dynamic dims and how the launcher binds them.

Bound as TileLang's host code binds them (scalars, then each tensor's dims; a dim expression such as
``n * 2`` solved with TVM's linear solver); every name the generated C++ uses is checked here, and
the TIR-name → C++-name map the launch metadata (:mod:`tl_aot.lower.ir_metadata`) spells expressions with
starts here.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from ..common.cpp_spelling import DLPACK_DTYPES
from ..common.errors import LoweringError
from ..common.metadata import Param, Symbol
from ..common.subbyte import SUBBYTE_DTYPES, Packing, packing_of, storage_spelled
from .cexpr import CppExprPrinter, ctype_of

__all__ = ["output_positions", "read_signature"]


def output_positions(func, out_idx, where: str) -> frozenset:
    """Parameter positions the entry allocates and returns, from ``out_idx`` (ints, negative from the end, or names)."""
    if out_idx is None:
        return frozenset()
    items = [out_idx] if isinstance(out_idx, (int, str)) else list(out_idx)
    names = [func.buffer_map[v].name if v in func.buffer_map else v.name for v in func.params]
    out = set()
    for it in items:
        if isinstance(it, str):
            if it not in names:
                msg = f"{where}: out_idx names {it!r}, which is not a parameter ({', '.join(names)})"
                raise LoweringError(msg)
            i = names.index(it)
        else:
            i = int(it) + (len(names) if int(it) < 0 else 0)
            if not 0 <= i < len(names):
                msg = f"{where}: out_idx {it} is out of range for {len(names)} parameters ({', '.join(names)})"
                raise LoweringError(msg)
        if func.params[i] not in func.buffer_map:
            msg = f"{where}: out_idx {it!r} is the scalar {names[i]!r}; only tensors can be outputs"
            raise LoweringError(msg)
        out.add(i)
    return frozenset(out)


def read_signature(func, where: str, outputs: frozenset = frozenset()):
    """Params and dynamic symbols of the prim_func, plus the TIR-name → C++-name map.

    Bound as TileLang's host code binds them: scalars first, then each tensor's dims (a dim that is
    a variable binds it; one solved from a dim expression such as ``n * 2`` is checked per call).
    Inputs come before outputs, so a symbol is bound by an input when one has it: returned outputs
    are shaped from the inputs and scalars alone.
    """
    names: dict[str, str] = {}
    by_pos = _scalar_params(func, where, names)
    symbols: dict[str, Symbol] = {}
    buffers = []
    tensors = [i for i, v in enumerate(func.params) if v in func.buffer_map]
    for group in ([i for i in tensors if i not in outputs], [i for i in tensors if i in outputs]):
        named = []
        for pos in group:
            buf = func.buffer_map[func.params[pos]]
            pname = _check_name(buf.name, f"{where}: tensor parameter")
            _check_tensor_dtype(str(buf.dtype), f"{where}: parameter {pname!r}", output=pos in outputs)
            names[buf.data.name] = f"p_{pname}"
            named.append((pos, pname, buf))
        _bind_dims(named, symbols, names, where)
        _solve_dims(named, symbols, names, where)
        buffers += named
    for pos, pname, buf in buffers:
        # TileLang declares every argument buffer 64-byte aligned and vectorises on that promise
        # (16-byte loads, TMA): a pointer that breaks it faults the whole CUDA context.
        align = int(getattr(buf, "data_alignment", 0) or 0)
        shape = tuple(_dim_of(s) for s in buf.shape)
        strides = tuple(_stride_of(s, names, f"{where}: tensor {pname!r}") for s in buf.strides)
        packing = packing_of(str(buf.dtype))
        storage = storage_spelled(packing, shape) if packing else ""
        by_pos[pos] = Param(
            pname, "tensor", str(buf.dtype), shape, strides, alignment=align if align > 1 else 0, output=pos in outputs, storage=storage
        )
    params = [by_pos[i] for i in range(len(func.params))]
    _check_bound(buffers, names, where)
    _check_outputs(params, symbols, where)
    pr = CppExprPrinter(names, {}, where)
    spelled = {pname: (tuple(pr(s) for s in buf.shape), tuple(pr(s) for s in buf.strides)) for _, pname, buf in buffers}
    params = [dataclasses.replace(p, shape_cpp=spelled[p.name][0], strides_cpp=spelled[p.name][1]) if p.is_tensor else p for p in params]
    return tuple(params), tuple(symbols.values()), names


def _scalar_params(func, where: str, names: dict[str, str]) -> dict:
    """Scalar parameters by position; each binds its variable (``a_<name>``) before any tensor, as in TileLang."""
    out = {}
    for pos, var in enumerate(func.params):
        if var not in func.buffer_map:
            pname = _check_name(var.name, f"{where}: scalar parameter")
            ctype_of(str(var.dtype), f"{where}: parameter {pname!r}")
            names[var.name] = f"a_{pname}"
            out[pos] = Param(pname, "scalar", str(var.dtype))
    return out


def _bind_dims(named: list, symbols: dict[str, Symbol], names: dict[str, str], where: str) -> None:
    """A dim that is a variable no scalar or earlier dim binds binds it (``s_<name>``)."""
    from tilelang import tvm

    for _, pname, buf in named:  # a dim named like a tensor was numbered by lower/distinct_names.py
        for i, dim in enumerate(buf.shape):
            if isinstance(dim, tvm.tirx.Var) and not _is_bound(dim.name, names):
                _check_name(dim.name, f"{where}: symbolic dimension of {pname}")
                packing = packing_of(str(buf.dtype))
                # a packed last dim is bound as the storage's times what it packs (the runtime's logical_dim): said so
                shown = f"{pname}.shape[{i}] * {packing.pack}" if packing and packing.pack > 1 and i == len(buf.shape) - 1 else ""
                symbols[dim.name] = Symbol(dim.name, str(dim.dtype), pname, i, expr=shown)
                names[dim.name] = f"s_{dim.name}"


_DIM_REF = "__tl_aot_dim__"


def _solve_dims(named: list, symbols: dict[str, Symbol], names: dict[str, str], where: str) -> None:
    """Variables found only inside dim expressions, solved as TileLang's arg binder solves them.

    TileLang hands ``dim == shape[i]`` to TVM's linear solver with the unbound variables as unknowns
    (``n * 2`` gives ``n = shape[i] // 2``) and asserts the equation again; the launcher does the
    same. Dims are tried until none solves more, so the order of the tensors does not matter.
    """
    progress = True
    while progress:
        progress = False
        for _, pname, buf in named:
            for i, dim in enumerate(buf.shape):
                free = [v for v in _vars_of(dim) if not _is_bound(v.name, names)]
                last, packing = i == len(buf.shape) - 1, packing_of(str(buf.dtype))
                if free and _solve_dim(pname, i, dim, free, symbols, names, where, last=last, packing=packing):
                    progress = True


def _solve_dim(
    pname: str,
    i: int,
    dim,
    free: list,
    symbols: dict[str, Symbol],
    names: dict[str, str],
    where: str,
    *,
    last: bool,
    packing: Packing | None,
) -> bool:
    """Bind ``free`` from ``dim == pname.shape[i]`` if TVM's linear solver solves it exactly.

    A packed tensor's last dim (``packing``: int4 in int8) is the storage's times the elements each packs,
    as TileLang's binder reads it.
    """
    from tilelang import tvm

    ref = tvm.tirx.Var(_DIM_REF, dim.dtype)
    try:
        sol = tvm.arith.solve_linear_equations([tvm.tirx.EQ(dim, ref)], free, {})
    except Exception:  # TVM refuses some non-linear forms outright; TileLang cannot bind them either
        return False
    if len(sol.dst.variables):
        return False
    ref_cpp, ref_text = f"x.t_{pname}->shape[{i}]", f"{pname}.shape[{i}]"
    if last and packing is not None and packing.pack > 1:  # a packed last dim: the storage's times the elements it packs
        ref_cpp, ref_text = f"({ref_cpp} * {packing.pack})", f"({ref_text} * {packing.pack})"
    pr = CppExprPrinter({**names, _DIM_REF: ref_cpp}, {}, where)
    for v in free:
        value = sol.src_to_dst[v]
        _check_name(v.name, f"{where}: symbolic dimension of {pname}")
        expr = str(value).replace(_DIM_REF, ref_text)
        symbols[v.name] = Symbol(v.name, str(v.dtype), pname, i, expr=expr, cpp=pr(value))
        names[v.name] = f"s_{v.name}"
    return True


def _is_bound(name: str, names: dict[str, str]) -> bool:
    """Whether a variable has a value in the launcher: a scalar argument or a symbol."""
    return names.get(name, "").startswith(("a_", "s_"))


def _dim_of(x):
    """A dim as the metadata spells it: an int, a variable's name, or the expression's text."""
    from tilelang import tvm

    if isinstance(x, tvm.tirx.IntImm):
        return int(x.value)
    return x.name if isinstance(x, tvm.tirx.Var) else str(x)


def _stride_of(x, names: dict[str, str], what: str):
    """A stride as the metadata spells it; a stride variable must be bound by a shape or a scalar."""
    from tilelang import tvm

    if isinstance(x, tvm.tirx.Var) and not _is_bound(x.name, names):
        msg = f"{what} has a stride variable that no shape binds; tl_aot needs strides derived from shapes"
        raise LoweringError(msg)
    return _dim_of(x)


def _check_bound(buffers: list, names: dict[str, str], where: str) -> None:
    """Every variable of every dim has a value: TileLang's binder refuses the same functions."""
    for _, pname, buf in buffers:
        for s in buf.shape:
            for v in _free_vars(s):
                if not _is_bound(v, names):
                    msg = (
                        f"{where}: tensor {pname!r} has dimension `{s}` whose variable {v!r} no other dimension binds "
                        "(a variable is solved from a dimension only as the one unknown of a linear expression, e.g. n * 2)"
                    )
                    raise LoweringError(msg)


def _check_outputs(params: list, symbols: dict[str, Symbol], where: str) -> None:
    """Returned outputs must be allocatable from the inputs: every dim known from inputs or scalars, dense."""
    outs = [p for p in params if p.output]
    if not outs:
        return
    hint = "pass it as an argument instead (out_idx = [] in the spec, or drop it from out_idx)"
    for p in outs:
        for d in p.shape:
            for v in [d] if d in symbols else _names_in(str(d)):
                sym = symbols.get(v)
                if sym is not None and next(q for q in params if q.name == sym.param).output:
                    msg = f"{where}: output {p.name!r} has dim {d!r}, which no input tensor's shape or scalar argument gives; {hint}"
                    raise LoweringError(msg)
        dense = [math.prod(p.shape[i + 1 :]) if all(isinstance(d, int) for d in p.shape[i + 1 :]) else None for i in range(len(p.shape))]
        if p.strides and any(isinstance(st, int) and want is not None and st != want for st, want in zip(p.strides, dense)):
            msg = f"{where}: output {p.name!r} has strides {p.strides}; a returned output is allocated dense; {hint}"
            raise LoweringError(msg)


def _names_in(expr: str) -> list[str]:
    return re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expr)


def _check_tensor_dtype(dtype: str, what: str, *, output: bool) -> None:
    """A tensor parameter's dtype must be one the launcher can check a DLPack tensor against.

    Checked while lowering, as scalar dtypes are, so the variant fails alone (``--keep-going``
    leaves it out) instead of the launcher stage failing the whole library. A sub-byte dtype
    (``int4``, ``float4_e2m1fn``) is taken packed, as TileLang's host code takes it
    (:mod:`tl_aot.common.subbyte`); one without a storage dtype (6-bit floats) cannot be a returned
    output, as TileLang's JIT cannot allocate it either.
    """
    packing = packing_of(dtype)
    if packing is not None and output and not packing.storage:
        msg = (
            f"{what}: a returned output of dtype {dtype} would be allocated as packed {packing.storage_text} storage, "
            "which no torch dtype holds (TileLang's JIT refuses it too); pass it as an argument instead "
            "(drop it from out_idx)"
        )
        raise LoweringError(msg)
    if dtype not in DLPACK_DTYPES and packing is None:
        takes = ", ".join([*DLPACK_DTYPES, *(f"{d} (packed)" for d in SUBBYTE_DTYPES)])
        msg = f"{what}: tensor dtype {dtype} is not supported by tl_aot launchers (they take {takes})"
        raise LoweringError(msg)


def _check_name(name: str, what: str) -> str:
    """A parameter or dimension name: any identifier (generated C++ only ever spells it prefixed)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name or ""):
        msg = f"{what} {name!r} is not an identifier tl_aot can name in C++: rename it with ASCII letters, digits and '_'"
        raise LoweringError(msg)
    return name


def _vars_of(expr) -> list:
    """The distinct variables of ``expr`` (by name), in the order first met."""
    from tilelang import tvm

    out: dict[str, Any] = {}  # name -> the tvm Var

    def visit(node):
        if isinstance(node, tvm.tirx.Var) and node.name not in out:
            out[node.name] = node

    tvm.tirx.stmt_functor.post_order_visit(tvm.tirx.Evaluate(expr), visit)
    return list(out.values())


def _free_vars(expr) -> list[str]:
    return [v.name for v in _vars_of(expr)]
