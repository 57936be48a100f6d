"""What a tl_aot op returns, worked out from the library's manifest alone: the fake implementations.

``torch.compile`` traces an op through its fake (meta) implementation, which must make outputs of
the right dtype, shape and device without running a kernel; :func:`tl_aot.runtime.torch_ops.allocating_call`
allocates the real outputs of an entry that takes no input tensor by the same rules. Both read an
entry's record as JSON: each output's dims are functions of the call's values (its symbols, bound
from input dims or solved as the library solves them, and its scalars), a sub-byte output is its
packed storage, and an export with several specialisations picks one by the rules of
:mod:`tl_aot.codegen.dispatch`.

Standalone, as :mod:`tl_aot.runtime.torch_ops` is: this module imports only the standard library
(torch is handed in), and a package built by tl_aot ships a copy of it beside that module's.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Collection
from typing import Any

__all__ = [
    "PACKED_DTYPES",
    "TORCH_DTYPES",
    "Entry",
    "current_device",
    "fake_impl",
    "output_spec",
    "outputs_of",
    "shape_values",
]

#: TileLang dtype → torch dtype attribute name: the same name, but TileLang's ``float8_e4m3`` is torch's ``float8_e4m3fn``
#: and a ``T.tfloat32`` tensor is a ``torch.float32`` one.
_SAME_NAME = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")
_FLOAT8 = ("float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu")
TORCH_DTYPES = {**{t: t for t in _SAME_NAME}, "float8_e4m3": "float8_e4m3fn", **{t: t for t in _FLOAT8}, "custom[tfloat32]": "float32"}
#: A sub-byte TileLang dtype → (logical elements per storage element on the last dim, torch storage dtype), as
#: TileLang's JIT takes and returns it (tl_aot.common.subbyte's table, spelled again: this module imports no tl_aot).
PACKED_DTYPES = {
    "int4": (2, "int8"),
    "uint4": (2, "uint8"),
    "float4_e2m1fn": (2, "float4_e2m1fn_x2"),
    "float6_e2m3fn": (1, ""),
    "float6_e3m2fn": (1, ""),
}
_SHAPE_REF = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\.shape\[(\d+)\]")
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
#: A manifest entry as its JSON reads (this module reads the manifest's JSON, not tl_aot's dataclasses).
Entry = dict[str, Any]


def outputs_of(entry: Entry) -> list[Entry]:
    return [p for p in entry["params"] if p.get("output")]


def output_spec(p: Entry, names: Collection[str], where: str) -> tuple[list[Any], str]:
    """An output's dims (functions of the call's values) and torch dtype name, as TileLang's JIT allocates it.

    A sub-byte output (``int4``) is its packed storage: ``torch.int8`` with the last dim divided by
    the elements each storage element packs (``PACKED_DTYPES``).
    """
    dims = [_dim_fn(d, names, where) for d in p["shape"]]
    if p["dtype"] not in PACKED_DTYPES:
        return dims, TORCH_DTYPES[p["dtype"]]
    pack, storage = PACKED_DTYPES[p["dtype"]]
    last = dims[-1]
    dims[-1] = lambda vals: last(vals) // pack
    return dims, storage


def _dim_scale(p: Entry, d: int) -> int:
    """What a torch dim of input ``p`` is multiplied by to give the kernel's: a packed tensor's last dim, its pack."""
    packed = PACKED_DTYPES.get(p["dtype"]) if p["kind"] == "tensor" else None
    return packed[0] if packed is not None and d == len(p["shape"]) - 1 else 1


def _dim_fn(expr, symbols: Collection[str], where: str):
    """A function of the symbol values computing one output dim (an int, a symbol, or + - * // % of them)."""
    if isinstance(expr, int):
        return lambda _values: expr
    try:
        tree = ast.parse(str(expr), mode="eval").body
    except SyntaxError:
        tree = None

    def check(node) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return
        if isinstance(node, ast.Name) and node.id in symbols:
            return
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            check(node.left)
            check(node.right)
            return
        msg = f"{where}: cannot compute output dim {expr!r} for the fake implementation"
        raise ValueError(msg)

    check(tree)

    def ev(node, values):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return values[node.id]
        return _BINOPS[type(node.op)](ev(node.left, values), ev(node.right, values))

    return lambda values: ev(tree, values)


def shape_values(entry: Entry, where: str):
    """The names an output dim may use (symbols, scalars) and a function of the op's arguments giving their values.

    A symbol is a dim of an input, or solved from one (``n = X.shape[0] // 2``) as the library solves it.
    """
    ins = [p for p in entry["params"] if not p.get("output")]
    pos = {p["name"]: i for i, p in enumerate(ins)}
    scalars = {p["name"]: i for i, p in enumerate(ins) if p["kind"] != "tensor"}
    direct: dict[str, tuple[int, int, int]] = {}  # symbol -> (input position, dim, scale: a packed last dim's pack)
    solved: list[tuple[str, Any, Any]] = []
    for s in entry.get("symbols", ()):
        if not s.get("cpp"):
            direct[s["name"]] = (pos[s["param"]], s["dim"], _dim_scale(ins[pos[s["param"]]], s["dim"]))
            continue
        text, refs = _name_shape_refs(s["expr"], pos)
        known = {*direct, *scalars, *(n for n, _, _ in solved), *(r[0] for r in refs)}
        solved.append((s["name"], _dim_fn(text, known, where), refs))
    names = {*direct, *scalars, *(n for n, _, _ in solved)}

    def values(args: Any) -> dict[str, Any]:
        v = {name: args[i].shape[d] * scale for name, (i, d, scale) in direct.items()}
        v.update({name: args[i] for name, i in scalars.items()})
        for name, fn, refs in solved:
            v.update({ref: args[i].shape[d] for ref, i, d in refs})
            v[name] = fn(v)
        return v

    return names, values


def _name_shape_refs(expr: str, pos: dict[str, int]) -> tuple[str, tuple[tuple[str, int, int], ...]]:
    """``expr`` with each ``X.shape[i]`` renamed to a plain name, and (name, input position, i) per reference."""
    refs: dict[str, tuple[str, int, int]] = {}  # X.shape[i] -> (its plain name, input position, i)

    def name(m) -> str:
        return refs.setdefault(m.group(0), (f"_tl_aot_dim{len(refs)}", pos[m.group(1)], int(m.group(2))))[0]

    return _SHAPE_REF.sub(name, expr), tuple(refs.values())


def current_device(torch):
    """Where an entry taking no input tensor puts its outputs: torch's current CUDA device, as TileLang's JIT does."""
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cuda")


def _fake_outputs(torch, entry: Entry):
    """A function of the op's arguments making empty outputs shaped as ``entry`` (one specialisation) says."""
    outs = outputs_of(entry)
    ins = [p for p in entry["params"] if not p.get("output")]
    where = f"entry {entry.get('export') or entry['name']!r}"
    names, values = shape_values(entry, where)
    first_tensor = next((i for i, p in enumerate(ins) if p["kind"] == "tensor"), None)
    specs = [(dims, getattr(torch, dt)) for dims, dt in (output_spec(p, names, where) for p in outs)]

    def fake(*args):
        vals = values(args)
        device = args[first_tensor].device if first_tensor is not None else current_device(torch)
        made = tuple(torch.empty([f(vals) for f in dims], dtype=dt, device=device) for dims, dt in specs)
        return made[0] if len(made) == 1 else made

    return fake


def _matcher(torch, entry: Entry):
    """Whether a call's arguments fit one specialisation: the rules of tl_aot.codegen.dispatch, for fake tensors."""
    ins = [p for p in entry["params"] if not p.get("output")]
    when = {s: (lo, hi) for s, lo, hi in entry.get("when", ())}
    tests = []
    for i, p in enumerate(ins):
        if p["kind"] != "tensor":
            continue
        dims = [(d, d) if isinstance(d, int) else when.get(d) for d in p["shape"]]
        tests.append((i, getattr(torch, TORCH_DTYPES[p["dtype"]]), dims))

    def matches(args) -> bool:
        for i, dtype, dims in tests:
            t = args[i]
            if t.dtype != dtype or t.dim() != len(dims):
                return False
            if any(r is not None and not r[0] <= t.shape[d] <= r[1] for d, r in enumerate(dims)):
                return False
        return True

    return matches


def fake_impl(torch, members: list):
    """The fake implementation of one exported entry (several members: its specialisations), from the manifest."""
    if not outputs_of(members[0]):
        return lambda *args: None  # every parameter passed: the library's function returns None
    fakes = [_fake_outputs(torch, m) for m in members]
    if len(members) == 1:
        return fakes[0]
    order = sorted(range(len(members)), key=lambda i: bool(members[i].get("fallback")))
    tries = [(_matcher(torch, members[i]), fakes[i]) for i in order]
    name = members[0]["export"]

    def fake(*args):
        for matches, make in tries:
            if matches(args):
                return make(*args)
        got = ", ".join(f"{a.dtype}{list(a.shape)}" for a in args if isinstance(a, torch.Tensor))
        msg = f"{name}: no specialisation takes {got}"
        raise ValueError(msg)

    return fake
