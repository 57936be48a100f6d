"""A prim_func to text and back, faithfully: what a capture record stores and what a build from it lowers.

``tvm.ir.save_json`` / ``load_json`` keep every reflected field but not the identity of objects
that live outside the graph. TileLang's layouts are such objects: a ``tl.Layout`` /
``tl.Fragment`` / ``tl.PartialFragment`` (given by ``T.annotate_layout``, made by
``make_swizzled_layout`` and friends) writes its maps over process-global placeholder variables
(``_i``, ``_j``, ... for the input dimensions, ``_rep`` for the replica), which TileLang's C++
matches **by identity** (``OutputShape``, ``ThreadExtent``, injectivity). ``load_json`` makes
fresh variables of the same names, so the output shape of a reloaded swizzled layout becomes its
unevaluated map plus one and lowering fails or, worse, differs. :func:`load_ir` therefore
rebuilds every layout it finds -- in block and loop annotations, attribute statements and the
function's attributes, inside maps and arrays -- through TileLang's own constructors, which put
the global placeholders back. :func:`round_trip_problem` says whether a stored text rebuilds into
the prim_func it was made from: for each layout, its structural hash with free variables by
identity (TileLang's placeholders are process-global: a fresh ``_i`` is what broke) and the facts
TileLang derives from it (output shape, thread extent); and the function's structural hash with
the *other* free variables mapped in order of use. Those cannot keep their identity across
processes and need not: a prim_func may use a variable before the statement that binds it
(``T.Persistent`` computes its tile indices from the wave loop's variable ahead of that loop),
which the hash sees as free, and the round trip keeps it one variable, renamed consistently.
Comparing such variables by identity refused faithful records of every persistent kernel.
``structural_equal`` alone is not enough: it called a broken layout equal.

A custom dtype (``custom[float4_e2m1_unpacked]8``: the 8-bit shared-memory slot of an FP4 value
that TileLang's tcgen05 block-scaled GEMMs stage operands in) is written by ``save_json`` without
its bits (``custom[float4_e2m1_unpacked]``), which ``load_json`` reads back as 32 bits: shared
buffers four times their size and a prim_func that is no longer the one compiled. :func:`save_ir`
therefore writes each custom dtype with the bits the prim_func uses it at.

Everything that reads a record's IR goes through :func:`load_ir`.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["save_ir", "normalized_ir", "load_ir", "rehydrate", "round_trip_problem", "layouts_of", "tl_types"]

_LAYOUT_TYPES = ("tl.Layout", "tl.Fragment", "tl.PartialFragment")


def save_ir(func) -> str:
    """The prim_func as TVM JSON (what a record stores), custom dtypes spelled with their bits."""
    from tilelang import tvm

    text = tvm.ir.save_json(func)
    return _with_custom_bits(text, _custom_dtype_bits(func)) if "custom[" in text else text


_CUSTOM_DTYPE = re.compile(r"custom\[(?P<name>[^\]]+)\](?P<bits>\d*)(?P<lanes>x\d+)?")


def _custom_dtype_bits(func) -> dict[str, set[int]]:
    """The bit widths each custom dtype of ``func`` is used at (buffers, variables, expressions), by type name."""
    from tilelang import tvm

    tirx = tvm.tirx
    seen: dict[str, set[int]] = {}

    def note(dt) -> None:
        if dt is None or int(getattr(dt, "type_code", 0)) < _CUSTOM_TYPE_CODE_BEGIN:
            return
        m = _CUSTOM_DTYPE.match(str(dt))
        if m:
            seen.setdefault(m["name"], set()).add(int(dt.bits))

    def buffer(b) -> None:
        note(b.dtype)

    def visit(n) -> None:
        note(getattr(n, "dtype", None))
        if isinstance(n, tirx.SBlock):
            for b in [*n.alloc_buffers, *(m.buffer for m in n.match_buffers)]:
                buffer(b)
        elif isinstance(n, (tirx.BufferStore, tirx.BufferLoad, tirx.DeclBuffer)):
            buffer(n.buffer)
        elif isinstance(n, tirx.Var):
            element = getattr(getattr(n, "type_annotation", None), "element_type", None)
            note(getattr(element, "dtype", None))

    tirx.stmt_functor.post_order_visit(func.body, visit)
    for b in func.buffer_map.values():
        buffer(b)
    return seen


_CUSTOM_TYPE_CODE_BEGIN = 129  # DLPack's first code for user-registered types (TVM's DataType::kCustomBegin)


def _with_custom_bits(text: str, bits: dict[str, set[int]]) -> str:
    """``text`` with each custom dtype that ``save_json`` wrote without bits given the one width the prim_func uses.

    A type used at two widths stays as written (the round trip check then refuses the record).
    """
    data = json.loads(text)

    def spelled(value: str) -> str:
        m = _CUSTOM_DTYPE.fullmatch(value)
        widths = bits.get(m["name"], set()) if m else set()
        if not m or m["bits"] or len(widths) != 1:
            return value
        return f"custom[{m['name']}]{next(iter(widths))}{m['lanes'] or ''}"

    changed = False
    for node in data.get("nodes", []):
        fields = node.get("data")
        if not isinstance(fields, dict):
            continue
        for key, value in fields.items():
            if isinstance(value, str) and value.startswith("custom["):
                new = spelled(value)
                if new != value:
                    fields[key] = new
                    changed = True
    return json.dumps(data, indent=2) if changed else text


def normalized_ir(func, text: str | None = None) -> str:
    """The prim_func as TVM JSON with source locations blanked (they name the build machine's paths).

    ``text``: the prim_func already saved (:func:`save_ir`), so it is not saved twice.
    """
    data = json.loads(save_ir(func) if text is None else text)
    for node in data.get("nodes", []):
        kind = node.get("type")
        if kind == "ir.SourceName":
            node["data"] = ""
        elif kind == "ir.Span" and isinstance(node.get("data"), dict):
            node["data"] = {k: (v if k == "source_name" else 0) for k, v in node["data"].items()}
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def tl_types(text: str) -> set:
    """The TileLang object types (``tl.*``) a stored prim_func holds."""
    return {str(n.get("type")) for n in json.loads(text).get("nodes", []) if str(n.get("type", "")).startswith("tl.")}


def load_ir(text: str):
    """The prim_func stored as ``text``, with every TileLang layout rebuilt over TileLang's placeholders."""
    from tilelang import tvm

    return rehydrate(tvm.ir.load_json(text))


def _type_key(obj) -> str:
    info = getattr(type(obj), "__tvm_ffi_type_info__", None)
    key = getattr(info, "type_key", None)
    if key:
        return str(key)
    try:
        return str(obj.__tvm_ffi_type_key__) if hasattr(obj, "__tvm_ffi_type_key__") else ""
    except Exception:  # noqa: BLE001
        return ""


def _is_layout(obj) -> bool:
    from tilelang.layout import Layout

    return isinstance(obj, Layout)


def _placeholder(i: int) -> str:
    return "_" + chr(ord("i") + i)  # TileLang's InputPlaceholder(i)


def _named_vars(exprs) -> dict[str, Any]:
    from tilelang import tvm

    tirx = tvm.tirx
    out: dict[str, Any] = {}

    def visit(n) -> None:
        if isinstance(n, tirx.Var):
            out.setdefault(n.name, n)

    for e in exprs:
        if e is not None:
            tirx.stmt_functor.post_order_visit(tirx.Evaluate(e), visit)
    return out


def _rebuild_layout(lay):
    """``lay`` made again by TileLang's constructor, which maps ``_i``, ``_j``, ... and ``_rep`` to its globals."""
    from tilelang import _ffi_api, tvm
    from tilelang.layout import Fragment

    tirx = tvm.tirx
    index = list(lay.forward_index)
    thread = lay.forward_thread if isinstance(lay, Fragment) else None
    named = _named_vars([*index, thread])

    def var(name: str):
        return named.get(name, tirx.Var(name, "int32"))

    forward_vars = [tirx.IterVar(tvm.ir.Range(0, size), var(_placeholder(i)), 0) for i, size in enumerate(lay.input_size)]
    if thread is None:
        return _ffi_api.Layout(forward_vars, index)
    rep = tirx.IterVar(tvm.ir.Range(0, lay.replicate_size), var("_rep"), 0)
    if hasattr(lay, "combine_size"):
        new = _ffi_api.PartialFragment(forward_vars, index, thread, rep, int(lay.combine_size))
    else:
        new = _ffi_api.Fragment(forward_vars, index, thread, rep)
    bound = getattr(lay, "thread_range", None)
    if bound is not None:
        prop = getattr(type(new), "thread_range", None)
        if hasattr(prop, "set"):  # a new object of ours: its thread range is set before anyone sees it
            prop.set(new, bound)
    return new


class _Rebuilder:
    """Rebuilds layouts inside annotation values (maps, arrays), each distinct layout once."""

    def __init__(self) -> None:
        self.done: dict[int, tuple[Any, Any]] = {}  # id of a loaded layout -> (loaded, rebuilt)
        self.count = 0

    def value(self, v):
        if _is_layout(v):
            have = self.done.get(id(v))
            if have is None:
                have = self.done[id(v)] = (v, _rebuild_layout(v))
                self.count += 1
            return have[1]
        if isinstance(v, (str, bytes)) or v is None:
            return v
        if hasattr(v, "items") and callable(v.items):
            items = [(k, self.value(x)) for k, x in v.items()]
            return {k: x for k, x in items} if any(x is not y for (_, x), (_, y) in zip(items, v.items())) else v
        if _is_sequence(v):
            items = [self.value(x) for x in v]
            return items if any(x is not y for x, y in zip(items, v)) else v
        return v

    def annotations(self, ann):
        new = self.value(ann)
        return None if new is ann else new


def _is_sequence(v) -> bool:
    return type(v).__name__ in ("Array", "List", "list", "tuple")


def _holds_layout(func) -> bool:
    from tilelang import tvm

    found: list[object] = []

    def visit(n) -> None:
        if not found and isinstance(n, (tvm.tirx.SBlock, tvm.tirx.For, tvm.tirx.AttrStmt)):
            found.append(_deep_layout(getattr(n, "annotations", None)) or _deep_layout(getattr(n, "node", None)))
            if not found[-1]:
                found.pop()

    tvm.tirx.stmt_functor.post_order_visit(func.body, visit)
    return bool(found) or _deep_layout(func.attrs)


def _deep_layout(v, depth: int = 0) -> bool:
    if v is None or depth > 8 or isinstance(v, (str, bytes)):
        return False
    if _is_layout(v):
        return True
    if hasattr(v, "items") and callable(v.items):
        return any(_deep_layout(x, depth + 1) for _, x in v.items())
    if _is_sequence(v):
        return any(_deep_layout(x, depth + 1) for x in v)
    return False


def rehydrate(func):
    """``func`` (just loaded from JSON) with each TileLang layout rebuilt; unchanged when it holds none."""
    from tilelang import tvm

    tirx = tvm.tirx
    if not _holds_layout(func):
        return func
    rb = _Rebuilder()

    def post(stmt):
        if isinstance(stmt, tirx.SBlock):
            ann = rb.annotations(stmt.annotations)
            if ann is not None:
                return tirx.SBlock(
                    stmt.iter_vars,
                    stmt.reads,
                    stmt.writes,
                    stmt.name_hint,
                    stmt.body,
                    stmt.init,
                    stmt.alloc_buffers,
                    stmt.match_buffers,
                    ann,
                )
        elif isinstance(stmt, tirx.For):
            ann = rb.annotations(stmt.annotations)
            if ann is not None:
                step = (stmt.step,) if getattr(stmt, "step", None) is not None else ()  # absent before TileLang 0.1.14
                return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, stmt.body, stmt.thread_binding, ann, *step)
        elif isinstance(stmt, tirx.AttrStmt):
            node = rb.value(stmt.node)
            if node is not stmt.node:
                return tirx.AttrStmt(node, stmt.attr_key, stmt.value, stmt.body)
        return None

    body = tirx.stmt_functor.ir_transform(func.body, None, post, ["tirx.SBlock", "tirx.For", "tirx.AttrStmt"])
    out = func if body.same_as(func.body) else tirx.PrimFunc(func.params, body, func.ret_type, func.buffer_map, func.attrs)
    for key, value in dict(func.attrs or {}).items():
        new = rb.value(value)
        if new is not value:
            out = out.with_attr(key, new)
    return out


