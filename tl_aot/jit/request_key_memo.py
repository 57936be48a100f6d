"""Request keys remembered: each compile request serving sees is hashed once per prim_func and per ``@tilelang.jit`` call.

:func:`tl_aot.jit.request_key.request_key` serialises the whole prim_func and hashes it, about as long
as building a small prim_func; serving asks for the key of every compile, so :class:`RequestKeys`
keeps what it computed, keyed only by what cannot change under it.
"""

from __future__ import annotations

import enum
import json

from ..gpu.cuda_driver import current_gpu
from .request_key import options_of, request_key

__all__ = ["RequestKeys"]


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
        self._by_func: dict = {}  # (id(func), options) -> (func, key)
        self._by_call: dict = {}  # (id(jit), args, options) -> (jit, key)
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


def _remember(memo: dict, key, value, limit: int) -> None:
    if len(memo) >= limit:
        memo.pop(next(iter(memo)))  # the oldest
    memo[key] = value
