"""Distinct variables that share a name are given distinct names once lowered, as TileLang's own code generator does.

TileLang's builder names a variable after the Python name it was last bound to: ``alpha = alpha_pre``
inside a kernel renames the parameter ``alpha_pre`` to ``alpha``, so three such parameters all read
``alpha`` (TileOPs' mHC kernels). Two ``T.dynamic("m")`` calls are two symbols of one name. TileLang
tells them apart by object and numbers the later ones in the code it writes (``alpha``, ``alpha_1``).
The launcher's metadata is read by name, so after lowering (the device code already written, so its
bytes are the JIT's) the later ones are renamed in place the same way: parameters among parameters,
shape and stride symbols among every parameter and symbol. A ``T.dynamic("X")`` sizing a tensor
``X`` is the same case: TileLang binds the two apart (its CUDA reads ``int X_1``), so the dim is
numbered too rather than the kernel refused.
"""

from __future__ import annotations

from typing import Any

__all__ = ["distinguish_names"]


def distinguish_names(func) -> tuple[tuple[str, str], ...]:
    """Rename, in place, each later parameter or symbol of ``func`` whose name an earlier, different one holds.

    Returns ``(old, new)`` per rename, in parameter order. A symbol named like a tensor parameter is
    numbered like any other (``X`` sized by ``T.dynamic("X")`` gives the symbol ``X_1``), as TileLang's
    JIT, which runs such a kernel, tells the two apart.
    """
    import importlib

    from tilelang import tvm

    IRBuilder = importlib.import_module(f"{tvm.__name__}.script.ir_builder").IRBuilder
    taken: dict[str, Any] = {}  # name -> the object holding it
    for p in func.params:
        buf = func.buffer_map.get(p)
        taken.setdefault(buf.name if buf is not None else p.name, buf if buf is not None else p)
    renamed: list[tuple[str, str]] = []

    def claim(obj, name: str, held: dict[str, Any]) -> None:
        owner = held.get(name)
        if owner is None:
            held[name] = obj
            return
        if owner.same_as(obj):
            return
        n = 1
        while f"{name}_{n}" in taken or f"{name}_{n}" in held:
            n += 1
        fresh = f"{name}_{n}"
        IRBuilder.name(fresh, obj)
        held[fresh] = taken[fresh] = obj
        renamed.append((name, fresh))

    params: dict[str, Any] = {}
    for p in func.params:
        buf = func.buffer_map.get(p)
        claim(buf if buf is not None else p, buf.name if buf is not None else p.name, params)
    symbols: dict[str, Any] = dict(params)  # every parameter's name is held: a tensor's too
    for p in func.params:
        buf = func.buffer_map.get(p)
        if buf is None:
            continue
        for dim in [*buf.shape, *buf.strides]:
            for var in _vars_in(tvm, dim):
                claim(var, var.name, symbols)
    return tuple(renamed)


def _vars_in(tvm, expr) -> list:
    """Every distinct variable object of ``expr``, in the order first met."""
    found: list = []

    def visit(node):
        if isinstance(node, tvm.tirx.Var) and not any(v.same_as(node) for v in found):
            found.append(node)

    tvm.tirx.stmt_functor.post_order_visit(tvm.tirx.Evaluate(expr), visit)
    return found
