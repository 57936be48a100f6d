"""The identity of a compile request: its prim_func (without source locations) and its options (headers by content).

The request's **key** is a digest of the prim_func as TVM JSON (source locations dropped,
:func:`tl_aot.jit.ir_record.normalized_ir`) and of its options (``out_idx``, pass configs, compile
flags with header paths replaced by their contents' digests, target, backend): the same kernel asked
for on another machine, from another install path, has the same key. Capture records it, the
build ships it with each variant, serving and ``verify`` match on it.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ..common.json_types import JsonMapping
from ..config.options import plain_pass_configs, portable_flags
from ..gpu.cuda_driver import current_gpu
from .ir_record import normalized_ir
from .pristine_ir import pristine_ir

__all__ = ["recorded_flags", "backend_kind", "options_of", "request_key", "RequestKeys"]

_CUTEDSL = ("cutedsl",)


def recorded_flags(item: JsonMapping) -> list[str]:
    """A recorded request's compile flags with paths spelled by content (:func:`portable_flags`).

    The digests come from the headers the record carries (and those of TileLang's it names), so the
    spelling is the same on any machine.
    """
    digests = {p: hashlib.sha256(base64.b64decode(b64)).hexdigest() for p, b64 in item.get("headers", {}).items()}
    digests.update({p: t["sha256"] for p, t in item.get("tilelang_headers", {}).items() if t.get("sha256")})
    return portable_flags(item.get("options", {}).get("compile_flags", []), digests)


def backend_kind(execution_backend, target) -> str:
    """``cutedsl`` for TileLang's CuTeDSL backend, else ``cuda`` (every other backend compiles the same CUDA)."""
    if execution_backend in _CUTEDSL or (isinstance(target, str) and target.strip() in _CUTEDSL):
        return "cutedsl"
    if isinstance(target, dict):
        return "cutedsl" if target.get("kind") in _CUTEDSL or "cutedsl" in (target.get("keys") or ()) else "cuda"
    keys = getattr(target, "keys", None)  # a tvm Target: TileLang marks its CuTeDSL targets with a "cutedsl" key
    return "cutedsl" if keys is not None and not callable(keys) and "cutedsl" in [str(k) for k in keys] else "cuda"


def options_of(req) -> dict[str, Any]:
    """The options of a compile request, as JSON values."""
    out_idx = req.out_idx
    if out_idx is not None and not isinstance(out_idx, (list, tuple)):
        out_idx = [out_idx]
    return {
        "out_idx": None if out_idx is None else [int(i) if not isinstance(i, str) else i for i in out_idx],
        "pass_configs": plain_pass_configs(req.pass_configs),
        "compile_flags": list(req.compile_flags),
        "backend": backend_kind(req.execution_backend, req.target),
        "target": None if req.target is None else str(req.target),
    }


def request_key(func, options: Mapping[str, Any], *, text: str | None = None) -> str:
    """The identity of a compile request: prim_func (without locations) and options (headers by content).

    ``text``: the prim_func already saved as JSON (:func:`tl_aot.jit.pristine_ir.pristine_ir`, or a record's
    IR); by default the prim_func as this process first saw it, since TileLang's lowering renames its
    variables in place (:mod:`tl_aot.jit.pristine_ir`): a key must not depend on what was lowered before.
    """
    keyed = {**options, "compile_flags": portable_flags(options["compile_flags"])}
    h = hashlib.sha256(normalized_ir(func, pristine_ir(func) if text is None else text).encode())
    h.update(json.dumps(keyed, sort_keys=True, default=str).encode())
    return h.hexdigest()[:32]


class RequestKeys:
    """:func:`tl_aot.jit.request_key.request_key` of each request, computed once per prim_func and per ``@tilelang.jit`` call.

    The key serialises the whole prim_func (TVM JSON) and hashes it: about as long as building a
    small prim_func. A request seen before is not hashed again: the same prim_func object with the
    same options, or the same ``@tilelang.jit`` object compiled with the same arguments and options
    (what TileLang's own per-object kernel cache assumes gives the same kernel; direct
    ``JITImpl.compile`` calls, the autotuner's among them, bypass that cache). Each memo holds
    what it is keyed by alive, so an id is never reused while remembered; both are bounded.
    """

    LIMIT = 4096

    def __init__(self) -> None:
        self._by_func: dict[tuple[int, str], tuple[Any, str]] = {}  # (id(func), options) -> (func, key)
        self._by_call: dict[tuple[int, str, str], tuple[Any, str]] = {}  # (id(jit), args, options) -> (jit, key)
        self.hashed = 0  # requests hashed (not answered from a memo)

    def key(self, req, jit_call=None) -> str:
        options = options_of(req)
        spelled = json.dumps(options, sort_keys=True, default=str)
        fkey = (id(req.func), spelled)
        have = self._by_func.get(fkey)
        if have is not None and have[0] is req.func:
            return have[1]
        ckey = _call_key(jit_call, spelled + current_gpu().cc)  # a factory may pick its tiles by the GPU
        have = self._by_call.get(ckey) if ckey is not None else None
        if have is not None and have[0] is jit_call.jit:
            key = have[1]
        else:
            key = request_key(req.func, options)
            self.hashed += 1
            if ckey is not None:
                _remember(self._by_call, ckey, (jit_call.jit, key), self.LIMIT)
        _remember(self._by_func, fkey, (req.func, key), self.LIMIT)
        return key


def _call_key(jit_call, options: str):
    """``(id(jit), args, kwargs, options)`` of a ``@tilelang.jit`` compile, or None when an argument is not a plain value.

    Only values that compare by content and cannot change in place key the memo (numbers,
    strings, tuples of them, torch dtypes, enum members): a tensor (an eager kernel's argument) or
    any object hashed by identity is asked for afresh, since its shape or contents may differ.
    """
    if jit_call is None:
        return None
    values = (*jit_call.args, *jit_call.kwargs.values())
    if not all(_plain(v) for v in values):
        return None
    return (id(jit_call.jit), jit_call.args, tuple(sorted(jit_call.kwargs.items())), options)


def _plain(v) -> bool:
    if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
        return True
    if isinstance(v, (tuple, frozenset)):
        return all(_plain(x) for x in v)
    if isinstance(v, enum.Enum):
        return True
    t = type(v)
    return t.__name__ == "dtype" and t.__module__ == "torch"  # torch.float16 and the like: immutable singletons


def _remember(memo: dict[Any, Any], key, value, limit: int) -> None:
    if len(memo) >= limit:
        memo.pop(next(iter(memo)))  # the oldest
    memo[key] = value
