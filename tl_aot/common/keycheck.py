"""Checks for values where they enter (spec files, setup.py, the CLI): unknown keys and wrong types are one-line SpecErrors.

Each message names where the value came from, the key, what was expected and what came, and for a
misspelt key the nearest known one ("did you mean 'name'?").
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any, Union

from .errors import SpecError

#: What ``isinstance`` takes: a type or a tuple of types.
_Types = Union[type, tuple[type, ...]]

__all__ = ["check_keys", "did_you_mean", "expect", "expect_table", "expect_str", "expect_str_list", "described"]


def did_you_mean(word: str, known: Iterable[object]) -> str:
    """`` (did you mean 'name'?)`` for the closest of ``known``, or ``""``."""
    close = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_keys(table: Mapping[str, object], known: Iterable[str], where: str) -> None:
    """Raise a :class:`SpecError` naming the first key of ``table`` that is not in ``known``, with a suggestion."""
    known = tuple(known)
    for key in table:
        if key not in known:
            msg = f"{where}: unknown key {key!r}{did_you_mean(key, known)}; known keys: {', '.join(known)}"
            raise SpecError(msg)


def described(value: object) -> str:
    """``int 90``, ``str 'x'``, ``list ['x']``: what came, for a message (long values cut)."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def expect(value: Any, types: _Types, key: str, where: str, expected: str) -> Any:
    """``value`` if it is one of ``types`` (bools are not ints), else a SpecError naming the key, ``expected`` and what came."""
    if isinstance(value, types) and not (isinstance(value, bool) and bool not in _as_tuple(types)):
        return value
    msg = f"{where}: {key} must be {expected}, got {described(value)}"
    raise SpecError(msg)


def expect_table(value: object, key: str, where: str, example: str = "") -> dict[str, Any]:
    """A table (dict)."""
    table: dict[str, Any] = expect(value, dict, key, where, "a table" + (f", e.g. {example}" if example else ""))
    return table


def expect_str(value: object, key: str, where: str, example: str = "") -> str:
    """A non-empty string."""
    text: str = expect(value, str, key, where, "a string" + (f", e.g. {example}" if example else ""))
    if not text.strip():
        msg = f"{where}: {key} must not be empty"
        raise SpecError(msg)
    return text


def expect_str_list(value: Any, key: str, where: str, example: str = "", *, single_ok: bool = True) -> tuple[str, ...]:
    """A list of strings (a lone string counts as a list of one when ``single_ok``)."""
    if single_ok and isinstance(value, str):
        return (value,)
    expected = "a list of strings" + (f", e.g. {example}" if example else "")
    expect(value, (list, tuple), key, where, expected)
    for item in value:
        if not isinstance(item, str):
            msg = f"{where}: {key} must be {expected}, got {described(item)} in the list"
            raise SpecError(msg)
    return tuple(value)


def _as_tuple(types: _Types) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)
