"""The imports a code object makes in its body (``from .tiles import BLOCK`` inside a kernel factory), read off its bytecode.

A call key covers the module globals a function reads (:mod:`tl_aot.call_keys.code_globals`); a
function importing inside its body reads another module's values without a ``LOAD_GLOBAL``, so
the key must spell those too (:func:`tl_aot.call_keys.key._spell_globals`), or editing the
imported value would keep the key and serve the kernel built for the old one. A code object
cannot change, so its imports are read once per code object and kept by identity.
"""

from __future__ import annotations

import dis
import types
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
_IMPORT_NAME = bytes([dis.opmap["IMPORT_NAME"]])


def code_imports(code: CodeType) -> tuple[Import, ...] | None:
    """The imports in ``code`` and the code of functions defined in it, in order; None when one cannot be read whole.

    Code without an import (most kernel functions) costs one search of its opcodes; the rest is
    read with ``dis`` once per code object.
    """
    have = _IMPORTS.get(id(code))
    if have is not None and have[0] is code:
        return have[1]
    found: list[Import] | None = _own_imports(code) if code.co_code[0::2].find(_IMPORT_NAME) >= 0 else []
    for const in code.co_consts:
        if found is not None and isinstance(const, types.CodeType):
            nested = code_imports(const)
            found = None if nested is None else [*found, *nested]
    imports = None if found is None else tuple(found)
    if len(_IMPORTS) < _MEMO_LIMIT:
        _IMPORTS[id(code)] = (code, imports)  # by identity: holds the code alive, so its id is not reused
    return imports


def _own_imports(code: CodeType) -> list[Import] | None:
    """The imports ``code`` itself makes: each ``IMPORT_NAME`` with the level and names of the two constants loaded before it.

    Python 3.9 to 3.13 compile every import statement so; anything else before an ``IMPORT_NAME``
    (hand-made bytecode) is None: not read, so the caller keys nothing by it.
    """
    found: list[Import] = []
    before: list[dis.Instruction] = []
    for ins in dis.get_instructions(code):
        if ins.opname == "IMPORT_NAME":
            if len(before) < 2 or any(b.opname != "LOAD_CONST" for b in before[-2:]):
                return None
            level, names = before[-2].argval, before[-1].argval
            if type(level) is not int or not (names is None or (type(names) is tuple and all(type(n) is str for n in names))):
                return None
            found.append(Import(ins.argval, level, names))
        if ins.opname not in ("EXTENDED_ARG", "CACHE"):
            before = [*before[-1:], ins]
    return found
