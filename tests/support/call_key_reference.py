"""A call key spelled the slow, obvious way: the oracle ``tl_aot.call_keys.key`` is checked against.

The package writes the key's JSON text directly and keeps a function's spelling between calls;
this spells the same material as Python lists and dicts, afresh every time (global names by
``dis``, no memo), and encodes it with ``json.dumps``. Equal keys mean the fast path spells the
material the module docstring describes, byte for byte.
"""

from __future__ import annotations

import collections
import dataclasses
import dis
import enum
import hashlib
import importlib.util
import json
import os
import sys
import types
from typing import Any

from tl_aot.call_keys import key as ck
from tl_aot.call_keys.code_source import code_source_digest
from tl_aot.config.options import plain_pass_configs

__all__ = ["reference_key", "reference_text"]


def _global_names(code: types.CodeType) -> set[str]:
    names = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _imports(code: types.CodeType) -> list[tuple[str, int, Any]]:
    """Each import in ``code`` (and code defined in it): (module as written, level, names or None), by ``dis``."""
    found, ins = [], [i for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"]
    for i, x in enumerate(ins):
        if x.opname == "IMPORT_NAME":
            found.append((x.argval, ins[i - 2].argval, ins[i - 1].argval))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found += _imports(const)
    return found


def _spell_global(code: types.CodeType, name: str, value: Any, depth: int) -> Any:
    """A global's value; a user's module by the attributes every load of ``name`` in the code (nested code too) reads."""
    if type(value) is not types.ModuleType or ck._library(value.__name__):
        return _spell(value, depth)
    read = set()
    codes = [code]
    while codes:
        c = codes.pop()
        codes += [k for k in c.co_consts if isinstance(k, types.CodeType)]
        steps = [i for i in dis.get_instructions(c) if i.opname not in ("CACHE", "EXTENDED_ARG")]
        for x, after in zip(steps, [*steps[1:], None]):
            if x.opname in ("LOAD_GLOBAL", "LOAD_NAME") and x.argval == name:
                if after is None or after.opname not in ("LOAD_ATTR", "LOAD_METHOD"):
                    raise ck.Unkeyable(name)
                read.add(after.argval)
    return ["user module", value.__name__, {a: _spell(vars(value)[a], depth) for a in sorted(read)}]


def _spell(v: Any, depth: int) -> Any:
    if isinstance(v, enum.Enum):
        return _spell_enum(v, depth)
    if type(v) not in _EXACT and isinstance(v, _VALUE_TYPES) and not isinstance(v, enum.Enum) and _users_bases(type(v)):
        return _spell_subclass(v, _users_bases(type(v)), depth)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [type(v).__name__, [_spell(x, depth) for x in v]]
    if isinstance(v, dict):
        items = ["dict", [[_spell(k, depth), _spell(x, depth)] for k, x in v.items()]]
        return ["defaultdict", _spell(v.default_factory, depth), items] if type(v) is collections.defaultdict else items
    if isinstance(v, types.ModuleType):
        if ck._library(v.__name__):
            return ["module", v.__name__]
        raise ck.Unkeyable(v.__name__)
    if isinstance(v, type) and ck._library(getattr(v, "__module__", "")):
        return ["class", f"{v.__module__}.{v.__qualname__}"]
    if isinstance(v, enum.EnumMeta):
        return _spell_enum_class(v, depth)
    if isinstance(v, type):
        classes = [c for c in v.__mro__ if c is not object]
        if all(_plain(c) for c in classes) and any(c is v for c in _SPELLING):
            return ["user class ref", f"{v.__module__}.{v.__qualname__}"]
        if depth > 0 and all(_plain(c) for c in classes):
            return ["user class", _spell_classes(classes, depth)]
        users = _users_bases(v) if issubclass(v, _VALUE_TYPES) else []
        if users and any(c is users[0] for c in _SPELLING):
            return ["user class ref", f"{users[0].__module__}.{users[0].__qualname__}"]
        if users and depth > 0:
            return ["subclass class", _spell_classes(users, depth), next(b for b in _VALUE_TYPES if issubclass(v, b)).__name__]
        raise ck.Unkeyable(v.__qualname__)
    if type(v).__name__ == "dtype" and type(v).__module__ == "torch":
        return ["torch.dtype", str(v)]
    if isinstance(v, (types.FunctionType, types.BuiltinFunctionType)) or hasattr(v, "orig_func") or type(v).__name__ == "JITImpl":
        return _spell_function(v, depth)
    classes = [c for c in type(v).__mro__ if c is not object]
    if depth > 0 and classes and all(_plain(c) for c in classes):
        try:
            attributes = dict(object.__getattribute__(v, "__dict__"))  # its own, whatever its class's __getattribute__ does
        except AttributeError:  # a slots=True dataclass: no __dict__
            attributes = {}
        for c in classes:  # a slots=True dataclass's values
            for name in _slots(c):
                if name not in ("__weakref__", "__dict__"):
                    attributes[name] = object.__getattribute__(v, name)
        spelled = {k: _spell(x, depth - 1) for k, x in attributes.items()}
        if any(c is type(v) for c in _SPELLING):  # an instance named inside its class's body
            return ["object", ["user class ref", f"{type(v).__module__}.{type(v).__qualname__}"], spelled]
        return ["object", _spell_classes(classes, depth), spelled]
    raise ck.Unkeyable(type(v).__qualname__)


_EXACT = (bool, int, float, str, list, tuple, dict)
_VALUE_TYPES = (str, int, float, tuple, list, dict)


def _users_bases(cls: type) -> list[type]:
    """The classes of ``cls``'s chain a class statement of the user's made: not C types, not a library's or collections',
    typing's or enum's own; one with a metaclass, slots holding values or its own ``__dict__`` is unkeyable."""
    users = []
    for c in cls.__mro__:
        if not type.__dict__["__flags__"].__get__(c) & (1 << 9):  # not a heap type: a C type
            continue
        module = vars(c).get("__module__", "builtins")
        if type(module) is not str:
            raise ck.Unkeyable(c.__qualname__)
        if ck._library(module) or module.partition(".")[0] in ("collections", "typing", "enum"):
            continue
        if type(c) is not type or vars(c).get("__slots__", ()) not in ((), []) or not _plain_dict(c):
            raise ck.Unkeyable(c.__qualname__)
        users.append(c)
    return users


def _plain_dict(c: type) -> bool:
    return all(type(vars(c)[n]) is types.GetSetDescriptorType for n in ("__dict__", "__weakref__") if n in vars(c))


def _spell_subclass(v: Any, users: list[type], depth: int) -> list[Any]:
    if depth <= 0:
        raise ck.Unkeyable(type(v).__qualname__)
    if isinstance(v, dict):
        value: Any = ["dict", [[_spell(k, depth), _spell(x, depth)] for k, x in dict.items(v)]]
    elif isinstance(v, (tuple, list)):
        base = tuple if isinstance(v, tuple) else list
        value = [base.__name__, [_spell(x, depth) for x in base.__iter__(v)]]
    else:
        base = str if isinstance(v, str) else int if isinstance(v, int) else float
        value = _spell(getattr(base, f"__{base.__name__}__")(v), depth)  # str.__str__, int.__int__, float.__float__
    try:
        held = dict(object.__getattribute__(v, "__dict__"))
    except AttributeError:
        held = {}
    if any(not isinstance(k, str) for k in held):
        raise ck.Unkeyable(type(v).__qualname__)
    attributes = {k: _spell(x, depth - 1) for k, x in held.items()}
    if any(c is users[0] for c in _SPELLING):
        return ["subclass", ["user class ref", f"{users[0].__module__}.{users[0].__qualname__}"], value, attributes]
    return ["subclass", _spell_classes(users, depth), value, attributes]


def _written_by_collections(c: type, n: str, m: Any) -> bool:
    """A member namedtuple (or typing.NamedTuple) wrote in a class it made: not what the class's author wrote."""
    own = vars(c)
    if not (issubclass(c, tuple) and type(own.get("_fields")) is tuple and type(own.get("_field_defaults")) is dict):
        return False
    if n in ("__orig_bases__", "_field_types"):
        return True
    if n in ("__slots__", "__match_args__"):
        return type(m) is tuple and all(type(x) is str for x in m) and m == (() if n == "__slots__" else own["_fields"])
    f = m.__func__ if isinstance(m, (staticmethod, classmethod)) else m
    if isinstance(f, types.FunctionType):
        if f.__module__ == "collections" and f.__code__.co_filename == collections.__file__:
            return True
        name = f.__globals__.get("__name__")
        return n == "__new__" and f.__code__.co_filename == "<string>" and isinstance(name, str) and name.startswith("namedtuple_")
    return n in own["_fields"] and type(m).__name__ == "_tuplegetter"


_NOISE = {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__", "__firstlineno__", "__static_attributes__"}
_DATACLASS_WRITES = {"__init__", "__repr__", "__eq__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__setattr__", "__delattr__"}


def _is_dataclass(c: type) -> bool:
    return "__dataclass_fields__" in vars(c) and "__dataclass_params__" in vars(c)


def _slots(c: type) -> list[str]:
    slots = vars(c).get("__slots__", [])
    return [slots] if isinstance(slots, str) else list(slots)


def _plain(c: type) -> bool:
    """A user's class with no metaclass and no slots, or slots that are its dataclass fields (and __weakref__)."""
    if type(c) is not type or ck._library(c.__module__):
        return False
    if any(type(vars(c)[n]) is not types.GetSetDescriptorType for n in ("__dict__", "__weakref__") if n in vars(c)):
        return False  # a __dict__ property: the instance's attributes are not what object.__getattribute__ gives
    return "__slots__" not in vars(c) or (
        _is_dataclass(c) and all(n in vars(c)["__dataclass_fields__"] or n == "__weakref__" for n in _slots(c))
    )


def _written_by_dataclasses(name: str, member: Any) -> bool:
    """dataclasses' own pickling or replace function, a function it compiled (from "<string>", inside __create_fn__), or
    the recursion guard it wraps __repr__ in around one."""
    own = {"__getstate__": "_dataclass_getstate", "__setstate__": "_dataclass_setstate", "__replace__": "_replace"}
    if name in own:
        return hasattr(dataclasses, own[name]) and member is getattr(dataclasses, own[name])
    if name not in _DATACLASS_WRITES or not isinstance(member, types.FunctionType):
        return False
    guard_dir = os.path.dirname(dataclasses.__file__)
    if name == "__repr__" and os.path.dirname(member.__code__.co_filename) == guard_dir:
        member = vars(member).get("__wrapped__")
        if not isinstance(member, types.FunctionType):
            return False
    code = member.__code__
    compiled = code.co_filename == "<string>" and code.co_name == name
    return compiled and (sys.version_info < (3, 11) or code.co_qualname == f"__create_fn__.<locals>.{name}")


def _annotation(t: Any) -> Any:
    if isinstance(t, str):
        return t
    if isinstance(t, type):
        return ["type", f"{t.__module__}.{t.__qualname__}"]
    if " at 0x" in repr(t):
        raise ck.Unkeyable(repr(t))
    return ["annotation", repr(t)]


def _spell_dataclass(c: type, depth: int) -> dict[str, Any]:
    def value(x: Any) -> Any:
        return ["missing"] if x is dataclasses.MISSING else _spell(x, depth)

    fields = []
    for f in vars(c)["__dataclass_fields__"].values():
        flags = [f.init, f.repr, f.hash, f.compare, getattr(f, "kw_only", False), f._field_type.name]
        fields.append([f.name, _spell(_annotation(f.type), depth), value(f.default), value(f.default_factory), *map(value, flags)])
    params = vars(c)["__dataclass_params__"]
    names = ("init", "repr", "eq", "order", "unsafe_hash", "frozen")
    return {"fields": fields, "params": {n: getattr(params, n) for n in names}}


_SPELLING: list[type] = []  # the classes whose bodies are being spelled: named again inside them, by name


def _spell_classes(classes: list[type], depth: int) -> list[Any]:
    _SPELLING.extend(classes)
    try:
        return _spell_bodies(classes, depth)
    finally:
        del _SPELLING[-len(classes) :]


def _spell_bodies(classes: list[type], depth: int) -> list[Any]:
    spelled = []
    for c in classes:
        members = {}
        for n, m in vars(c).items():
            if n in _NOISE or _written_by_collections(c, n, m):
                continue
            if _is_dataclass(c) and (
                n in ("__dataclass_fields__", "__dataclass_params__") or n in _slots(c) or _written_by_dataclasses(n, m)
            ):
                continue
            members[n] = _spell_member(m, depth)
        if _is_dataclass(c):
            members["__dataclass__"] = _spell_dataclass(c, depth)
        spelled.append([f"{c.__module__}.{c.__qualname__}", members])
    return spelled


def _users_enum(c: type) -> bool:
    return c.__module__ not in ("enum", "builtins") and not ck._library(c.__module__)


def _spell_enum(v: enum.Enum, depth: int) -> Any:
    name = f"{type(v).__module__}.{type(v).__qualname__}"
    if not _users_enum(type(v)):  # a library's: its number or string, else its name
        return v if isinstance(v, (int, float, str)) else ["enum", name, v.name]
    return ["enum", name, v._name_, _spell(v._value_, depth - 1), _spell_enum_class(type(v), depth)]


_CODE = (types.FunctionType, staticmethod, classmethod, property, types.DynamicClassAttribute)


def _spell_enum_class(cls: type, depth: int) -> Any:
    if not _users_enum(cls):
        return ["class", f"{cls.__module__}.{cls.__qualname__}"]
    if any(c is cls for c in _SPELLING):
        return ["user class ref", f"{cls.__module__}.{cls.__qualname__}"]
    if depth <= 0:
        raise ck.Unkeyable(cls.__qualname__)
    classes = [c for c in cls.__mro__ if _users_enum(c)]
    _SPELLING.extend(classes)
    try:
        spelled = []
        for c in classes:
            if not issubclass(c, enum.Enum):
                if not _plain(c):
                    raise ck.Unkeyable(c.__qualname__)
                spelled.extend(_spell_bodies([c], depth))
                continue
            body: dict[str, Any] = {}
            if c is cls:
                body["__members__"] = [[n, _spell(m._value_, depth - 1)] for n, m in c.__members__.items()]
            for n, m in vars(c).items():
                f = m.__func__ if isinstance(m, (staticmethod, classmethod)) else getattr(m, "fget", m)
                if isinstance(m, _CODE) and not isinstance(m, enum.Enum) and getattr(f, "__module__", None) != "enum":
                    body[n] = _spell_member(m, depth)
            spelled.append([f"{c.__module__}.{c.__qualname__}", body])
    finally:
        del _SPELLING[-len(classes) :]
    return ["user enum", spelled]


def _spell_member(m: Any, depth: int) -> Any:
    if isinstance(m, (staticmethod, classmethod)):
        return [type(m).__name__, _spell_function(m.__func__, depth)]
    if isinstance(m, (property, types.DynamicClassAttribute)):
        return ["property", [None if f is None else _spell_function(f, depth) for f in (m.fget, m.fset, m.fdel)]]
    return _spell(m, depth)


def _spell_function(fn: Any, depth: int) -> list[Any]:
    fn = fn.func if type(fn).__name__ == "JITImpl" else fn
    fn = getattr(fn, "orig_func", None) or fn
    module = getattr(fn, "__module__", "") or ""
    name = f"{module}.{getattr(fn, '__qualname__', '?')}"
    if isinstance(fn, types.BuiltinFunctionType) or ck._library(module):
        return ["function", name]
    if depth <= 0:
        raise ck.Unkeyable(name)
    code, glb = fn.__code__, fn.__globals__
    source = code_source_digest(code, glb)
    if not source:
        raise ck.Unkeyable(name)
    closure = {var: _spell(cell.cell_contents, depth - 1) for var, cell in zip(code.co_freevars, fn.__closure__ or ())}
    names = _global_names(code)
    if any(n not in glb for n in names & {"globals", "vars", "eval", "exec", "__import__", "open"}):
        raise ck.Unkeyable(name)  # reads globals by a computed name, or a file
    used = {n: _spell_global(code, n, glb[n], depth - 1) for n in sorted(names) if n in glb}
    for module, level, imported in _imports(code):
        absolute = importlib.util.resolve_name("." * level + module, glb.get("__package__")) if level else module
        if ck._library(absolute):
            continue
        if imported is None or "*" in imported or not isinstance(sys.modules.get(absolute), types.ModuleType):
            raise ck.Unkeyable(name)  # a module in a local, every name, or a module the body has not imported yet
        for n in imported:
            if n not in vars(sys.modules[absolute]):  # missing, or made by the module's __getattr__
                raise ck.Unkeyable(name)
            used[f"from {absolute} import {n}"] = _spell(vars(sys.modules[absolute])[n], depth - 1)
    defaults = [
        ["list", [_spell(x, depth - 1) for x in fn.__defaults__ or ()]],
        ["dict", [[_spell(k, depth - 1), _spell(x, depth - 1)] for k, x in (fn.__kwdefaults__ or {}).items()]],
    ]
    return ["function", name, source, closure, used, defaults]


def reference_text(v: Any, depth: int = ck._DEPTH) -> str:
    """``json.dumps`` of value ``v``'s spelling (what ``call_key._text`` must write)."""
    return json.dumps(_spell(v, depth), sort_keys=True, separators=(",", ":"))


def _positional(jit: Any, n: int) -> list[Any]:
    """The parameter name of each of ``n`` positional arguments (None past the named ones)."""
    sig = getattr(getattr(jit, "func", None), "signature", None)
    names = [p.name for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)] if sig else []
    return [*names, *[None] * n][:n]


def _spell_arg(jit: Any, name: Any, v: Any) -> Any:
    """An argument's spelling; a torch tensor given to an eager kernel's annotated tensor parameter by dtype, shape, strides."""
    import torch

    eager = getattr(jit, "mode", None) == "eager" and name in (getattr(getattr(jit, "func", None), "tensor_args", None) or {})
    if eager and type(v) in (torch.Tensor, torch.nn.Parameter):
        return ["tensor", str(v.dtype), list(v.shape), list(v.stride())]
    return _spell(v, ck._ARG_DEPTH)


def reference_key(jit: Any, args: tuple[Any, ...], kwargs: dict[str, Any], gpu: str) -> str:
    """The key of ``jit(*args, **kwargs)`` on ``gpu`` as the whole material's ``json.dumps`` gives it, spelled afresh."""
    import tilelang

    material = {
        "schema": ck.CALL_SCHEMA,
        "tilelang": str(tilelang.__version__),
        "function": _spell_function(jit, ck._DEPTH),
        "args": ["list", [_spell_arg(jit, name, v) for name, v in zip(_positional(jit, len(args)), args)]],
        "kwargs": ["dict", [[k, _spell_arg(jit, k, v)] for k, v in sorted(kwargs.items())]],
        "out_idx": _spell(jit.out_idx, 0),
        "backend": str(jit.execution_backend),
        "target": str(jit.target),
        "target_host": str(jit.target_host),
        "pass_configs": _spell(plain_pass_configs(dict(jit.pass_configs or {})), 0),
        "compile_flags": _spell(jit.compile_flags, 0),
        "gpu": gpu,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]
