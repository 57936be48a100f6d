"""What a call key's spelling of a function read, and whether it still holds: the check that lets a spelling be kept.

Spelling a function for its call key (:mod:`tl_aot.call_keys.key`) reads attributes, closure cells
and module globals. The spelling depends only on the objects read when each is immutable or
spelled by name; then, while every slot read still holds the very object it held, the spelling is
the same, and a kept spelling is checked slot by slot (by identity) instead of being spelled
again. This module records the slots (:class:`Reads`) and checks them; what a spelling is made of
stays in :mod:`tl_aot.call_keys.key`.

Most kept spellings are checked once or twice (a test suite's factories make a new
``@tilelang.jit`` function per kernel class built, asked for with one or two arguments: TileOPs'
93 of 140 twice, none more): those are checked by a pass over the slots. A spelling checked many
times (a jit asked for with many arguments, the globals of a factory's code, shared by every
function it makes) is checked in columns by C loops (:class:`_Check`), which cost three passes
to set up and a little less than a pass per check.
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
_PART_NAMES = ("__code__", "__globals__", "__closure__", "__defaults__", "__kwdefaults__", "__module__", "__qualname__")
_FUNCTION_PARTS = attrgetter(*_PART_NAMES)
#: Checks made by a pass over the slots before a spelling's columns are set up (:class:`_Check`): at TileOPs' sizes a
#: pass costs about a column check (2.4 against 2.3 us at 17 slots) and setting the columns up 6 us.
_PASSES = 16


class Reads:
    """Every slot spelling a function read (an attribute, a closure cell, a module global) and the object it held.

    A spelling depends only on these objects when each is immutable or spelled by name: ``frozen``
    says so (a list, a dict, keyword defaults, which may change in place, clear it). Then, while
    every slot still holds the very object it held (:meth:`unchanged`), the spelling is the same,
    so a function's spelling is kept and checked slot by slot instead of being spelled again.
    """

    __slots__ = ("slots", "frozen", "_check", "_passes")

    def __init__(self) -> None:
        self.slots: list[tuple[int, Any, Any, Any]] = []  # (kind, holder, name or default, object read)
        self.frozen = True
        self._check: _Check | None = None
        self._passes = 0  # checks made by a pass over the slots (:func:`_held`)

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

        One slot for what a function is made of, read with one C call where reading each attribute
        as its own slot took ten; :class:`_Check` spreads it over its attribute and cell columns,
        so checking a function adds items to two C loops, not Python steps.
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
        """Whether every slot still holds the object it held when read: a pass over the slots, then a :class:`_Check`.

        The first :data:`_PASSES` checks pass over the slots (:func:`_held`); a spelling checked more
        often sets up its columns once and is checked by them from then on.
        """
        if self._check is not None:
            return self._check.unchanged()
        if self._passes < _PASSES:
            self._passes += 1
            return _held(self.slots)
        self._check = _Check(self.slots)
        return self._check.unchanged()


def _held(slots: list[tuple[int, Any, Any, Any]]) -> bool:
    """Whether every slot still holds the very object it held, slot by slot (a slot read twice is checked twice)."""
    for kind, holder, name, value in slots:
        if kind == 2:
            if holder.get(name, ABSENT) is not value:
                return False
        elif kind == 0:
            if getattr(holder, name[0], name[1]) is not value:
                return False
        elif kind == 3:  # a function: its parts, then its closure cells' contents
            parts = _FUNCTION_PARTS(holder)
            if value is EMPTY_CELL or not all(map(is_, parts, name)):
                return False
            try:
                if not all(map(is_, map(_contents, parts[2] or ()), value)):
                    return False
            except ValueError:  # a cell emptied
                return False
        else:
            try:
                if holder.cell_contents is not value:
                    return False
            except ValueError:
                return False
    return True


class _Check:
    """A kept spelling's slots, each once, in columns: checked by C loops (``map``), not one Python step per slot.

    A lookup's time is mostly this check; in a real process, between two lookups the program has
    moved on (a test built tensors, TileLang traced), so what a lookup touches is out of the CPU's
    caches: the fewer objects and interpreter steps it takes, the faster it is.
    """

    __slots__ = (
        "attr_of", "attr_names", "attr_defaults", "attr_values", "cells", "cell_values", "dicts", "glob_names", "glob_values", "torn",
    )  # fmt: skip

    def __init__(self, slots: list[tuple[int, Any, Any, Any]]) -> None:
        attrs: dict[tuple[int, str], tuple[Any, str, Any, Any]] = {}
        cells: dict[int, tuple[Any, Any]] = {}
        globs: dict[tuple[int, str], tuple[Any, str, Any]] = {}
        row: tuple[Any, ...]
        self.torn = False  # a slot read twice that held two objects (changed while spelled): never unchanged
        for kind, holder, name, value in slots:  # a slot read twice (a helper two functions call) is checked once
            if kind == 3:  # a function: each of its parts an attribute, each closure cell a cell (fewer, longer C loops)
                self.torn = self.torn or value is EMPTY_CELL
                for part, held in zip(_PART_NAMES, name):
                    row = attrs.setdefault((id(holder), part), (holder, part, None, held))
                    self.torn = self.torn or row[-1] is not held
                for cell, held in zip(name[2] or (), () if value is EMPTY_CELL else value):
                    row = cells.setdefault(id(cell), (cell, held))
                    self.torn = self.torn or row[-1] is not held
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

    def unchanged(self) -> bool:
        """Whether every slot still holds the very object it held."""
        if self.torn or not all(map(is_, map(getattr, self.attr_of, self.attr_names, self.attr_defaults), self.attr_values)):
            return False
        if not all(map(is_, map(dict.get, self.dicts, self.glob_names, repeat(ABSENT)), self.glob_values)):
            return False
        try:
            return all(map(is_, map(_contents, self.cells), self.cell_values))
        except ValueError:  # a cell emptied (del of the enclosing scope's variable)
            return False


def _columns(rows: Iterable[tuple[Any, ...]], width: int) -> tuple[tuple[Any, ...], ...]:
    """Rows as ``width`` column tuples (empty columns when there are no rows)."""
    columns = tuple(zip(*rows))
    return columns if columns else ((),) * width
