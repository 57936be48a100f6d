"""JSON as a call key writes it: plain values (None, bools, numbers, strings, and lists of them) in one C call.

A call key (:mod:`tl_aot.call_keys.key`) is the SHA-256 of its material's JSON text, keys sorted,
no spaces: exactly ``json.dumps(material, sort_keys=True, separators=(",", ":"))``. The key writes
that text directly rather than building the material and encoding it; this module holds the
writers of the plain parts: json's own C functions, set up once (``JSONEncoder.encode`` sets up
a new C encoder on every call), and what a plain value of each exact type is written as.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from json.encoder import c_make_encoder  # type: ignore[attr-defined]
from json.encoder import encode_basestring_ascii as json_str
from typing import Any

__all__ = ["PLAIN", "all_plain", "encode_plain", "float_text", "json_str"]

_INF = math.inf


def float_text(v: float) -> str:
    """A float as JSON spells it (``allow_nan``: ``NaN``, ``Infinity``, ``-Infinity``)."""
    if v != v:
        return "NaN"
    if v == _INF:
        return "Infinity"
    if v == -_INF:
        return "-Infinity"
    return float.__repr__(v)


#: Exact types spelled as themselves: their JSON, as the key's encoder writes it (json's own C functions where it has them).
PLAIN: dict[type, Callable[[Any], str]] = {
    str: json_str,
    int: int.__repr__,
    float: float_text,
    bool: {True: "true", False: "false"}.__getitem__,
    type(None): lambda _: "null",
}


_PLAIN_TYPES = frozenset(PLAIN)


def _unencodable(o: Any) -> Any:
    raise TypeError(f"{type(o).__qualname__} is not plain")  # never reached: only plain values are encoded


def _json_encoder() -> Callable[[Any], str]:
    """The key's JSON encoder (keys sorted, no spaces): json's C encoder made once, called without ``JSONEncoder.encode``'s setup.

    ``JSONEncoder.encode`` makes a new C encoder (and a dozen Python steps) per call; the values
    encoded here are plain, so no circular-reference markers are needed. Without json's C
    accelerator, ``JSONEncoder.encode`` itself (same text).
    """
    if c_make_encoder is None:
        return json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode
    chunks = c_make_encoder(None, _unencodable, json_str, None, ":", ",", True, False, True)
    return lambda v: "".join(chunks(v, 0))


#: Values made only of plain items are written by it in one C call.
encode_plain = _json_encoder()


def all_plain(values: Iterable[Any]) -> bool:
    """Whether every value is of an exact plain type: spelled as itself, so JSON-encoded as is."""
    return _PLAIN_TYPES.issuperset(map(type, values))
