"""What a call key reads of a user's named tuple: its fields and defaults, in place of the members ``collections`` writes.

``collections.namedtuple`` (and ``typing.NamedTuple``, which calls it) makes a class of the user's
module whose body is mostly the library's: ``__new__`` compiled with ``eval`` from the field
names (no source a call key can digest), ``_make``, ``_replace``, ``__replace__`` (3.13),
``__repr__``, ``_asdict`` and ``__getnewargs__`` written in ``collections``, a field accessor
(``_tuplegetter``) per field, and ``__slots__ = ()``, ``__match_args__`` (3.10), ``__orig_bases__``
(typing's). All of them follow from the fields and their defaults, which are spelled as values
(``_fields``, ``_field_defaults``), so those members are skipped; a method the author wrote (its
globals are the author's module) is spelled, whatever its name, as a dataclass's are
(:mod:`tl_aot.call_keys.dataclass_parts`). What is skipped is the same on Python 3.9 to 3.13, so
a config keys alike on each.
"""

from __future__ import annotations

import collections
import operator
import types
from typing import Any

__all__ = ["generated", "is_namedtuple_class"]

_COLLECTIONS_GLOBALS = vars(collections)  # the globals of every function namedtuple writes but __new__
_TUPLE_NEW = tuple.__new__  # the one name in the namespace __new__ is eval'd in
_TUPLEGETTER = getattr(collections, "_tuplegetter", None)  # a field's accessor: _collections' C type
#: Values ``collections`` or ``typing`` store in a named tuple's class besides its fields: follow from ``_fields`` (or
#: from the bases, spelled as classes). ``_field_types`` is Python 3.8's (typing's annotations, kept as ``_fields``).
_STATE = frozenset({"__orig_bases__", "_field_types"})


def is_namedtuple_class(cls: type) -> bool:
    """Whether ``cls`` itself was made by ``collections.namedtuple`` (a tuple with its own ``_fields`` and defaults)."""
    members = cls.__dict__
    return issubclass(cls, tuple) and type(members.get("_fields")) is tuple and type(members.get("_field_defaults")) is dict


def generated(name: str, member: Any, cls: type) -> bool:
    """Whether member ``name`` of named tuple class ``cls`` (:func:`is_namedtuple_class`) is one ``collections`` wrote.

    A function (or a static or class method's) whose globals are ``collections``' own; ``__new__``
    as ``namedtuple`` compiles it (``eval`` of a lambda in a namespace of its own named
    ``namedtuple_<typename>``, holding only ``tuple.__new__``); a field's accessor; ``__slots__ =
    ()``; ``__match_args__`` equal to the fields; typing's ``__orig_bases__``. Not by name: an
    author's ``_replace`` in the class (or a subclass) is the author's function, spelled.
    """
    if name in _STATE:
        return True
    fields = cls.__dict__["_fields"]
    if name == "__slots__" or name == "__match_args__":  # a tuple of names: compared without a user's __eq__
        names = type(member) is tuple and all(type(x) is str for x in member)
        return names and member == (() if name == "__slots__" else fields)
    fn = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
    if type(fn) is types.FunctionType:
        if fn.__globals__ is _COLLECTIONS_GLOBALS:
            return True
        return name == "__new__" and _eval_new(fn)
    if name in fields:
        return _accessor(member)
    return False


def _eval_new(fn: types.FunctionType) -> bool:
    """Whether ``fn`` is ``__new__`` as ``namedtuple`` writes it: a lambda ``eval``'d in its namespace of one name."""
    glb = fn.__globals__
    return (
        fn.__code__.co_filename == "<string>"
        and set(glb) == {"_tuple_new", "__builtins__", "__name__"}
        and glb["_tuple_new"] is _TUPLE_NEW
        and isinstance(glb["__name__"], str)
        and glb["__name__"].startswith("namedtuple_")
    )


def _accessor(member: Any) -> bool:
    """Whether ``member`` is a field's accessor: ``_collections._tuplegetter``, or the ``itemgetter`` property without it."""
    if isinstance(_TUPLEGETTER, type):
        return type(member) is _TUPLEGETTER
    return type(member) is property and type(member.fget) is operator.itemgetter  # pragma: no cover (CPython has _collections)
