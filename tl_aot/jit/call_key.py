"""The key of a ``@tilelang.jit`` call: what serving matches before TileLang traces the prim_func.

A request key (:func:`tl_aot.jit.request_key.request_key`) is a digest of the prim_func, which TileLang
must first build by running the user's function (``JITImpl.get_tir``): most of what a warm JIT
spends. The call key names the same kernel from the call alone: the function (module, name, a
digest of the source lines its code object spans: :mod:`tl_aot.jit.code_source`), every value it
reads from its closure and its module's globals (numbers, strings, dtypes, TileLang's and torch's
modules by name, helper functions by their own source and values, recursively, and the defaults
of its parameters), the call's arguments, the
``@tilelang.jit`` options, the GPU (compute capability and what a factory may size its kernel
by: SM count, shared memory, L2; :func:`tl_aot.gpu.cuda_driver.gpu_identity`) and TileLang's
version. A capture records it beside the request key it led to; serving answers a call whose key
a library holds with that request's kernel, without tracing.

Anything that cannot be spelled the same way in every process (a tensor, an object compared by
identity, a class, a user's module, a function without source) makes the call unkeyed:
:func:`call_key` returns None and serving falls back to the request key. A call key never names
another kernel: what the function could read that the key does not cover makes it None, never a
guess.
"""

from __future__ import annotations

import dis
import enum
import hashlib
import json
import sys
import types
from types import CodeType
from typing import Any

from ..config.options import plain_pass_configs
from .code_source import code_source_digest

__all__ = ["CALL_SCHEMA", "call_key", "Unkeyable"]

#: Bumped when what the key covers changes (a call recorded under another schema is a miss: the schema is
#: part of the digested material, so an old record's key is never equal to a new one, whatever it spelled).
#: 2: a function's source is the span of its code object's lines (:mod:`tl_aot.jit.code_source`), not
#: ``inspect.getsource``'s block.
CALL_SCHEMA = 2
_DEPTH = 4  # helper functions followed this deep
_GLOBALS: dict[int, tuple[CodeType, frozenset[str]]] = {}  # id(code object) -> (it, the global names it reads)
_MEMO_LIMIT = 4096
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))  # the key's JSON: keys sorted, no spaces
_ABSENT = object()  # a global the code names that the module does not define (yet)


class Unkeyable(Exception):
    """A value the call depends on cannot be spelled the same in every process."""


class _Reads:
    """Every slot spelling a function read (an attribute, a closure cell, a module global) and the object it held.

    A spelling depends only on these objects when each is immutable or spelled by name: ``frozen``
    says so (a list, a dict, keyword defaults, which may change in place, clear it). Then, while
    every slot still holds the very object it held (:meth:`unchanged`), the spelling is the same,
    so a function's spelling is kept and checked slot by slot instead of being spelled again.
    """

    __slots__ = ("slots", "frozen")

    def __init__(self) -> None:
        self.slots: list[tuple[int, Any, Any, Any]] = []  # (kind, holder, name, object read)
        self.frozen = True

    def attr(self, obj: Any, name: str, default: Any = None) -> Any:
        value = getattr(obj, name, default)
        self.slots.append((0, obj, name, value))
        return value

    def cell(self, cell: Any) -> Any:
        value = cell.cell_contents  # ValueError when empty: the caller makes the call unkeyed
        self.slots.append((1, cell, None, value))
        return value

    def glob(self, glb: dict[str, Any], name: str) -> Any:
        value = glb.get(name, _ABSENT)
        self.slots.append((2, glb, name, value))
        return value

    def unchanged(self) -> bool:
        """Whether every slot still holds the object it held when read."""
        for kind, holder, name, value in self.slots:
            if kind == 0:
                now = getattr(holder, name, None)
            elif kind == 1:
                try:
                    now = holder.cell_contents
                except ValueError:
                    return False
            else:
                now = holder.get(name, _ABSENT)
            if now is not value:
                return False
        return True


#: id(function) -> (the function, what its spelling read, the spelling as key JSON): kept while unchanged (:class:`_Reads`).
_SPELLED: dict[int, tuple[Any, _Reads, str]] = {}


def _library(module: str) -> bool:
    """Modules whose code is covered by the versions in the key (TileLang's, tvm's, torch's, the standard library)."""
    root = module.split(".", 1)[0]
    return root in {"tilelang", "tvm", "tvm_ffi", "torch", "math", "functools", "itertools", "typing", "builtins", "operator"}


