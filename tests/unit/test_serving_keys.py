"""Serving's request keys: computed once per prim_func and per @tilelang.jit call, never reused for another request."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("tilelang")
sys.path.insert(0, str(Path(__file__).parents[1] / "kernels"))
import elementwise  # noqa: E402

from tl_aot.jit.request_key import (  # noqa: E402
    RequestKeys,  # noqa: E402
    options_of,
    request_key,
)
from tl_aot.jit.seam import CompileRequest, JitCall  # noqa: E402


def _req(func, **kw) -> CompileRequest:
    return CompileRequest.of(func, None, **kw)


def test_the_same_prim_func_is_hashed_once_and_keys_equal_the_full_key():
    keys = RequestKeys()
    func = elementwise.axpy(1024)
    first = keys.key(_req(func))
    assert keys.key(_req(func)) == first == request_key(func, options_of(_req(func)))
    assert keys.hashed == 1
    other = keys.key(_req(func, pass_configs={"tl.disable_tma_lower": True}))  # other options: another request
    assert other != first and keys.hashed == 2


def test_the_same_jit_call_is_hashed_once_even_with_a_new_prim_func():
    keys = RequestKeys()
    jit = object()  # stands for a @tilelang.jit object: only its identity keys the memo
    a = keys.key(_req(elementwise.axpy(1024)), JitCall(jit, (), {"N": 1024}))
    b = keys.key(_req(elementwise.axpy(1024)), JitCall(jit, (), {"N": 1024}))  # built again, same call
    assert a == b and keys.hashed == 1
    c = keys.key(_req(elementwise.axpy(2048)), JitCall(jit, (), {"N": 2048}))  # other arguments
    assert c != a and keys.hashed == 2


def test_a_call_with_an_argument_that_may_change_is_always_hashed():
    keys = RequestKeys()
    jit = object()

    class Shape:  # hashed by identity, and could be mutated between calls (as a tensor is resized)
        n = 1024

    arg = Shape()
    keys.key(_req(elementwise.axpy(1024)), JitCall(jit, (arg,), {}))
    arg.n = 2048
    key = keys.key(_req(elementwise.axpy(2048)), JitCall(jit, (arg,), {}))
    assert key == request_key(elementwise.axpy(2048), options_of(_req(elementwise.axpy(2048))))
    assert keys.hashed == 2
