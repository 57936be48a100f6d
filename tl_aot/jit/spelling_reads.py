"""What a call key's spelling of a function read, and whether it still holds: the check that lets a spelling be kept.

Spelling a function for its call key (:mod:`tl_aot.jit.call_key`) reads attributes, closure cells
and module globals. The spelling depends only on the objects read when each is immutable or
spelled by name; then, while every slot read still holds the very object it held, the spelling is
the same, and a kept spelling is checked slot by slot (by identity, in C loops) instead of being
spelled again. This module records the slots (:class:`Reads`) and checks them; what a spelling is
made of stays in :mod:`tl_aot.jit.call_key`.
"""

from __future__ import annotations

import types
from collections.abc import Iterable
from itertools import repeat
from operator import attrgetter, is_
from typing import Any

__all__ = ["ABSENT", "EMPTY_CELL", "Reads"]

ABSENT = object()  # a global the code names that the module does not define (yet)
EMPTY_CELL = object()  # what a function's closure values are when one of its cells is empty
_contents = attrgetter("cell_contents")
#: What a function is made of, read at once: its code, globals, closure cells, defaults, keyword defaults, module, qualname.
_FUNCTION_PARTS = attrgetter("__code__", "__globals__", "__closure__", "__defaults__", "__kwdefaults__", "__module__", "__qualname__")


class Reads:
    """Every slot spelling a function read (an attribute, a closure cell, a module global) and the object it held.

    A spelling depends only on these objects when each is immutable or spelled by name: ``frozen``
    says so (a list, a dict, keyword defaults, which may change in place, clear it). Then, while
    every slot still holds the very object it held (:meth:`unchanged`), the spelling is the same,
    so a function's spelling is kept and checked slot by slot instead of being spelled again.
    """

    __slots__ = ("slots", "frozen", "_check")

    def __init__(self) -> None:
        self.slots: list[tuple[int, Any, Any, Any]] = []  # (kind, holder, name or default, object read)
        self.frozen = True
        self._check: _Check | None = None

    def attr(self, obj: Any, name: str, default: Any = None) -> Any:
        value = getattr(obj, name, default)
        self.slots.append((0, obj, (name, default), value))
        return value

    def cell(self, cell: Any) -> Any:
        value = cell.cell_contents  # ValueError when empty: the caller makes the call unkeyed
        self.slots.append((1, cell, None, value))
        return value

    def function(self, fn: types.FunctionType) -> tuple[tuple[Any, ...], Any]:
        """A function's parts (:data:`_FUNCTION_PARTS`) and its closure cells' contents (``EMPTY_CELL`` if one is empty).

        One slot for what a function is made of: read with one C call, and checked so
        (:class:`_Check`), where reading each attribute as its own slot took ten.
        """
        parts = _FUNCTION_PARTS(fn)
        try:
            values: Any = tuple(map(_contents, parts[2] or ()))
        except ValueError:
            values = EMPTY_CELL
        self.slots.append((3, fn, parts, values))
        return parts, values

    def glob(self, glb: dict[str, Any], name: str) -> Any:
        value = glb.get(name, ABSENT)
        self.slots.append((2, glb, name, value))
        return value

    def unchanged(self) -> bool:
        """Whether every slot still holds the object it held when read (checked as a :class:`_Check`, made once)."""
        if self._check is None:
            self._check = _Check(self.slots)
        return self._check.unchanged()


class _Check:
    """A kept spelling's slots, each once, in columns: checked by C loops (``map``), not one Python step per slot.

    A lookup's time is mostly this check; in a real process, between two lookups the program has
    moved on (a test built tensors, TileLang traced), so what a lookup touches is out of the CPU's
    caches: the fewer objects and interpreter steps it takes, the faster it is.
    """

    __slots__ = (
        "attr_of", "attr_names", "attr_defaults", "attr_values", "cells", "cell_values", "dicts", "glob_names", "glob_values",
        "functions", "function_parts", "function_values", "torn",
    )  # fmt: skip

    def __init__(self, slots: list[tuple[int, Any, Any, Any]]) -> None:
        attrs: dict[tuple[int, str], tuple[Any, str, Any, Any]] = {}
        cells: dict[int, tuple[Any, Any]] = {}
        globs: dict[tuple[int, str], tuple[Any, str, Any]] = {}
        functions: dict[int, tuple[Any, Any, Any]] = {}
        row: tuple[Any, ...]
        self.torn = False  # a slot read twice that held two objects (changed while spelled): never unchanged
        for kind, holder, name, value in slots:  # a slot read twice (a helper two functions call) is checked once
            if kind == 3:  # a function: its parts and closure values, read as tuples
                row = functions.setdefault(id(holder), (holder, name, value))
                self.torn = self.torn or not (_same(row[1], name) and (row[2] is value or _same(row[2], value)))
                continue
            if kind == 0:
                row = attrs.setdefault((id(holder), name[0]), (holder, name[0], name[1], value))
            elif kind == 1:
                row = cells.setdefault(id(holder), (holder, value))
            else:
                row = globs.setdefault((id(holder), name), (holder, name, value))
            self.torn = self.torn or row[-1] is not value
        self.attr_of, self.attr_names, self.attr_defaults, self.attr_values = _columns(attrs.values(), 4)
        self.cells, self.cell_values = _columns(cells.values(), 2)
        self.dicts, self.glob_names, self.glob_values = _columns(globs.values(), 3)
        self.functions, self.function_parts, self.function_values = _columns(functions.values(), 3)

    def unchanged(self) -> bool:
        """Whether every slot still holds the very object it held."""
        if self.torn or not all(map(is_, map(getattr, self.attr_of, self.attr_names, self.attr_defaults), self.attr_values)):
            return False
        if not all(map(is_, map(dict.get, self.dicts, self.glob_names, repeat(ABSENT)), self.glob_values)):
            return False
        if not all(map(_same, map(_FUNCTION_PARTS, self.functions), self.function_parts)):
            return False
        try:
            return all(map(is_, map(_contents, self.cells), self.cell_values)) and all(
                map(_same, map(_closure_values, self.function_parts), self.function_values)
            )
        except ValueError:  # a cell emptied (del of the enclosing scope's variable)
            return False


def _same(now: tuple[Any, ...], then: Any) -> bool:
    """Whether two tuples hold the very same objects, item by item (``then`` may be ``EMPTY_CELL``: never the same)."""
    return type(then) is tuple and len(now) == len(then) and all(map(is_, now, then))


def _closure_values(parts: tuple[Any, ...]) -> tuple[Any, ...]:
    """The contents of the closure cells among a function's parts (ValueError when one is empty)."""
    return tuple(map(_contents, parts[2] or ()))


def _columns(rows: Iterable[tuple[Any, ...]], width: int) -> tuple[tuple[Any, ...], ...]:
    """Rows as ``width`` column tuples (empty columns when there are no rows)."""
    columns = tuple(zip(*rows))
    return columns if columns else ((),) * width
