"""A tl_aot library's entries as torch custom operators: ``torch.ops.<namespace>.<entry>``.

Each op's schema and fake (meta) implementation come from the library's manifest, so
``torch.compile(fullgraph=True)`` traces models calling them without a graph break and CUDA graphs
capture them. An entry that returns its outputs becomes a functional op (inputs → outputs); an
entry without outputs becomes an op that mutates every tensor it takes.

Standalone on purpose: this module imports only torch and the standard library, never tl_aot, so a
package built by tl_aot ships a copy of it (as ``_tl_aot_torch.py``) and depends on nothing more.
"""

from __future__ import annotations

import ast
import json
import operator
import threading

__all__ = ["TORCH_DTYPES", "register", "schema_of"]

#: TileLang dtype → torch dtype attribute name.
TORCH_DTYPES = {
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float32": "float32",
    "float64": "float64",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "bool": "bool",
    "float8_e4m3": "float8_e4m3fn",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
    "float8_e8m0fnu": "float8_e8m0fnu",
}
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_LOCK = threading.Lock()
#: namespace -> (library name, torch.library.Library): the Library object must stay alive, or torch drops the ops.
_REGISTERED: dict = {}


def _scalar_type(dtype: str) -> str:
    if dtype == "bool":
        return "bool"
    if dtype.startswith(("int", "uint")):
        return "int"
    return "float"


def _outputs(entry: dict) -> list:
    return [p for p in entry["params"] if p.get("output")]


def schema_of(entry: dict) -> str:
    """The op schema of one manifest entry: ``(Tensor x, Tensor b) -> Tensor``, or a mutating one."""
    outs = _outputs(entry)
    parts = []
    alias = 0
    for p in entry["params"]:
        if p.get("output"):
            continue
        if p["kind"] != "tensor":
            parts.append(f"{_scalar_type(p['dtype'])} {p['name']}")
        elif outs:
            parts.append(f"Tensor {p['name']}")
        else:  # nothing declared as output: any tensor may be written
            if alias >= 26:
                msg = f"entry {entry['name']!r}: more than 26 tensors to mark as mutated; declare its outputs (out_idx)"
                raise ValueError(msg)
            parts.append(f"Tensor({chr(ord('a') + alias)}!) {p['name']}")
            alias += 1
    ret = "()" if not outs else ("Tensor" if len(outs) == 1 else "(" + ", ".join("Tensor" for _ in outs) + ")")
    return f"({', '.join(parts)}) -> {ret}"


def _dim_fn(expr, symbols: dict, where: str):
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


def _fake_outputs(torch, entry: dict):
    """A function of the op's arguments making empty outputs shaped as ``entry`` (one specialisation) says."""
    outs = _outputs(entry)
    ins = [p for p in entry["params"] if not p.get("output")]
    where = f"entry {entry.get('export') or entry['name']!r}"
    pos = {p["name"]: i for i, p in enumerate(ins)}
    symbols = {s["name"]: (pos[s["param"]], s["dim"]) for s in entry.get("symbols", ())}
    first_tensor = next(i for i, p in enumerate(ins) if p["kind"] == "tensor")
    specs = [([_dim_fn(d, symbols, where) for d in p["shape"]], getattr(torch, TORCH_DTYPES[p["dtype"]])) for p in outs]

    def fake(*args):
        values = {name: args[i].shape[d] for name, (i, d) in symbols.items()}
        device = args[first_tensor].device
        made = tuple(torch.empty([f(values) for f in dims], dtype=dt, device=device) for dims, dt in specs)
        return made[0] if len(made) == 1 else made

    return fake


def _matcher(torch, entry: dict):
    """Whether a call's arguments fit one specialisation: the rules of tl_aot.dispatch, for fake tensors."""
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


def _implementations(torch, fn, members: list):
    """The real and fake implementations of one exported entry (several members: its specialisations)."""
    if not _outputs(members[0]):
        return fn, lambda *args: None  # every parameter passed: the library's function returns None

    def real(*args):  # several outputs come back as a tvm_ffi.Array
        return tuple(t if isinstance(t, torch.Tensor) else torch.from_dlpack(t) for t in fn(*args))

    fakes = [_fake_outputs(torch, m) for m in members]
    if len(members) == 1:
        fake = fakes[0]
    else:
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

    return (fn if len(_outputs(members[0])) == 1 else real), fake  # one output: no Python frame between


def register(functions, manifest, namespace: str | None = None):
    """Register every entry of a library as ``torch.ops.<namespace>.<entry>``; returns ``torch.ops.<namespace>``.

    ``functions`` maps entry names to the library's functions, ``manifest`` is its manifest (JSON
    text or the parsed dict), ``namespace`` defaults to the library's name. Registering the same
    library again returns the same namespace; a namespace another library took is an error.
    """
    import torch

    if isinstance(manifest, str):
        manifest = json.loads(manifest)
    lib_name = manifest["library"]
    ns = namespace or lib_name
    if not ns.isidentifier() or ns.startswith("_"):
        msg = f"torch op namespace {ns!r} must be an identifier not starting with '_'"
        raise ValueError(msg)
    with _LOCK:
        taken = _REGISTERED.get(ns)
        if taken is not None:
            if taken[0] != lib_name:
                msg = f"torch op namespace {ns!r} already holds the ops of tl_aot library {taken[0]!r}; pass another namespace"
                raise ValueError(msg)
            return getattr(torch.ops, ns)
        groups: dict = {}
        for entry in manifest["entries"]:
            groups.setdefault(entry.get("export") or entry["name"], []).append(entry)
        lib = torch.library.Library(ns, "FRAGMENT")
        for name, members in groups.items():  # one op per exported entry, whatever its specialisations
            lib.define(name + schema_of(members[0]))
            real, fake = _implementations(torch, functions[name], members)
            lib.impl(name, real, "CUDA")
            torch.library.register_fake(f"{ns}::{name}", fake, lib=lib)
        _REGISTERED[ns] = (lib_name, lib)
    return getattr(torch.ops, ns)