def layouts_of(func) -> list:
    """Every TileLang layout the prim_func holds (annotations, attribute statements, function attributes), in visit order."""
    from tilelang import tvm

    tirx = tvm.tirx
    out: list = []

    def collect(v, depth: int = 0) -> None:
        if v is None or depth > 8 or isinstance(v, (str, bytes)):
            return
        if _is_layout(v):
            out.append(v)
        elif hasattr(v, "items") and callable(v.items):
            for _, x in sorted(v.items(), key=lambda kv: str(kv[0])):
                collect(x, depth + 1)
        elif _is_sequence(v):
            for x in v:
                collect(x, depth + 1)

    def visit(n) -> None:
        if isinstance(n, (tirx.SBlock, tirx.For)):
            collect(n.annotations)
        elif isinstance(n, tirx.AttrStmt):
            collect(n.node)

    tirx.stmt_functor.post_order_visit(func.body, visit)
    collect(func.attrs)
    return out


def _facts(lay) -> str:
    """What TileLang derives from a layout, spelled: input and output shape (and thread extent, replicas)."""
    from tilelang import _ffi_api
    from tilelang.layout import Fragment

    text = f"{_type_key(lay) or type(lay).__name__} {list(lay.input_size)} -> {list(_ffi_api.Layout_output_shape(lay))}"
    if isinstance(lay, Fragment):
        text += f" threads {_ffi_api.Fragment_thread_size(lay)} replicate {lay.replicate_size}"
    return text


