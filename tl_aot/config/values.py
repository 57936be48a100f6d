"""Argument values beyond Python literals: how they are spelled, evaluated and keyed.

Operator libraries call their factories with ``torch.float16``, ``float("inf")``, named tuples,
dataclass configs and enums. Where a value cannot be written as a literal (the CLI, spec files,
CMake) it is spelled as a restricted Python expression, an :class:`Expr`, evaluated in the kernel
module's namespace when the kernel is built (``torch.float16``, ``GemmConfig(block_m=128)``,
``float('inf')``). Every value has one canonical spelling (:func:`spell`) that cache keys and
``inspect`` use, so two values that build different kernels never share a key.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import enum
import importlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..common.errors import LoweringError, SpecError

#: ``(name, value)`` pairs in the order given: an entry's args, factory_args or jit_args (values as :func:`as_spec_value` keeps them).
NamedValues = tuple[tuple[str, Any], ...]

__all__ = ["NamedValues", "Expr", "parse_value_text", "from_spec_value", "as_spec_value", "spell", "evaluate"]

#: AST nodes an argument expression may hold: names, attributes, calls, literals and containers.
_ALLOWED = (
    ast.Expression,
    ast.Name,
    ast.Attribute,
    ast.Call,
    ast.keyword,
    ast.Constant,
    ast.Tuple,
    ast.List,
    ast.Dict,
    ast.Set,
    ast.UnaryOp,
    ast.USub,
    ast.UAdd,
    ast.Load,
)


@dataclass(frozen=True)
class Expr:
    """A value spelled as a Python expression, evaluated in the kernel module when it is built."""

    text: str

    def __post_init__(self) -> None:
        tree = _parse(self.text)
        object.__setattr__(self, "text", ast.unparse(tree))  # one spelling per expression

    def __repr__(self) -> str:
        return self.text


def _parse(text: str) -> ast.Expression:
    """``text`` as an expression tree of names, attributes, calls, literals and containers only."""
    if not isinstance(text, str) or not text.strip():
        msg = f"expression {text!r} is empty"
        raise SpecError(msg)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        msg = f"{text!r} is not a Python expression"
        raise SpecError(msg) from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED) or isinstance(node, ast.Call) and any(k.arg is None for k in node.keywords):
            msg = (
                f"{text!r}: only names, attributes, calls, literals, tuples, lists and dicts may spell a value "
                f"(found {type(node).__name__})"
            )
            raise SpecError(msg)
        if isinstance(node, ast.Call) and any(isinstance(a, ast.Starred) for a in node.args):
            msg = f"{text!r}: *args cannot spell a value"
            raise SpecError(msg)
    return tree


def parse_value_text(raw: str, what: str) -> object:
    """A command-line value: a Python literal, else a dotted name or call (an :class:`Expr`), else a bare word (a string).

    ``M=4096``, ``dtype='float16'`` and ``dtype=float16`` (a bare word) are as before;
    ``dtype=torch.float16``, ``cfg=GemmConfig(block_m=128)`` and ``eps=float('inf')`` are expressions.
    """
    raw = raw.strip()
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    if raw.isidentifier():
        return raw  # dtype=float16: a bare word is a string
    try:
        return Expr(raw)
    except SpecError as e:
        msg = f"{what}: {e} (quote strings: '...')"
        raise SpecError(msg) from None


def from_spec_value(value: object, what: str) -> Any:
    """A spec-file value with ``{_expr_ = "..."}`` / ``{_target_ = "pkg.Cls", _args_ = [...], k = v}`` tables turned into :class:`Expr`."""
    if isinstance(value, dict):
        if "_expr_" in value:
            if set(value) != {"_expr_"} or not isinstance(value["_expr_"], str):
                msg = f'{what}: an {{_expr_ = "..."}} table holds that one string and nothing else'
                raise SpecError(msg)
            try:
                return Expr(value["_expr_"])
            except SpecError as e:
                msg = f"{what}: {e}"
                raise SpecError(msg) from None
        if "_target_" in value:
            target = value["_target_"]
            pos = value.get("_args_", [])
            if not isinstance(target, str) or not all(p.isidentifier() for p in target.split(".")):
                msg = f"{what}: _target_ must be a dotted name such as 'mypkg.configs.GemmConfig', got {target!r}"
                raise SpecError(msg)
            if not isinstance(pos, list):
                msg = f"{what}: _args_ must be a list"
                raise SpecError(msg)
            kw = {k: v for k, v in value.items() if k not in ("_target_", "_args_")}
            parts = [spell(from_spec_value(a, what)) for a in pos]
            parts += [f"{k}={spell(from_spec_value(v, what))}" for k, v in kw.items()]
            return Expr(f"{target}({', '.join(parts)})")
        return {k: from_spec_value(v, f"{what}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [from_spec_value(v, what) for v in value]
    return value


def _is_literal(value: object) -> bool:
    if value is None or isinstance(value, (bool, int, float, str, bytes)) and not isinstance(value, enum.Enum):
        return type(value) in (type(None), bool, int, float, str, bytes)
    if type(value) in (tuple, list) and isinstance(value, (tuple, list)):  # exactly these (the isinstance narrows)
        return all(_is_literal(v) for v in value)
    if type(value) is dict and isinstance(value, dict):
        return all(_is_literal(k) and _is_literal(v) for k, v in value.items())
    return False


def as_spec_value(value: object) -> object:
    """A setup.py value as a spec holds it: literals as they are, objects as the :class:`Expr` of their spelling.

    The expression is evaluated after the kernel module is imported, so a config class or enum
    is the one the kernel module sees (a pickled object would be an instance of a stale copy).
    """
    if isinstance(value, Expr) or _is_literal(value):
        return value
    text = spell(value)
    try:
        return Expr(text)
    except SpecError:
        return value  # no evaluable spelling (module:repr): passed as the object itself


def spell(value: object) -> str:
    """The canonical spelling of ``value``: equal spellings build the same kernel (used in keys and ``inspect``).

    Raises :class:`SpecError` for a value with no faithful spelling (an object whose ``repr``
    is its address): its key would change every run or, worse, collide.
    """
    if isinstance(value, Expr):
        return value.text
    if value is None or isinstance(value, (bool, str, bytes)):
        return repr(value)
    if isinstance(value, enum.Enum):
        return f"{type(value).__module__}.{type(value).__qualname__}.{value.name}"
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, float):
        return f"float('{value}')" if math.isinf(value) or math.isnan(value) else repr(value)
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):  # a named tuple
        inner = ", ".join(f"{f}={spell(getattr(value, f))}" for f in type(value)._fields)  # type: ignore[attr-defined]
        return f"{type(value).__module__}.{type(value).__qualname__}({inner})"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        inner = ", ".join(f"{f.name}={spell(getattr(value, f.name))}" for f in dataclasses.fields(value))
        return f"{type(value).__module__}.{type(value).__qualname__}({inner})"
    if isinstance(value, tuple):
        return "(" + ", ".join(spell(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(spell(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{spell(k)}: {spell(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (set, frozenset)):
        return f"{type(value).__name__}([" + ", ".join(sorted(spell(v) for v in value)) + "])"
    kind = type(value)
    text = repr(value)
    if kind.__module__ == "torch" and kind.__name__ == "dtype":
        return text  # torch.float16
    if " at 0x" in text or text.startswith("<"):
        msg = (
            f"a value of type {kind.__module__}.{kind.__qualname__} ({text[:60]}) has no faithful spelling; "
            "use a literal, a dataclass, a named tuple, an enum or a dtype"
        )
        raise SpecError(msg)
    return f"{kind.__module__}.{kind.__qualname__}:{text}"


def evaluate(value: object, namespace: Mapping[str, Any], where: str) -> Any:
    """``value`` with every :class:`Expr` in it evaluated against ``namespace`` (the kernel module's globals)."""
    if isinstance(value, Expr):
        try:
            return _eval(_parse(value.text).body, namespace)
        except Exception as e:  # noqa: BLE001 (the user's constructor failed: name the value)
            msg = f"{where}: evaluating {value.text}: {type(e).__name__}: {e}"
            raise LoweringError(msg) from e
    if isinstance(value, tuple) and not hasattr(type(value), "_fields"):
        return tuple(evaluate(v, namespace, where) for v in value)
    if isinstance(value, list):
        return [evaluate(v, namespace, where) for v in value]
    if isinstance(value, dict):
        return {k: evaluate(v, namespace, where) for k, v in value.items()}
    return value


def _eval(node: ast.expr, ns: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return _lookup(node.id, ns)
    if isinstance(node, ast.Attribute):
        base = _eval(node.value, ns)
        try:
            return getattr(base, node.attr)
        except AttributeError:
            name = getattr(base, "__name__", None)
            if isinstance(name, str) and type(base).__name__ == "module":
                return importlib.import_module(f"{name}.{node.attr}")  # a submodule not yet imported
            raise
    if isinstance(node, ast.Call):
        fn = _eval(node.func, ns)
        # _parse refused ``**kwargs``: every keyword has its name
        return fn(*[_eval(a, ns) for a in node.args], **{k.arg: _eval(k.value, ns) for k in node.keywords if k.arg is not None})
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [_eval(e, ns) for e in node.elts]
        return {ast.Tuple: tuple, ast.List: list, ast.Set: set}[type(node)](items)
    if isinstance(node, ast.Dict):
        return {_eval(k, ns): _eval(v, ns) for k, v in zip(node.keys, node.values) if k is not None}  # no ``**d``: _parse refused it
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, ns)
        return -v if isinstance(node.op, ast.USub) else +v
    msg = f"cannot evaluate {type(node).__name__}"  # pragma: no cover - _parse refuses them
    raise LoweringError(msg)


def _lookup(name: str, ns: Mapping[str, Any]) -> Any:
    """A name in the kernel module, else a builtin (``float``), else an importable module (``torch``)."""
    if name in ns:
        return ns[name]
    if hasattr(builtins, name):
        return getattr(builtins, name)
    try:
        return importlib.import_module(name)
    except ImportError:
        msg = f"name {name!r} is neither defined in the kernel module, a builtin, nor an importable module"
        raise NameError(msg) from None
