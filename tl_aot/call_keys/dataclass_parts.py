"""What a call key reads of a user's dataclass: its fields and parameters, in place of the methods ``dataclasses`` writes.

``dataclasses`` makes ``__init__``, ``__eq__``, ``__hash__``, ``__setattr__`` (frozen) and the
rest with ``exec``: code with no source file, which a call key cannot digest, so a kernel factory
taking or closing over a config dataclass was unkeyed and served by its traced prim_func. Those
methods follow from the fields and the decorator's parameters, so a dataclass is spelled by those
instead (:mod:`tl_aot.call_keys.key` spells the values), and by the methods its author wrote. A
``slots=True`` dataclass keeps its instances' values in slots rather than a ``__dict__``: they are
read by field name.
"""

from __future__ import annotations

import dataclasses
import os
import types
from typing import Any

__all__ = [
    "DATACLASS_STATE", "MISSING", "annotation", "dataclass_params", "field_rows", "generated", "is_dataclass_class", "own_slots",
    "slot_values", "slotted",
]  # fmt: skip

MISSING = dataclasses.MISSING
#: What ``dataclasses`` stores in a class besides its methods: spelled as the fields and parameters.
DATACLASS_STATE = frozenset({"__dataclass_fields__", "__dataclass_params__"})
#: The decorator's parameters every Python since 3.9 stores (``slots``, ``kw_only``, ``match_args`` show in the
#: class's ``__slots__``, its fields and ``__match_args__``, which are spelled as members): one spelling on every Python.
_PARAMS = ("init", "repr", "eq", "order", "unsafe_hash", "frozen")
#: Methods ``dataclasses`` writes with ``exec``; one of these is skipped only when ``dataclasses`` wrote it (:func:`generated`).
_WRITTEN = frozenset({"__init__", "__repr__", "__eq__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__setattr__", "__delattr__"})
#: Methods ``dataclasses`` sets to functions of its own (a frozen ``slots=True`` class's pickling, 3.13's ``__replace__``).
_OWN_NAMES = {"__getstate__": "_dataclass_getstate", "__setstate__": "_dataclass_setstate", "__replace__": "_replace"}
_OWN = {name: getattr(dataclasses, fn) for name, fn in _OWN_NAMES.items() if hasattr(dataclasses, fn)}
_STDLIB = os.path.dirname(dataclasses.__file__)  # __repr__ is wrapped by dataclasses' or reprlib's recursion guard


def is_dataclass_class(cls: type) -> bool:
    """Whether ``cls`` itself was made by ``@dataclass`` (not merely inheriting from one)."""
    return "__dataclass_params__" in cls.__dict__ and "__dataclass_fields__" in cls.__dict__


def generated(name: str, member: Any) -> bool:
    """Whether class member ``name`` is a method ``dataclasses`` wrote, not one its author wrote (which is spelled).

    Its own functions, a function ``dataclasses`` made with ``exec`` (``<string>``'s, and from Python
    3.11 named ``__create_fn__.<locals>.<name>``), or ``__repr__``'s recursion guard around one. A
    method the author wrote in a file-less module whose lines :mod:`linecache` holds (a notebook cell)
    is the author's: spelled by its source.
    """
    if name in _OWN:
        return member is _OWN[name]
    if name not in _WRITTEN or not isinstance(member, types.FunctionType):
        return False
    if name == "__repr__" and os.path.dirname(member.__code__.co_filename) == _STDLIB:
        member = member.__dict__.get("__wrapped__")  # functools.wraps' (dataclasses') or reprlib's
        if not isinstance(member, types.FunctionType):
            return False
    return _made_by_exec(name, member.__code__)


def _made_by_exec(name: str, code: types.CodeType) -> bool:
    """Whether ``code`` is method ``name`` as ``dataclasses`` compiles it: in ``def __create_fn__(...)``, from ``<string>``."""
    if code.co_filename != "<string>" or code.co_name != name:
        return False
    qualname = getattr(code, "co_qualname", None)  # Python 3.11's
    return qualname is None or qualname == f"__create_fn__.<locals>.{name}"


def dataclass_params(cls: type) -> list[tuple[str, Any]]:
    """The decorator's parameters (``frozen``, ``eq``, ...), by name: plain bools."""
    params = cls.__dict__["__dataclass_params__"]
    return [(name, getattr(params, name, None)) for name in _PARAMS]


def field_rows(cls: type) -> list[tuple[Any, ...]]:
    """Each field in definition order (``__init__``'s): name, annotation, default, default factory, its flags and kind."""
    rows = []
    for f in cls.__dict__["__dataclass_fields__"].values():
        kind = getattr(getattr(f, "_field_type", None), "name", None)  # _FIELD, _FIELD_CLASSVAR, _FIELD_INITVAR
        rows.append((f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.hash, f.compare, getattr(f, "kw_only", False), kind))
    return rows


def annotation(t: Any) -> Any:
    """A field's annotation as a plain value: a string as written, a class by module.qualname, a typing form by its repr.

    None when its repr names an object's address (it would differ between processes).
    """
    if isinstance(t, str):
        return t
    if isinstance(t, type):
        return ["type", f"{t.__module__}.{t.__qualname__}"]
    text = repr(t)
    return None if " at 0x" in text else ["annotation", text]


def own_slots(cls: type) -> tuple[str, ...]:
    """The slot names ``cls`` declares itself (``__slots__``: one string or several)."""
    slots = cls.__dict__.get("__slots__", ())
    return (slots,) if isinstance(slots, str) else tuple(slots)


def slotted(cls: type) -> bool:
    """Whether ``cls``'s ``__slots__`` are a ``slots=True`` dataclass's: its fields (and ``__weakref__``), read by name."""
    if not is_dataclass_class(cls):
        return False
    return set(own_slots(cls)) <= set(cls.__dict__["__dataclass_fields__"]) | {"__weakref__"}


def slot_values(v: Any, classes: tuple[type, ...]) -> dict[str, Any] | None:
    """The values in ``v``'s slots, by name (None when none of its classes declares one); an unset slot raises AttributeError."""
    names = [n for c in classes for n in own_slots(c) if n not in ("__weakref__", "__dict__")]
    if not names:
        return None
    return {n: object.__getattribute__(v, n) for n in names}  # the slot's own value, whatever the class's __getattribute__ does
