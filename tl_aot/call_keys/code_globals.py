"""The names a code object reads as module globals, read off its bytecode: which globals a call key spells.

A function's call key (:mod:`tl_aot.call_keys.key`) covers every module global it reads, so it
needs the names its code (and the code of the functions defined in it) loads with ``LOAD_GLOBAL``
or ``LOAD_NAME``: never attribute names, never names it only stores. A code object cannot change,
so its names are read once per code object and kept by identity.
"""

from __future__ import annotations

import dis
import sys
import types
from types import CodeType

__all__ = ["attributes_read", "global_names", "loaded_globals"]

_MEMO_LIMIT = 4096  # code objects remembered (a process spells a few hundred)
_GLOBALS: dict[int, tuple[CodeType, frozenset[str]]] = {}  # id(code object) -> (it, the global names it reads)


def global_names(code: CodeType) -> frozenset[str]:
    """Names the code (and the code of functions defined in it) reads as globals (not attribute names).

    Read once per code object (immutable: the same code reads the same names), as its source is.
    """
    have = _GLOBALS.get(id(code))
    if have is not None and have[0] is code:
        return have[1]
    found = loaded_globals(code)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= global_names(const)
    names = frozenset(found)
    if len(_GLOBALS) < _MEMO_LIMIT:
        _GLOBALS[id(code)] = (code, names)  # by identity: hashing a code object hashes its constants, nested code included
    return names


_LOAD_GLOBAL, _LOAD_NAME, _EXTENDED_ARG = dis.opmap["LOAD_GLOBAL"], dis.opmap["LOAD_NAME"], dis.opmap["EXTENDED_ARG"]
_GLOBAL_ARG_SHIFT = 1 if sys.version_info >= (3, 11) else 0  # from 3.11 LOAD_GLOBAL's low bit says "push NULL too"


def loaded_globals(code: CodeType) -> set[str]:
    """The names ``code`` itself loads with LOAD_GLOBAL / LOAD_NAME: ``dis.get_instructions``' answer, read off the bytes.

    A served process spells each function once; building ``dis``' instruction objects was half of
    that (3.5 ms for one of TileOPs' kernel factories), and stepping through the bytes in Python a
    tenth: the opcodes (every other byte) are searched with ``bytes.find`` instead, and only the
    loads found are decoded (with the EXTENDED_ARG prefixes before them).
    """
    names, raw = code.co_names, code.co_code
    ops, args = raw[0::2], raw[1::2]
    found: set[str] = set()
    for op, shift in ((_LOAD_GLOBAL, _GLOBAL_ARG_SHIFT), (_LOAD_NAME, 0)):
        i = ops.find(op)
        while i >= 0:
            arg, j, byte = args[i], i - 1, 8
            while j >= 0 and ops[j] == _EXTENDED_ARG:  # each prefix gives the next 8 high bits
                arg |= args[j] << byte
                j, byte = j - 1, byte + 8
            found.add(names[arg >> shift])
            i = ops.find(op, i + 1)
    return found


_ATTRIBUTES: dict[tuple[int, str], tuple[CodeType, frozenset[str] | None]] = {}  # (id(code), global) -> (it, what)
_ATTRIBUTE_LOADS = frozenset({"LOAD_ATTR", "LOAD_METHOD"})


def attributes_read(code: CodeType, name: str) -> frozenset[str] | None:
    """The attributes ``code`` (and code defined in it) reads off global ``name``: ``utils.BLOCK``, ``utils.ceil_div(...)``.

    None when the code uses the global any other way (passes it on, stores an attribute, ``getattr``
    with a computed name): what it reads of it is then not known from the bytecode. Read with
    ``dis`` once per code object and name (only for a global holding a user's module).
    """
    have = _ATTRIBUTES.get((id(code), name))
    if have is not None and have[0] is code:
        return have[1]
    read: set[str] = set()
    found: set[str] | None = read
    steps = [i for i in dis.get_instructions(code) if i.opname not in ("CACHE", "EXTENDED_ARG")]
    for i, ins in enumerate(steps):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and ins.argval == name:
            after = steps[i + 1] if i + 1 < len(steps) else None
            if after is None or after.opname not in _ATTRIBUTE_LOADS or type(after.argval) is not str:
                found = None
                break
            read.add(after.argval)
    for const in code.co_consts:
        if found is not None and isinstance(const, types.CodeType):
            nested = attributes_read(const, name)
            found = None if nested is None else found | nested
    attributes = None if found is None else frozenset(found)
    if len(_ATTRIBUTES) < _MEMO_LIMIT:
        _ATTRIBUTES[(id(code), name)] = (code, attributes)  # holds the code alive, so its id is not reused
    return attributes
