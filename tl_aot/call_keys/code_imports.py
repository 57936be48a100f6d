"""The imports a code object makes in its body (``from .tiles import BLOCK`` inside a kernel factory), read off its bytecode.

A call key covers the module globals a function reads (:mod:`tl_aot.call_keys.code_globals`); a
function importing inside its body reads another module's values without a ``LOAD_GLOBAL``, so
the key must spell those too (:func:`tl_aot.call_keys.key._spell_globals`), or editing the
imported value would keep the key and serve the kernel built for the old one. A code object
cannot change, so its imports are read once per code object and kept by identity.
"""

from __future__ import annotations

import dis
from dataclasses import dataclass
from types import CodeType

__all__ = ["Import", "code_imports"]


@dataclass(frozen=True)
class Import:
    """One ``import`` statement in a function's body: ``from <level dots><module> import <names>`` or ``import <module>``."""

    module: str  # as written, without the dots of a relative import ("" for ``from . import x``)
    level: int  # the dots of a relative import; 0 for an absolute one
    names: tuple[str, ...] | None  # what ``from ... import`` names; None for ``import module`` (the module itself)


_MEMO_LIMIT = 4096  # code objects remembered (a process spells a few hundred)
_IMPORTS: dict[int, tuple[CodeType, tuple[Import, ...] | None]] = {}  # id(code) -> (it, its imports, None if unreadable)
_IMPORT_NAME, _LOAD_CONST, _EXTENDED_ARG = dis.opmap["IMPORT_NAME"], dis.opmap["LOAD_CONST"], dis.opmap["EXTENDED_ARG"]
_IMPORT_NAME_BYTE = bytes([_IMPORT_NAME])  # searched for in the whole code, not a copy of its opcodes: most code has none


def code_imports(code: CodeType) -> tuple[Import, ...] | None:
    """The imports in ``code`` and the code of functions defined in it, in order; None when one cannot be read whole.

    Code without an import (most kernel functions) costs one search of its bytes; code with one,
    a decoding of the instructions before each ``IMPORT_NAME`` found (:func:`_own_imports`).
    """
    have = _IMPORTS.get(id(code))
    if have is not None and have[0] is code:
        return have[1]
    found: list[Import] = []
    imports = tuple(found) if _read_into(found, code) else None
    if len(_IMPORTS) < _MEMO_LIMIT:
        _IMPORTS[id(code)] = (code, imports)  # by identity: holds the code alive, so its id is not reused
    return imports


def _read_into(found: list[Import], code: CodeType) -> bool:
    """Add the imports of ``code`` and of the code defined in it to ``found``, in order; False when one cannot be read."""
    raw = code.co_code
    at = raw.find(_IMPORT_NAME_BYTE)
    while at >= 0 and at & 1:  # an argument's byte (opcodes are at even offsets)
        at = raw.find(_IMPORT_NAME_BYTE, at + 1)
    if at >= 0:
        own = _own_imports(code)
        if own is None:
            return False
        found += own
    for const in code.co_consts:
        if type(const) is CodeType and not _read_into(found, const):
            return False
    return True


def _own_imports(code: CodeType) -> list[Import] | None:
    """The imports ``code`` itself makes: each ``IMPORT_NAME`` with the level and names of the two constants loaded before it.

    Python 3.9 to 3.13 compile every import statement so (``LOAD_CONST`` level, ``LOAD_CONST``
    names, ``IMPORT_NAME`` module); anything else before an ``IMPORT_NAME`` (hand-made bytecode)
    is None: not read, so the caller keys nothing by it. Read off the bytes as
    :func:`tl_aot.call_keys.code_globals.loaded_globals` reads loads: ``dis``' instruction objects
    cost 0.1 ms for a kernel function importing from TileLang in its body, about what the rest of
    its first lookup costs; here the opcodes (every other byte) are searched with ``bytes.find``
    and only the instructions before each import decoded.
    """
    raw = code.co_code
    ops, args = raw[0::2], raw[1::2]
    found: list[Import] = []
    i = ops.find(_IMPORT_NAME)
    while i >= 0:
        module, names_at = _argument(ops, args, i)
        if names_at < 0 or ops[names_at] != _LOAD_CONST:
            return None
        names_index, level_at = _argument(ops, args, names_at)
        if level_at < 0 or ops[level_at] != _LOAD_CONST:
            return None
        level, names = code.co_consts[_argument(ops, args, level_at)[0]], code.co_consts[names_index]
        if type(level) is not int or not (names is None or (type(names) is tuple and all(type(n) is str for n in names))):
            return None
        found.append(Import(code.co_names[module], level, names))
        i = ops.find(_IMPORT_NAME, i + 1)
    return found


def _argument(ops: bytes, args: bytes, i: int) -> tuple[int, int]:
    """The argument of the instruction at code unit ``i``, and the unit of the instruction before it (-1: none).

    The EXTENDED_ARG prefixes before it give the argument's high bits, 8 each.
    """
    arg, j, shift = args[i], i - 1, 8
    while j >= 0 and ops[j] == _EXTENDED_ARG:
        arg |= args[j] << shift
        j, shift = j - 1, shift + 8
    return arg, j
