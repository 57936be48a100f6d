"""The key of a ``@tilelang.jit`` call: what serving matches before TileLang traces the prim_func.

A request key (:func:`tl_aot.jit.request_key.request_key`) is a digest of the prim_func, which TileLang
must first build by running the user's function (``JITImpl.get_tir``): most of what a warm JIT
spends. The call key names the same kernel from the call alone: the function (module, name, a
digest of its source), every value it reads from its closure and its module's globals (numbers,
strings, dtypes, TileLang's and torch's modules by name, helper functions by their own source and
values, recursively, and the defaults of its parameters), the call's arguments, the
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
import types
from types import CodeType
from typing import Any

from ..config.options import plain_pass_configs
from ..config.user_code import source_digest, user_function

__all__ = ["CALL_SCHEMA", "call_key", "Unkeyable"]

#: Bumped when what the key covers changes (a call recorded under another schema is a miss).
CALL_SCHEMA = 1
_DEPTH = 4  # helper functions followed this deep
_SOURCES: dict[CodeType, str] = {}  # code object -> digest of its source
_GLOBALS: dict[CodeType, frozenset[str]] = {}  # code object -> the global names it reads (disassembling is most of a key's cost)
_MEMO_LIMIT = 4096


class Unkeyable(Exception):
    """A value the call depends on cannot be spelled the same in every process."""


def _library(module: str) -> bool:
    """Modules whose code is covered by the versions in the key (TileLang's, tvm's, torch's, the standard library)."""
    root = module.split(".", 1)[0]
    return root in {"tilelang", "tvm", "tvm_ffi", "torch", "math", "functools", "itertools", "typing", "builtins", "operator"}


def _spell(v, depth: int):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [type(v).__name__, [_spell(x, depth) for x in v]]
    if isinstance(v, dict):
        return ["dict", [[_spell(k, depth), _spell(x, depth)] for k, x in v.items()]]
    if isinstance(v, enum.Enum):
        return ["enum", f"{type(v).__module__}.{type(v).__qualname__}", v.name]
    if isinstance(v, types.ModuleType):  # a user's module: the values read from it are not covered
        if _library(v.__name__):
            return ["module", v.__name__]
        raise Unkeyable(f"module {v.__name__}")
    if isinstance(v, type) and _library(v.__module__):  # TileLang's classes (Fragment, ...): covered by its version
        return ["class", f"{v.__module__}.{v.__qualname__}"]
    t = type(v)
    if t.__name__ == "dtype" and t.__module__ == "torch":
        return ["torch.dtype", str(v)]
    if isinstance(v, (types.FunctionType, types.BuiltinFunctionType)) or hasattr(v, "orig_func") or type(v).__name__ == "JITImpl":
        return _spell_function(v, depth)
    raise Unkeyable(f"{type(v).__qualname__} value")


def _spell_function(fn, depth: int):
    fn = getattr(fn, "func", None) if type(fn).__name__ == "JITImpl" else fn
    fn = user_function(fn)
    module = getattr(fn, "__module__", "") or ""
    name = f"{module}.{getattr(fn, '__qualname__', '?')}"
    if isinstance(fn, types.BuiltinFunctionType) or _library(module):
        return ["function", name]
    if depth <= 0:
        raise Unkeyable(f"{name}: helpers nested too deep")
    code = getattr(fn, "__code__", None)
    source = _SOURCES.get(code) if code is not None else None
    if source is None:
        source = source_digest(fn)
        if code is not None and len(_SOURCES) < _MEMO_LIMIT:
            _SOURCES[code] = source  # the code object is what runs: its source is read once
    if code is None or not source:
        raise Unkeyable(f"{name}: no source")
    closure = {}
    for var, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell (a name bound later in the enclosing scope)
            raise Unkeyable(f"{name}: closure variable {var} unbound") from None
        closure[var] = _spell(value, depth - 1)
    glb = getattr(fn, "__globals__", {})
    used = {n: _spell(glb[n], depth - 1) for n in sorted(_global_names(code)) if n in glb}
    defaults = [_spell(list(fn.__defaults__ or ()), depth - 1), _spell(dict(fn.__kwdefaults__ or {}), depth - 1)]
    return ["function", name, source, closure, used, defaults]


def _global_names(code) -> frozenset:
    """Names the code (and the code of functions defined in it) reads as globals (not attribute names).

    Read once per code object (immutable: the same code reads the same names), as its source is.
    """
    names = _GLOBALS.get(code)
    if names is None:
        found = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                found |= _global_names(const)
        names = frozenset(found)
        if len(_GLOBALS) < _MEMO_LIMIT:
            _GLOBALS[code] = names
    return names


def call_key(jit, args: tuple[Any, ...], kwargs: dict[str, Any], gpu: str) -> str | None:
    """The key of ``jit(*args, **kwargs)`` (a ``JITImpl`` compile) on ``gpu`` (:func:`tl_aot.gpu.cuda_driver.gpu_identity`).

    None when it cannot be keyed.
    """
    try:
        import tilelang

        material = {
            "schema": CALL_SCHEMA,
            "tilelang": str(getattr(tilelang, "__version__", "")),
            "function": _spell_function(jit, _DEPTH),
            "args": _spell(list(args), 0),
            "kwargs": _spell(dict(sorted(kwargs.items())), 0),
            "out_idx": _spell(getattr(jit, "out_idx", None), 0),
            "backend": str(getattr(jit, "execution_backend", None)),
            "target": str(getattr(jit, "target", None)),
            "target_host": str(getattr(jit, "target_host", None)),
            "pass_configs": _spell(plain_pass_configs(dict(getattr(jit, "pass_configs", None) or {})), 0),
            "compile_flags": _spell(getattr(jit, "compile_flags", None), 0),
            "gpu": gpu,
        }
    except (Unkeyable, RecursionError):
        return None
    text = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]