def round_trip_problem(func, text: str | None = None) -> str:
    """Why ``text`` (default: ``func`` saved now) does not rebuild into ``func``; '' when it does.

    Compared: each layout's derived facts and structural hash (its placeholders by identity:
    TileLang's are process-global), then the function's structural hash with other free variables
    mapped consistently. Never raises: a failure to load is a reason.
    """
    from tilelang import tvm

    try:
        back = load_ir(save_ir(func) if text is None else text)
    except Exception as e:  # noqa: BLE001
        return f"the stored IR does not load: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
    try:
        mine, theirs = layouts_of(func), layouts_of(back)
        if len(mine) != len(theirs):
            return f"{len(mine)} TileLang layouts before the round trip, {len(theirs)} after"
        for a, b in zip(mine, theirs):
            fa, fb = _facts(a), _facts(b)
            if fa != fb:
                return f"a layout changed across the round trip: {fa} came back as {fb}"
        for a, b in zip(mine, theirs):
            if int(tvm.ir.structural_hash(a)) != int(tvm.ir.structural_hash(b)):
                return f"a layout's placeholders changed across the round trip: {_facts(a)} no longer maps TileLang's own variables"
        if int(tvm.ir.structural_hash(func, map_free_vars=True)) != int(tvm.ir.structural_hash(back, map_free_vars=True)):
            kinds = ", ".join(sorted(tl_types(save_ir(func)))) or "no TileLang objects"
            return f"the structural hash changed across the round trip (the prim_func holds {kinds})"
    except Exception as e:  # noqa: BLE001
        return f"the round trip could not be checked: {type(e).__name__}: {str(e).strip()[:200]}"
    return ""
