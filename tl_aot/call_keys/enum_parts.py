"""What a call key reads of a user's enum: its members' values and the methods its author wrote.

A library's enum (TileLang's, torch's, the standard library's) is covered by the versions in the
key, so a member is named (``["enum", class, name]``). A user's enum is the user's code: a kernel
factory may size a tile by ``mode.value`` or ``mode.block()``, so editing ``FAST = 64`` to ``128``
or a method's body must change the key, as editing a constant or a helper does. Its members (every
name, aliases included, and its value) and the functions, static and class methods and properties
its classes define are spelled; what ``enum`` put in the class (its maps, ``__new__``, a flag's
operators, ``_generate_next_value_``) is not: those are the standard library's, the same in every
process of one Python.
"""

from __future__ import annotations

import enum
import types
from typing import Any

__all__ = ["user_enum_classes", "members", "methods"]

#: Class members that are code: spelled when their author is the enum's, skipped when ``enum`` made them.
_CODE = (types.FunctionType, staticmethod, classmethod, property, types.DynamicClassAttribute)
#: Modules whose classes an enum may derive from without being spelled: ``enum`` itself and the builtins (an int or str mixin).
_MADE_BY = frozenset({"enum", "builtins"})


def user_enum_classes(cls: type, library: Any) -> tuple[type, ...] | None:
    """The classes of enum ``cls`` whose bodies are the user's (``cls`` first, then its user mixins), or None for a library's.

    ``library(module)`` says which modules are covered by the key's versions. An enum counts as the
    user's when its own class is; its bases from ``enum`` and the builtins are not spelled.
    """
    if library(cls.__module__) or cls.__module__ in _MADE_BY:
        return None
    return tuple(c for c in cls.__mro__ if c.__module__ not in _MADE_BY and not library(c.__module__))


def members(cls: type[enum.Enum]) -> list[tuple[str, Any]]:
    """Every member of enum ``cls`` by name, aliases included, in definition order: ``(name, value)``."""
    return [(name, member._value_) for name, member in cls.__members__.items()]


def methods(cls: type) -> list[tuple[str, Any]]:
    """The code ``cls``'s own body defines (functions, static and class methods, properties), not what ``enum`` made.

    A member is ``enum``'s when its function's module is ``enum`` (``__new__``, a flag's operators,
    the default ``_generate_next_value_``); a user's override of one of those names is spelled.
    """
    own = []
    for name, member in cls.__dict__.items():
        if isinstance(member, _CODE) and _author_module(member) != "enum" and not isinstance(member, enum.Enum):
            own.append((name, member))
    return own


def _author_module(member: Any) -> str | None:
    """The module of the function behind class member ``member`` (a method, a static or class method, a property's getter)."""
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    elif isinstance(member, (property, types.DynamicClassAttribute)):
        member = member.fget
    return getattr(member, "__module__", None)