def _spell(v, depth: int, reads: _Reads):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        if not isinstance(v, tuple):
            reads.frozen = False  # may change in place
        return [type(v).__name__, [_spell(x, depth, reads) for x in v]]
    if isinstance(v, dict):
        reads.frozen = False
        return ["dict", [[_spell(k, depth, reads), _spell(x, depth, reads)] for k, x in v.items()]]
    if isinstance(v, enum.Enum):
        return ["enum", f"{type(v).__module__}.{type(v).__qualname__}", v.name]
    if isinstance(v, types.ModuleType):  # a user's module: the values read from it are not covered
        name = reads.attr(v, "__name__", "")
        if _library(name):
            return ["module", name]
        raise Unkeyable(f"module {name}")
    if isinstance(v, type):
        module = reads.attr(v, "__module__", "")
        if _library(module):  # TileLang's classes (Fragment, ...): covered by its version
            return ["class", f"{module}.{reads.attr(v, '__qualname__', '')}"]
    t = type(v)
    if t.__name__ == "dtype" and t.__module__ == "torch":
        return ["torch.dtype", str(v)]
    if isinstance(v, (types.FunctionType, types.BuiltinFunctionType)) or hasattr(v, "orig_func") or type(v).__name__ == "JITImpl":
        return _spell_function(v, depth, reads)
    raise Unkeyable(f"{type(v).__qualname__} value")


def _spell_function(fn, depth: int, reads: _Reads, text: bool = False):
    """The spelling of function ``fn`` (a list), or with ``text`` the same as the key's JSON (what encoding the list gives)."""
    fn = reads.attr(fn, "func") if type(fn).__name__ == "JITImpl" else fn
    fn = reads.attr(fn, "orig_func") or fn  # config.user_code.user_function, read through the record
    module = reads.attr(fn, "__module__", "") or ""
    name = f"{module}.{reads.attr(fn, '__qualname__', '?')}"
    if isinstance(fn, types.BuiltinFunctionType) or _library(module):
        return _ENCODER.encode(["function", name]) if text else ["function", name]
    if depth <= 0:
        raise Unkeyable(f"{name}: helpers nested too deep")
    code = reads.attr(fn, "__code__")
    glb = reads.attr(fn, "__globals__", {})
    if code is None:
        raise Unkeyable(f"{name}: no source")
    source = code_source_digest(code, glb)
    if not source:
        raise Unkeyable(f"{name}: no source")
    closure = {}
    for var, cell in zip(code.co_freevars, reads.attr(fn, "__closure__") or ()):
        try:
            value = reads.cell(cell)
        except ValueError:  # an empty cell (a name bound later in the enclosing scope)
            raise Unkeyable(f"{name}: closure variable {var} unbound") from None
        closure[var] = _spell(value, depth - 1, reads)
    used = _spell_globals(code, glb, depth - 1, reads)
    positional = reads.attr(fn, "__defaults__") or ()  # a tuple: its items are spelled as a list's
    kwdefaults = reads.attr(fn, "__kwdefaults__")
    if kwdefaults is not None:
        reads.frozen = False  # a dict: may change in place
    defaults = [
        ["list", [_spell(x, depth - 1, reads) for x in positional]],
        ["dict", [[_spell(k, depth - 1, reads), _spell(x, depth - 1, reads)] for k, x in (kwdefaults or {}).items()]],
    ]
    if not text:
        return ["function", name, source, closure, used.value, defaults]
    # the list's JSON, its globals' part encoded once while kept: items joined by "," as the encoder joins them
    return f'["function",{_ENCODER.encode(name)},"{source}",{_ENCODER.encode(closure)},{used.json()},{_ENCODER.encode(defaults)}]'


class _Kept:
    """The module globals a code object reads, spelled, with what the spelling read and (once asked for) its JSON."""

    __slots__ = ("code", "glb", "reads", "value", "text")

    def __init__(self, code: CodeType, glb: dict[str, Any], reads: _Reads, value: dict[str, Any]) -> None:
        self.code, self.glb, self.reads, self.value = code, glb, reads, value
        self.text = ""

    def json(self) -> str:
        if not self.text:
            self.text = _ENCODER.encode(self.value)
        return self.text


#: (id(code), id(globals), depth) -> the spelling of the globals that code reads there: kept while unchanged.
_USED: dict[tuple[int, int, int], _Kept] = {}


