"""The key of a ``@tilelang.jit`` call: what serving matches before TileLang traces the prim_func.

A request key (:func:`tl_aot.jit.request_key.request_key`) is a digest of the prim_func, which TileLang
must first build by running the user's function (``JITImpl.get_tir``): most of what a warm JIT
spends. The call key names the same kernel from the call alone: the function (module, name, a
digest of the source lines its code object spans: :mod:`tl_aot.call_keys.code_source`), every value it
reads from its closure, its module's globals and the user's modules its body imports from
(``from .tiles import BLOCK``: :mod:`tl_aot.call_keys.code_imports`; a user's module it reads as a global, ``utils.BLOCK``,
by the attributes its code reads off it) (numbers, strings, dtypes, TileLang's and torch's
modules by name, helper functions by their own source and values, recursively, a user's enum by
its members' values and methods, and the defaults of its parameters), the call's arguments, the
``@tilelang.jit`` options, the GPU (compute capability and what a factory may size its kernel
by: SM count, shared memory, L2; :func:`tl_aot.gpu.cuda_driver.gpu_identity`) and TileLang's
version. A capture records it beside the request key it led to; serving answers a call whose key
a library holds with that request's kernel, without tracing.

An instance of a plain class of the user's (no metaclass, no ``__slots__``: a tiling helper a
factory closes over) is spelled by its class's body and its attributes; a value of a user's
subclass of ``int``, ``float``, ``str``, ``tuple``, ``list`` or ``dict`` (a ``typing.NamedTuple``
config, a ``str`` with methods) by its value and its classes' bodies (a named tuple's as its
fields and defaults: :mod:`tl_aot.call_keys.namedtuple_parts`), so editing a method or a default
moves the key. Anything that cannot be
spelled the same way in every process (a tensor -- but one given to an eager kernel's tensor parameter, which
TileLang reads only for its dtype, shape and strides, and which is spelled by them --, a library's object, a class, a user's module --
``import M`` of one in the body too, or ``from M import`` of a module not imported yet -- a
function without source) makes the call unkeyed:
:func:`call_key` returns None and serving falls back to the request key. A call key never names
another kernel: what the function could read that the key does not cover makes it None, never a
guess.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import importlib.util
import inspect
import sys
import threading
import types
from collections import defaultdict
from collections.abc import Iterator
from types import CodeType
from typing import Any

from ..config.options import plain_pass_configs
from . import dataclass_parts as dataclass
from . import enum_parts
from . import namedtuple_parts as namedtuple
from .code_globals import attributes_read, global_names
from .code_imports import code_imports
from .code_source import code_source_digest
from .key_json import PLAIN, all_plain, encode_plain, float_text, json_str
from .spelling_reads import ABSENT, EMPTY_CELL, Reads

__all__ = ["CALL_SCHEMA", "call_key", "keyed_call", "Unkeyable"]

#: Bumped when what the key covers changes (a call recorded under another schema is a miss: the schema is
#: part of the digested material, so an old record's key is never equal to a new one, whatever it spelled).
#: 2: a function's source is the span of its code object's lines (:mod:`tl_aot.call_keys.code_source`), not
#: ``inspect.getsource``'s block.
CALL_SCHEMA = 2
_DEPTH = 4  # helper functions followed this deep
#: The call's arguments, spelled as deep as the function's closure values are: a config object (a dataclass holding
#: another, whose methods call the module's helpers) given to the kernel as it would be closed over. The depth is not
#: in the spelling, only where it stops, so deeper arguments key calls that were unkeyed and change no key.
_ARG_DEPTH = _DEPTH - 1
_MEMO_LIMIT = 4096


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    """Keep ``value`` under ``key`` in ``memo``, the oldest entry dropped when it holds :data:`_MEMO_LIMIT`."""
    if len(memo) >= _MEMO_LIMIT:
        memo.pop(next(iter(memo)))
    memo[key] = value


class Unkeyable(Exception):
    """A value the call depends on cannot be spelled the same in every process."""


#: id(function) -> (the function, what its spelling read, the spelling as key JSON): kept while unchanged (:class:`Reads`).
_SPELLED: dict[int, tuple[Any, Reads, str]] = {}


def _library(module: str) -> bool:
    """Modules whose code is covered by the versions in the key (TileLang's, tvm's, torch's, the standard library)."""
    root = module.split(".", 1)[0]
    return root in {"tilelang", "tvm", "tvm_ffi", "torch", "math", "functools", "itertools", "typing", "builtins", "operator"}


def _text(v: Any, depth: int, reads: Reads) -> str:
    """The spelling of value ``v`` as the key's JSON, written directly (no list built, then encoded).

    What a value is spelled as: itself (None, bools, numbers, strings: a library's subclasses as
    JSON writes them, a library's IntEnum as its number); ``["list"|"tuple"|<its class name>, [items]]``
    (``torch.Size``: ``["Size", [...]]``); ``["dict", [[key, value], ...]]`` (a ``defaultdict``
    ``["defaultdict", factory, ["dict", ...]]``); a library's enum
    member ``["enum", class, name]``, a user's with its value and class (:func:`_enum_text`);
    ``["module", name]`` and ``["class", name]`` for TileLang's, tvm's, torch's and the
    standard library's; ``["torch.dtype", name]``; a function's spelling
    (:func:`_function_text_of`); a plain class of the user's, ``["user class", [class, ...]]``,
    and an instance of one, its classes and its attributes (:func:`_object_text`); a value of a
    user's subclass of a builtin value type (a NamedTuple), ``["subclass", [class, ...], value as
    its builtin type's, {attribute: value}]``, and such a class, ``["subclass class", [class,
    ...], builtin type's name]`` (:func:`_subclass_text`: each class ``[module.qualname, {name:
    member}]``, only the user's classes, not ``tuple``'s or a library's).
    Anything else is :class:`Unkeyable`. The text is exactly ``json.dumps(spelling, sort_keys=True,
    separators=(",", ":"))`` (``tests/unit/test_call_key.py`` checks it against that, spelled the
    slow way).
    """
    t = type(v)  # what it is, not what its __class__ says (a Mock's spec, a proxy): by type, never by isinstance
    plain = PLAIN.get(t)
    if plain is not None:
        return plain(v)
    if issubclass(t, enum.Enum):
        return _enum_text(v, depth, reads)
    if issubclass(t, (int, float, str)):  # a subclass (bool has none): a user's with its classes, else as json spells it
        users = _users_subclass(t)
        if users is not None:
            return _subclass_text(v, users, depth, reads)
        return json_str(v) if issubclass(t, str) else float_text(v) if issubclass(t, float) else int.__repr__(v)
    if issubclass(t, (list, tuple)):
        if t is not tuple and t is not list:  # a subclass: a user's (a NamedTuple) with its classes
            users = _users_subclass(t)
            if users is not None:
                return _subclass_text(v, users, depth, reads)
        if not issubclass(t, tuple):
            reads.frozen = False  # may change in place
        items = encode_plain(v) if all_plain(v) else f"[{','.join([_text(x, depth, reads) for x in v])}]"
        return f"[{json_str(t.__name__)},{items}]"
    if issubclass(t, dict):
        if t is not dict:
            users = _users_subclass(t)
            if users is not None:
                return _subclass_text(v, users, depth, reads)
            if t is defaultdict:  # what it answers for a missing key is its factory's
                return f'["defaultdict",{_text(v.default_factory, depth, reads)},{_dict_text(v.items(), depth, reads)}]'
        return _dict_text(v.items(), depth, reads)
    if issubclass(t, types.ModuleType):  # a user's module: the values read from it are not covered
        name = reads.attr(v, "__name__", "")
        if _library(name):
            return f'["module",{_text(name, depth, reads)}]'
        raise Unkeyable(f"module {name}")
    if issubclass(t, type):
        module = reads.attr(v, "__module__", "")
        if _library(module):  # TileLang's classes (Fragment, ...): covered by its version
            qualname = reads.attr(v, "__qualname__", "")
            return f'["class",{json_str(f"{module}.{qualname}")}]'
        if isinstance(v, enum.EnumMeta):  # a user's enum class (its members read through it): by its body
            return _enum_class_text(v, depth, reads)
        classes = _user_classes(v)
        if classes is not None and _spelling(v):  # named inside its own body (a method's Cls(...))
            return _ref_text(v, reads)
        if classes is not None and depth > 0:  # a user's class a factory instantiates: its body, and its bases'
            return f'["user class",{_classes_text(classes, depth, reads)}]'
        users = _users_subclass(v) if issubclass(v, _BASES) else None  # a user's NamedTuple (Cfg(...), Cfg._make)
        if users is not None and _spelling(users[0]):
            return _ref_text(users[0], reads)
        if users is not None and depth > 0:
            return f'["subclass class",{_classes_text(users, depth, reads)},{json_str(_base(v).__name__)}]'
        raise Unkeyable(f"class {v.__qualname__}")
    if t.__name__ == "dtype" and t.__module__ == "torch":
        return f'["torch.dtype",{json_str(str(v))}]'
    if issubclass(t, (types.FunctionType, types.BuiltinFunctionType)) or hasattr(v, "orig_func") or t.__name__ == "JITImpl":
        return _helper_text(v, depth, reads)
    classes = _user_classes(t)
    if classes is not None and depth > 0:
        return _object_text(v, classes, depth, reads)
    raise Unkeyable(f"{type(v).__qualname__} value")


def _dict_text(items: Any, depth: int, reads: Reads) -> str:
    """``["dict", [[key, value], ...]]`` of a dict's items, in order: never kept (a dict may change in place)."""
    reads.frozen = False
    return f'["dict",[{",".join([f"[{_text(k, depth, reads)},{_text(x, depth, reads)}]" for k, x in items])}]]'


#: The builtin value types a user's class may subclass and be spelled by (:func:`_subclass_text`): each one's value, read
#: by the type's own methods (a subclass's ``__iter__``, ``__str__`` or ``__eq__`` is never asked), as an exact value.
_BASE_VALUE: dict[type, Any] = {
    str: str.__str__,
    int: int.__int__,
    float: float.__float__,
    tuple: lambda v: tuple(tuple.__iter__(v)),
    list: lambda v: list(list.__iter__(v)),
    dict: dict.items,
}
_BASES = tuple(_BASE_VALUE)
#: Standard library modules that make subclasses of the builtin value types for their users (``namedtuple``,
#: ``NamedTuple``, ``IntEnum``): their own classes (``OrderedDict``, ``Counter``) are theirs, covered as a library's
#: are, but the classes they make carry the user's module and are the user's (:func:`_users_subclass`).
_MAKERS = frozenset({"collections", "typing", "enum"})
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (or type()), not a C extension's static type
_flags = type.__dict__["__flags__"].__get__  # a class's flags, whatever its metaclass says


def _base(cls: type) -> type:
    """The builtin value type ``cls`` subclasses (:data:`_BASES`)."""
    return next(b for b in _BASES if issubclass(cls, b))


def _users_subclass(cls: type) -> tuple[type, ...] | None:
    """The user's classes (most derived first) of ``cls``, a subclass of a builtin value type; None when it has none.

    A class is the user's when a class statement made it (a heap type: a C extension's type, numpy's
    ``float64``, is not) in a module that is not a library's (:func:`_library`) nor one of the
    standard library's that make such classes (:data:`_MAKERS`): a ``typing.NamedTuple`` or
    ``namedtuple`` config, a ``str`` subclass with methods. ``torch.Size``, ``OrderedDict``,
    ``numpy.float64`` have none and keep their value's spelling. One the key cannot read whole (a
    metaclass, slots holding values, a ``__dict__`` of its own making) is :class:`Unkeyable`.
    """
    if cls in _C_TYPES:
        return None
    users = []
    heap = False
    for c in cls.__mro__:
        if not _flags(c) & _HEAPTYPE:
            continue
        heap = True
        module = c.__dict__.get("__module__", "builtins")  # a class statement's; a class exec'd without __name__: builtins'
        if type(module) is not str:
            raise Unkeyable(f"{cls.__qualname__} value: its class {c.__qualname__} names no module")
        if _library(module) or module.split(".", 1)[0] in _MAKERS:
            continue
        if type(c) is not type or _own_dict(c) or _slots_values(c):
            raise Unkeyable(f"{cls.__qualname__} value: its class {c.__qualname__} is not read whole")
        users.append(c)
    if not heap:
        _C_TYPES.add(cls)  # a C type's chain (torch.Size's) never changes and is never freed: asked once
    return tuple(users) or None


#: Subclasses of a builtin value type that are C types all the way down (``torch.Size``, ``numpy.float64``): none is the user's.
_C_TYPES: set[type] = set()


def _slots_values(cls: type) -> bool:
    """Whether ``cls`` declares slots that hold values (``__slots__ = ()``, a named tuple's, holds none)."""
    slots = cls.__dict__.get("__slots__", ())
    return not (type(slots) in (tuple, list) and len(slots) == 0)


def _subclass_text(v: Any, users: tuple[type, ...], depth: int, reads: Reads) -> str:
    """A value of a user's subclass of a builtin type: ``["subclass", [class, ...], value, {attribute: value}]``.

    The user's classes (:func:`_users_subclass`) as :func:`_object_text` spells an object's (a
    named tuple's as its fields and defaults, not the members ``collections`` wrote:
    :mod:`tl_aot.call_keys.namedtuple_parts`); the value as its builtin type's would be (read by
    that type's own methods); the instance's own attributes (a subclass without ``__slots__`` has a
    ``__dict__``), one level deeper. Never kept: a class body may change.
    """
    if depth <= 0:
        raise Unkeyable(f"{users[0].__qualname__} value: too deep")
    base = _base(type(v))
    value = _BASE_VALUE[base](v)
    value_text = _dict_text(value, depth, reads) if base is dict else _text(value, depth, reads)
    try:
        held = object.__getattribute__(v, "__dict__")  # the instance's own, whatever its class's __getattribute__ does
    except AttributeError:
        held = {}
    if not all(type(k) is str for k in held):
        raise Unkeyable(f"{type(v).__qualname__} value: an attribute named by a non-string")
    attributes = ",".join([f"{json_str(k)}:{_text(x, depth - 1, reads)}" for k, x in sorted(held.items())])
    spelled = _ref_text(users[0], reads) if _spelling(users[0]) else _classes_text(users, depth, reads)
    return f'["subclass",{spelled},{value_text},{{{attributes}}}]'


#: What a class body holds that does not change what its instances do: names, docs, annotations, the instance dict's slots.
_CLASS_NOISE = frozenset(
    {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__", "__firstlineno__", "__static_attributes__"}
)


def _user_classes(cls: type) -> tuple[type, ...] | None:
    """``cls`` and its bases but ``object``, when every one is a plain class of the user's (no metaclass, no ``__slots__``).

    Such an instance is its class's functions and its ``__dict__``, both of which a spelling can
    read whole; anything else (a library's class, a metaclass, slots, a C type, a ``__dict__`` of the
    class's own making) is not spelled. A ``slots=True`` dataclass is plain too: its slots are its
    fields (:func:`slotted`), read by name.
    """
    chain = cls.__mro__[:-1]
    for c in chain:
        if type(c) is not type or _library(c.__module__) or ("__slots__" in c.__dict__ and not dataclass.slotted(c)) or _own_dict(c):
            return None
    return chain or None  # object itself: nothing of the user's


def _own_dict(cls: type) -> bool:
    """Whether ``cls`` sets its ``__dict__`` or ``__weakref__`` itself (a property): its instances' attributes may lie elsewhere."""
    members = cls.__dict__
    return type(members.get("__dict__", _MADE_DICT)) is not _MADE or type(members.get("__weakref__", _MADE_DICT)) is not _MADE


class _Plain:
    """A class statement's class: its ``__dict__`` is the descriptor Python makes (:func:`_own_dict`)."""


_MADE_DICT = _Plain.__dict__["__dict__"]
_MADE = type(_MADE_DICT)


def _object_text(v: Any, classes: tuple[type, ...], depth: int, reads: Reads) -> str:
    """An instance of a user's class: ``["object", [class, ...], {attribute: value}]``, each class its name and members.

    A class is ``[module.qualname, {name: member}]`` over its body (functions, static and class
    methods and properties spelled as helper functions are, values as values); the attributes
    are the instance's ``__dict__``, one level deeper (an object holding itself ends there). Both
    may change in place, so a spelling holding an object is never kept: it is spelled again each call.
    An instance met inside its class's own body (a ``DEFAULT`` its methods read) names the class by
    reference (:func:`_ref_text`).
    """
    try:
        held = object.__getattribute__(v, "__dict__")  # the instance's own, whatever its class's __getattribute__ does
    except AttributeError:
        held = None
    try:
        slots = dataclass.slot_values(v, classes)  # a slots=True dataclass's fields
    except AttributeError:
        raise Unkeyable(f"{type(v).__qualname__} value: a slot is unset") from None
    if slots is not None:
        held = {**(held or {}), **slots}
    elif held is None:
        raise Unkeyable(f"{type(v).__qualname__} value: no attributes to read")
    if not all(type(k) is str for k in held):
        raise Unkeyable(f"{type(v).__qualname__} value: an attribute named by a non-string")
    attributes = ",".join([f"{json_str(k)}:{_text(x, depth - 1, reads)}" for k, x in sorted(held.items())])
    spelled = _ref_text(classes[0], reads) if _spelling(classes[0]) else _classes_text(classes, depth, reads)
    return f'["object",{spelled},{{{attributes}}}]'


#: Per thread, the user's classes whose bodies are being spelled (outermost first): one named again inside them is
#: spelled by name (``["user class ref", module.qualname]``), its body being in the spelling already, instead of again
#: and again until the depth runs out.
_SPELLING = threading.local()


def _being_spelled() -> list[type]:
    """The classes this thread is spelling now (:data:`_SPELLING`)."""
    stack = getattr(_SPELLING, "classes", None)
    if stack is None:
        stack = _SPELLING.classes = []
    return stack


def _spelling(cls: type) -> bool:
    """Whether ``cls``'s body is being spelled (:func:`_being_spelled`): named again inside it, it is named by reference."""
    return cls in _being_spelled()  # a user's class without a metaclass: compared by identity


def _ref_text(cls: type, reads: Reads) -> str:
    """``["user class ref", module.qualname]``: exact only inside the spelling of ``cls``'s body, so never kept for another."""
    reads.frozen = False
    return f'["user class ref",{json_str(f"{cls.__module__}.{cls.__qualname__}")}]'


@contextlib.contextmanager
def _inside(classes: tuple[type, ...], reads: Reads) -> Iterator[None]:
    """Meanwhile ``classes`` are being spelled (:func:`_spelling`), and the spelling holding them is never kept."""
    reads.frozen = False
    stack = _being_spelled()
    stack.extend(classes)
    try:
        yield
    finally:
        del stack[-len(classes) :]


def _classes_text(classes: tuple[type, ...], depth: int, reads: Reads) -> str:
    """A user's class and its bases, each ``[module.qualname, {name: member}]``: never kept (a class body may change)."""
    with _inside(classes, reads):
        return _bodies_text(classes, depth, reads)


def _bodies_text(classes: tuple[type, ...], depth: int, reads: Reads) -> str:
    """Each class's members, sorted by name (a dataclass's generated methods as its fields and parameters)."""
    spelled = []
    for c in classes:
        made = dataclass.is_dataclass_class(c)
        # a dataclass: its state spelled as fields and parameters, a slot's member (a C descriptor) as the instance's value
        skip = _CLASS_NOISE | dataclass.DATACLASS_STATE | set(dataclass.own_slots(c)) if made else _CLASS_NOISE
        named = namedtuple.is_namedtuple_class(c)  # its fields and defaults spelled as values, collections' members skipped
        members = []
        for name, member in c.__dict__.items():
            if name in skip or (made and dataclass.generated(name, member)) or (named and namedtuple.generated(name, member, c)):
                continue
            members.append((name, _member_text(member, depth, reads)))
        if made:
            members.append(("__dataclass__", _dataclass_text(c, depth, reads)))
        text = ",".join([f"{json_str(name)}:{member}" for name, member in sorted(members)])
        spelled.append(f"[{json_str(f'{c.__module__}.{c.__qualname__}')},{{{text}}}]")
    return f"[{','.join(spelled)}]"


def _dataclass_text(cls: type, depth: int, reads: Reads) -> str:
    """A dataclass's fields and parameters, what the methods ``dataclasses`` wrote do: ``{"fields": [...], "params": {...}}``.

    Each field ``[name, annotation, default, default factory, init, repr, hash, compare, kw_only,
    kind]``, in definition order; ``["missing"]`` where ``dataclasses`` has none (no default).
    """
    fields = []
    for name, annotated, default, factory, *flags, kind in dataclass.field_rows(cls):
        typed = dataclass.annotation(annotated)
        if typed is None:
            raise Unkeyable(f"{cls.__qualname__}.{name}: an annotation spelled by an address")
        parts = [_text(x, depth, reads) if x is not dataclass.MISSING else _MISSING for x in (name, typed, default, factory, *flags, kind)]
        fields.append(f"[{','.join(parts)}]")
    params = ",".join([f"{json_str(name)}:{_text(value, depth, reads)}" for name, value in sorted(dataclass.dataclass_params(cls))])
    return f'{{"fields":[{",".join(fields)}],"params":{{{params}}}}}'


_MISSING = '["missing"]'  # a dataclass field's absent default (a list value is spelled ["list", ...]: never this)


def _enum_text(v: enum.Enum, depth: int, reads: Reads) -> str:
    """An enum member: a library's by name (an int or str one as its value), a user's by name and its class's body.

    ``["enum", module.qualname, name]`` for a library's enum (covered by the key's versions), or
    its value where it is an int, float or str (an ``IntEnum``'s number); ``["enum",
    module.qualname, name, value, class]`` for a user's, the class as :func:`_enum_class_text`
    spells it (its members' values and its methods: editing ``FAST = 64`` or a method changes the key).
    """
    cls = type(v)
    name = json_str(f"{cls.__module__}.{cls.__qualname__}")
    if enum_parts.user_enum_classes(cls, _library) is None:
        if isinstance(v, (int, float, str)):  # as json spells it
            return json_str(v) if isinstance(v, str) else float_text(v) if isinstance(v, float) else int.__repr__(v)
        return f'["enum",{name},{_text(v.name, depth, reads)}]'
    value = _text(v._value_, depth - 1, reads)  # a flag's combination (Python 3.9 names it None) is its value
    return f'["enum",{name},{_text(v._name_, depth, reads)},{value},{_enum_class_text(cls, depth, reads)}]'


def _enum_class_text(cls: type, depth: int, reads: Reads) -> str:
    """A user's enum class: ``["user enum", [class, ...]]``, or ``["user class ref", module.qualname]`` inside its own body.

    Each class ``[module.qualname, {name: member}]``: an enum's ``"__members__"`` (``[[name,
    value], ...]``, aliases included, in definition order) and the code its body defines
    (:func:`tl_aot.call_keys.enum_parts.methods`); a user's mixin class by its whole body. Never
    kept (a class body may change).
    """
    classes = enum_parts.user_enum_classes(cls, _library)
    if classes is None:  # a library's enum class: covered by its version
        return f'["class",{json_str(f"{cls.__module__}.{cls.__qualname__}")}]'
    if _spelling(cls):
        return _ref_text(cls, reads)
    if depth <= 0:
        raise Unkeyable(f"enum {cls.__qualname__}: nested too deep")
    spelled = []
    with _inside(classes, reads):
        for c in classes:
            if not issubclass(c, enum.Enum):  # a mixin of the user's
                if _user_classes(c) is None:
                    raise Unkeyable(f"enum {cls.__qualname__}: mixin {c.__qualname__}")
                spelled.append(_bodies_text((c,), depth, reads)[1:-1])
                continue
            values = ",".join([f"[{json_str(n)},{_text(x, depth - 1, reads)}]" for n, x in enum_parts.members(c)])
            parts = [("__members__", f"[{values}]")] if c is cls else []
            parts += [(n, _member_text(m, depth, reads)) for n, m in enum_parts.methods(c)]
            text = ",".join([f"{json_str(n)}:{m}" for n, m in sorted(parts)])
            spelled.append(f"[{json_str(f'{c.__module__}.{c.__qualname__}')},{{{text}}}]")
    return f'["user enum",[{",".join(spelled)}]]'


def _member_text(member: Any, depth: int, reads: Reads) -> str:
    """A class body's member: a function (as a helper), a static or class method, a property's functions, or a value."""
    if isinstance(member, (staticmethod, classmethod)):
        return f"[{json_str(type(member).__name__)},{_helper_text(member.__func__, depth, reads)}]"
    if isinstance(member, (property, types.DynamicClassAttribute)):  # an enum's own property is a DynamicClassAttribute
        parts = [_helper_text(f, depth, reads) if f is not None else "null" for f in (member.fget, member.fset, member.fdel)]
        return f'["property",[{",".join(parts)}]]'
    return _text(member, depth, reads)


#: (id(helper function), depth) -> (it, what its spelling read, the spelling): kept while unchanged (:class:`Reads`).
_HELPERS: dict[tuple[int, int], tuple[Any, Reads, str]] = {}


def _helper_text(fn: Any, depth: int, reads: Reads) -> str:
    """The spelling of a function a kernel function reads (a closure value, a global, a default): kept per function object.

    A kernel factory makes a new ``@tilelang.jit`` function each time it is called, but the helpers
    it closes over or reads from its module (an elementwise op, a layout function, another kernel)
    are the same function objects each time: their spelling is kept and re-checked slot by slot
    (:meth:`Reads.unchanged`), as :func:`_function_text` keeps a jit's, instead of being spelled
    again for every new kernel function. The slots are added to ``reads``, so whoever keeps
    ``reads``' spelling re-checks them too.
    """
    memo = (id(fn), depth)
    have = _HELPERS.get(memo)
    if have is not None and have[0] is fn and have[1].unchanged():
        reads.slots.extend(have[1].slots)
        return have[2]
    mine = Reads()
    text = _function_text_of(fn, depth, mine)
    reads.slots.extend(mine.slots)
    if mine.frozen:
        _remember(_HELPERS, memo, (fn, mine, text))  # holds fn alive: its id is not reused while remembered
    else:
        reads.frozen = False
        _HELPERS.pop(memo, None)
    return text


def _function_text_of(fn: Any, depth: int, reads: Reads) -> str:
    """The spelling of function ``fn`` as the key's JSON.

    ``["function", module.qualname]`` for a builtin or a library's function (covered by the
    versions in the key); else ``["function", module.qualname, source digest, {closure variable:
    value}, {global it reads: value}, [["list", [defaults]], ["dict", [[name, keyword default],
    ...]]]]``, its values spelled one level deeper (helpers followed ``_DEPTH`` deep).
    """
    fn = reads.attr(fn, "func") if type(fn).__name__ == "JITImpl" else fn
    fn = reads.attr(fn, "orig_func") or fn  # config.user_code.user_function, read through the record
    if type(fn) is types.FunctionType:  # its parts read at once, as one slot
        (code, glb, cells, positional, kwdefaults, module, qualname), values = reads.function(fn)
        name = f"{module or ''}.{qualname}"
        if _library(module or ""):
            return f'["function",{json_str(name)}]'
    else:
        module = reads.attr(fn, "__module__", "") or ""
        name = f"{module}.{reads.attr(fn, '__qualname__', '?')}"
        if isinstance(fn, types.BuiltinFunctionType) or _library(module):
            return f'["function",{json_str(name)}]'
        code = reads.attr(fn, "__code__")
        glb = reads.attr(fn, "__globals__", {})
        cells = reads.attr(fn, "__closure__") or ()
        values = None
        positional = reads.attr(fn, "__defaults__")
        kwdefaults = reads.attr(fn, "__kwdefaults__")
    if depth <= 0:
        raise Unkeyable(f"{name}: helpers nested too deep")
    if values is EMPTY_CELL:
        raise Unkeyable(f"{name}: a closure variable is unbound")  # bound later in the enclosing scope
    if code is None:
        raise Unkeyable(f"{name}: no source")
    source = code_source_digest(code, glb)
    if not source:
        raise Unkeyable(f"{name}: no source")
    if values is None:
        try:
            values = [reads.cell(cell) for cell in cells or ()]
        except ValueError:
            raise Unkeyable(f"{name}: a closure variable is unbound") from None
    if all_plain(values):
        cells_text = encode_plain(dict(zip(code.co_freevars, values)))
    else:  # a JSON object's keys, sorted as the encoder sorts them (names are unique)
        closure = sorted(zip(code.co_freevars, values))
        cells_text = "{" + ",".join([f"{json_str(var)}:{_text(value, depth - 1, reads)}" for var, value in closure]) + "}"
    used = _spell_globals(code, glb, depth - 1, reads)
    if kwdefaults is not None:
        reads.frozen = False  # a dict: may change in place
    listed = ",".join([_text(x, depth - 1, reads) for x in positional or ()])  # a tuple: its items spelled as a list's
    keyword = ",".join([f"[{_text(k, depth - 1, reads)},{_text(x, depth - 1, reads)}]" for k, x in (kwdefaults or {}).items()])
    return f'["function",{json_str(name)},"{source}",{cells_text},{used.text},[["list",[{listed}]],["dict",[{keyword}]]]]'


class _Kept:
    """The module globals a code object reads, spelled as a JSON object, with what the spelling read."""

    __slots__ = ("code", "glb", "reads", "text")

    def __init__(self, code: CodeType, glb: dict[str, Any], reads: Reads, text: str) -> None:
        self.code, self.glb, self.reads, self.text = code, glb, reads, text


#: Builtins through which code reads what no spelling covers: the module's globals by a computed name (``globals()[f"BLOCK_{n}"]``,
#: ``vars()``, ``eval``/``exec`` of a string, ``__import__``) or a file (``open``: a tuned config on disk). Code calling one
#: (the builtin, not a module global of that name) is unkeyed: the key would stay while what it read changed.
_OUTSIDE_READERS = frozenset({"globals", "vars", "eval", "exec", "__import__", "open"})
#: (id(code), id(globals), depth) -> the spelling of the globals that code reads there: kept while unchanged.
_USED: dict[tuple[int, int, int], _Kept] = {}


def _spell_globals(code: CodeType, glb: dict[str, Any], depth: int, reads: Reads) -> _Kept:
    """The module globals ``code`` reads, spelled: kept per code object and module while every slot they read is unchanged.

    The values it imports from the user's modules are entries of the same JSON object (:func:`_imported_texts`).

    A kernel factory makes a new ``@tilelang.jit`` function (a new closure over the same code) each
    time it is called; its globals -- the module's constants and helper functions, spelled
    recursively -- are the same objects each time, so they are re-checked (:meth:`Reads.unchanged`)
    rather than spelled again. The slots are added to ``reads``, so whoever keeps ``reads``'
    spelling re-checks them too. Keyed by identity (equal code objects of two files are two
    entries), each entry holding its code and globals alive so their ids are not reused.
    """
    memo = (id(code), id(glb), depth)
    have = _USED.get(memo)
    if have is not None and have.code is code and have.glb is glb and have.reads.unchanged():
        reads.slots.extend(have.reads.slots)
        return have
    mine = Reads()
    used = []
    for n in sorted(global_names(code)):
        value = mine.glob(glb, n)
        if type(value) is types.ModuleType:  # a user's module (a library's is spelled by name): what the code reads off it
            used.append((n, _module_text(code, n, value, depth, mine)))
        elif value is not ABSENT:
            used.append((n, _text(value, depth, mine)))
        elif n in _OUTSIDE_READERS:
            raise Unkeyable(f"{code.co_name} calls {n}()")
    imported = _imported_texts(code, glb, depth, mine)
    if imported:
        used = sorted(used + imported)  # a JSON object's keys, sorted (the names are unique: an import's has spaces)
    reads.slots.extend(mine.slots)
    kept = _Kept(code, glb, mine, "{" + ",".join([f"{json_str(n)}:{text}" for n, text in used]) + "}")
    if mine.frozen:
        _remember(_USED, memo, kept)
    else:
        reads.frozen = False
        _USED.pop(memo, None)
    return kept


def _module_text(code: CodeType, name: str, module: types.ModuleType, depth: int, reads: Reads) -> str:
    """A module ``code`` reads as global ``name``: a library's by name, a user's by the attributes the code reads off it.

    ``["user module", module name, {attribute: value}]`` for ``utils.BLOCK`` and ``utils.ceil_div(...)``
    (:func:`~tl_aot.call_keys.code_globals.attributes_read`), each value spelled as a global's is and
    read through the module's dict, so a kept spelling is re-checked against it. A module the code
    uses any other way (passed on, ``getattr`` by a computed name), or an attribute it lacks, is
    :class:`Unkeyable`.
    """
    module_name = reads.attr(module, "__name__", "")
    if type(module_name) is not str or _library(module_name):
        return _text(module, depth, reads)
    attributes = attributes_read(code, name)
    if attributes is None:
        raise Unkeyable(f"{code.co_name} uses the module {module_name} other than by reading its attributes")
    held = vars(module)
    parts = []
    for attribute in sorted(attributes):
        value = reads.glob(held, attribute)
        if value is ABSENT:
            raise Unkeyable(f"{code.co_name} reads {module_name}.{attribute}, which it lacks")
        parts.append(f"{json_str(attribute)}:{_text(value, depth, reads)}")
    return f'["user module",{json_str(module_name)},{{{",".join(parts)}}}]'


def _imported_texts(code: CodeType, glb: dict[str, Any], depth: int, reads: Reads) -> list[tuple[str, str]]:
    """What ``code``'s imports (its nested functions' too) read from the user's modules: ``("from M import a", value)`` pairs.

    A library's module (TileLang's, torch's, the standard library's) is covered by the versions in
    the key. From a user's module ``M`` (a relative import resolved against the function's
    package) each imported value is spelled as a global's is, read through ``sys.modules`` and
    ``M``'s dict, so a kept spelling is re-checked against both. Unkeyable: ``import M`` of a
    user's module (what the body reads off the module is not followed), ``M`` not imported yet
    in this process (the body has not run: its trace serves the call), a name ``M``'s dict lacks
    (one its ``__getattr__`` would make), ``*``, a submodule (a user's module is never spelled), an
    import the bytecode does not show whole. A value imported twice (by the body and a function
    defined in it) is one pair: the key's JSON object has each name once, as ``json.dumps`` writes it.
    """
    imports = code_imports(code)
    if imports is None:
        raise Unkeyable(f"{code.co_name}: an import it makes is not read")
    texts: dict[str, str] = {}
    for imp in imports:
        if imp.level:
            package = reads.glob(glb, "__package__")
            try:
                module_name = importlib.util.resolve_name("." * imp.level + imp.module, package if type(package) is str else None)
            except (ImportError, ValueError):
                raise Unkeyable(f"{code.co_name}: a relative import outside a package") from None
        else:
            module_name = imp.module
        if _library(module_name):
            continue
        if imp.names is None or "*" in imp.names:  # a module in a local; or every name (compiled as a module's code only)
            raise Unkeyable(f"{code.co_name} imports the module {module_name}")
        module = reads.glob(sys.modules, module_name)
        if module is ABSENT or type(module) is not types.ModuleType:
            raise Unkeyable(f"{code.co_name} imports from {module_name}, not imported yet")
        held = vars(module)
        for name in imp.names:
            entry = f"from {module_name} import {name}"
            if entry in texts:  # imported again (a nested helper's own import): the same slots, the same value
                continue
            value = reads.glob(held, name)
            if value is ABSENT:
                raise Unkeyable(f"{code.co_name} imports {name} from {module_name}, which lacks it")
            texts[entry] = _text(value, depth, reads)
    return list(texts.items())


def _function_text(jit) -> str:
    """The spelling of ``jit``'s function as the key's JSON: spelled once, then kept while what it read is unchanged.

    A ``@tilelang.jit`` kernel is asked for with many arguments; its function, closure, globals and
    defaults are the same objects each time, so the first call of each arguments re-checks them
    (:meth:`Reads.unchanged`) instead of spelling them again.
    """
    have = _SPELLED.get(id(jit))
    if have is not None and have[0] is jit and have[1].unchanged():
        return have[2]
    reads = Reads()
    text = _function_text_of(jit, _DEPTH, reads)
    if reads.frozen:
        _remember(_SPELLED, id(jit), (jit, reads, text))  # holds jit alive: its id is not reused while remembered
    else:
        _SPELLED.pop(id(jit), None)
    return text


def call_key(jit, args: tuple[Any, ...], kwargs: dict[str, Any], gpu: str) -> str | None:
    """The key of ``jit(*args, **kwargs)`` on ``gpu``, or None when it cannot be keyed (:func:`keyed_call`)."""
    return keyed_call(jit, args, kwargs, gpu)[0]


def keyed_call(jit, args: tuple[Any, ...], kwargs: dict[str, Any], gpu: str) -> tuple[str | None, str]:
    """``(key, "")`` of ``jit(*args, **kwargs)`` (a ``JITImpl`` compile) on ``gpu`` (:func:`tl_aot.gpu.cuda_driver.gpu_identity`).

    ``(None, why)`` when it cannot be keyed, ``why`` naming what could not be spelled (``Tensor value``,
    ``module tiles``, ...): capture reports it. The key is the SHA-256 of the call's material as JSON (keys
    sorted, no spaces): ``args``, ``backend``, ``compile_flags``, ``function``
    (:func:`_function_text`, kept between calls), ``gpu``, ``kwargs`` (sorted by name),
    ``out_idx``, ``pass_configs``, ``schema``, ``target``, ``target_host``, ``tilelang``. The
    text is written in that order directly, the call's own values spelled each time.
    """
    try:
        reads = Reads()  # the call's own values: spelled every time
        tensors = _eager_tensor_params(jit)
        # a tuple: a list's JSON
        if all_plain(args):
            args_text = f'["list",{encode_plain(args)}]'
        elif tensors:
            names = tensors[0]
            texts = [_arg_text(v, names[i] if i < len(names) else None, tensors[1], reads) for i, v in enumerate(args)]
            args_text = f'["list",[{",".join(texts)}]]'
        else:
            args_text = _text(list(args), _ARG_DEPTH, reads)
        if all_plain(kwargs.values()):
            kwargs_text = encode_plain(sorted(kwargs.items()))  # (name, value) pairs: JSON arrays
        else:
            named = tensors[1] if tensors else frozenset()
            kwargs_text = "[" + ",".join([f"[{json_str(k)},{_arg_text(v, k, named, reads)}]" for k, v in sorted(kwargs.items())]) + "]"
        configs = getattr(jit, "pass_configs", None)
        text = (
            f'{{"args":{args_text},"backend":{json_str(str(getattr(jit, "execution_backend", None)))}'
            f',"compile_flags":{_text(getattr(jit, "compile_flags", None), 0, reads)}'
            f',"function":{_function_text(jit)},"gpu":{json_str(gpu)},"kwargs":["dict",{kwargs_text}]'
            f',"out_idx":{_text(getattr(jit, "out_idx", None), 0, reads)}'
            f',"pass_configs":{_text(plain_pass_configs(dict(configs)), 0, reads) if configs else _NO_CONFIGS}'
            f',"schema":{CALL_SCHEMA},"target":{json_str(str(getattr(jit, "target", None)))}'
            f',"target_host":{json_str(str(getattr(jit, "target_host", None)))},"tilelang":{json_str(_tilelang_version())}}}'
        )
    except Unkeyable as e:
        return None, str(e)  # unkeyed: served by its traced prim_func, which is exact
    except Exception as e:  # noqa: BLE001 (RecursionError, or whatever a user's object's hooks raise: isinstance asks __class__)
        return None, f"{type(e).__name__}: {e}"[:200]
    return hashlib.sha256(text.encode()).hexdigest()[:32], ""


_NO_CONFIGS = '["dict",[]]'  # no pass configs: an empty dict's spelling

#: The tensor types an eager kernel's tensor parameter is spelled for (:func:`_arg_text`), by module and name (torch is
#: never imported here). A subclass of another module (a fake or distributed tensor) answers ``shape`` its own way: unkeyed.
_TENSOR_TYPES = frozenset({("torch", "Tensor"), ("torch.nn.parameter", "Parameter")})


def _eager_tensor_params(jit) -> tuple[tuple[str, ...], frozenset[str]] | None:
    """An eager ``@tilelang.jit``'s positional parameter names and its tensor parameters; None for any other.

    In eager mode (``A: T.Tensor((M, K), ...)`` annotations, ``T.const`` dims) TileLang traces the
    body with its own placeholders for the tensor parameters, never the caller's tensors: the
    prim_func depends on a tensor only through the dims it reads off its shape and strides, sized
    by its dtype (``TirTemplate._parse_phase2_key``). A lazy function (or one whose mode TileLang
    has not decided yet) is called with the tensors themselves, which it may read at will.
    """
    if getattr(jit, "mode", None) != "eager":
        return None
    func = getattr(jit, "func", None)
    names = getattr(func, "tensor_args", None)
    signature = getattr(func, "signature", None)
    if not names or signature is None:
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = tuple(p.name for p in signature.parameters.values() if p.kind in kinds)
    return positional, frozenset(names)


def _arg_text(v: Any, name: str | None, tensors: frozenset[str], reads: Reads) -> str:
    """An argument's spelling: a torch tensor given to an eager kernel's tensor parameter as what TileLang reads of it.

    ``["tensor", dtype, shape, strides]``: the dims TileLang binds from it (``T.const``), by shape
    or stride, and its dtype, by which a packed sub-byte tensor's last dim is scaled. Any other
    argument, a tensor elsewhere included, is spelled as :func:`_text` spells it.
    """
    t = type(v)
    if name in tensors and (t.__module__, t.__name__) in _TENSOR_TYPES:
        return f'["tensor",{json_str(str(v.dtype))},{encode_plain(tuple(v.shape))},{encode_plain(tuple(v.stride()))}]'
    return _text(v, _ARG_DEPTH, reads)


_VERSION: list[str] = []  # TileLang's version, once read (a process runs one TileLang)


def _tilelang_version() -> str:
    if not _VERSION:
        import tilelang

        _VERSION.append(str(getattr(tilelang, "__version__", "")))
    return _VERSION[0]