def _spell_globals(code: CodeType, glb: dict[str, Any], depth: int, reads: _Reads) -> _Kept:
    """The module globals ``code`` reads, spelled: kept per code object and module while every slot they read is unchanged.

    A kernel factory makes a new ``@tilelang.jit`` function (a new closure over the same code) each
    time it is called; its globals -- the module's constants and helper functions, spelled
    recursively -- are the same objects each time, so they are re-checked (:meth:`_Reads.unchanged`)
    rather than spelled and encoded again. The slots are added to ``reads``, so whoever keeps
    ``reads``' spelling re-checks them too. Keyed by identity (equal code objects of two files are
    two entries), each entry holding its code and globals alive so their ids are not reused.
    """
    memo = (id(code), id(glb), depth)
    have = _USED.get(memo)
    if have is not None and have.code is code and have.glb is glb and have.reads.unchanged():
        reads.slots.extend(have.reads.slots)
        return have
    mine = _Reads()
    used = {}
    for n in sorted(_global_names(code)):
        value = mine.glob(glb, n)
        if value is not _ABSENT:
            used[n] = _spell(value, depth, mine)
    reads.slots.extend(mine.slots)
    kept = _Kept(code, glb, mine, used)
    if mine.frozen:
        if len(_USED) >= _MEMO_LIMIT:
            _USED.pop(next(iter(_USED)))  # the oldest
        _USED[memo] = kept
    else:
        reads.frozen = False
        _USED.pop(memo, None)
    return kept


def _function_text(jit) -> str:
    """The spelling of ``jit``'s function as the key's JSON: spelled once, then kept while what it read is unchanged.

    A ``@tilelang.jit`` kernel is asked for with many arguments; its function, closure, globals and
    defaults are the same objects each time, so the first call of each arguments re-checks them
    (:meth:`_Reads.unchanged`) instead of spelling and encoding them again.
    """
    have = _SPELLED.get(id(jit))
    if have is not None and have[0] is jit and have[1].unchanged():
        return have[2]
    reads = _Reads()
    text = _spell_function(jit, _DEPTH, reads, True)
    if reads.frozen:
        if len(_SPELLED) >= _MEMO_LIMIT:
            _SPELLED.pop(next(iter(_SPELLED)))  # the oldest
        _SPELLED[id(jit)] = (jit, reads, text)  # holds jit alive: its id is not reused while remembered
    else:
        _SPELLED.pop(id(jit), None)
    return text


def _global_names(code) -> frozenset:
    """Names the code (and the code of functions defined in it) reads as globals (not attribute names).

    Read once per code object (immutable: the same code reads the same names), as its source is.
    """
    have = _GLOBALS.get(id(code))
    if have is not None and have[0] is code:
        return have[1]
    found = _loaded_globals(code)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _global_names(const)
    names = frozenset(found)
    if len(_GLOBALS) < _MEMO_LIMIT:
        _GLOBALS[id(code)] = (code, names)  # by identity: hashing a code object hashes its constants, nested code included
    return names


_LOAD_GLOBAL, _LOAD_NAME, _EXTENDED_ARG = dis.opmap["LOAD_GLOBAL"], dis.opmap["LOAD_NAME"], dis.opmap["EXTENDED_ARG"]
_GLOBAL_ARG_SHIFT = 1 if sys.version_info >= (3, 11) else 0  # from 3.11 LOAD_GLOBAL's low bit says "push NULL too"


def _loaded_globals(code: CodeType) -> set[str]:
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


def call_key(jit, args: tuple[Any, ...], kwargs: dict[str, Any], gpu: str) -> str | None:
    """The key of ``jit(*args, **kwargs)`` (a ``JITImpl`` compile) on ``gpu`` (:func:`tl_aot.gpu.cuda_driver.gpu_identity`).

    None when it cannot be keyed. The key is the SHA-256 of the call's material as JSON (keys
    sorted, no spaces); the function's part comes from :func:`_function_text`, spliced in where
    its key sorts, so the text is the whole material's ``json.dumps`` exactly.
    """
    try:
        import tilelang

        reads = _Reads()  # the call's own values: spelled every time
        material = {
            "args": _spell(list(args), 0, reads),
            "backend": str(getattr(jit, "execution_backend", None)),
            "compile_flags": _spell(getattr(jit, "compile_flags", None), 0, reads),
            "gpu": gpu,
            "kwargs": _spell(dict(sorted(kwargs.items())), 0, reads),
            "out_idx": _spell(getattr(jit, "out_idx", None), 0, reads),
            "pass_configs": _spell(plain_pass_configs(dict(getattr(jit, "pass_configs", None) or {})), 0, reads),
            "schema": CALL_SCHEMA,
            "target": str(getattr(jit, "target", None)),
            "target_host": str(getattr(jit, "target_host", None)),
            "tilelang": str(getattr(tilelang, "__version__", "")),
        }
        function = _function_text(jit)
    except (Unkeyable, RecursionError):
        return None
    # "function" sorts between "compile_flags" and "gpu"; the call's values hold no JSON object (dicts are spelled as
    # lists) and their strings are escaped, so the first ',"gpu":' is the top-level key
    text = _ENCODER.encode(material)
    cut = text.index(',"gpu":')
    text = f'{text[:cut]},"function":{function}{text[cut:]}'
    return hashlib.sha256(text.encode()).hexdigest()[:32]
