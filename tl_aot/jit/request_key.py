"""The identity of a compile request: its prim_func (without source locations) and its options (headers by content).

The request's **key** is a digest of the prim_func as TVM JSON (source locations dropped,
:func:`tl_aot.jit.ir_record.normalized_ir`) and of its options (``out_idx``, pass configs, compile
flags with header paths replaced by their contents' digests, target, backend): the same kernel asked
for on another machine, from another install path, has the same key. Capture records it, the
build ships it with each variant, serving and ``verify`` match on it.
"""

from __future__ import annotations

import base64
import hashlib
import json

from ..config.options import plain_pass_configs, portable_flags
from .ir_record import normalized_ir
from .pristine_ir import pristine_ir

__all__ = ["recorded_flags", "backend_kind", "options_of", "request_key"]

_CUTEDSL = ("cutedsl",)


def recorded_flags(item: dict) -> list[str]:
    """A recorded request's compile flags with paths spelled by content (:func:`portable_flags`).

    The digests come from the headers the record carries, so the spelling is the same on any machine.
    """
    digests = {p: hashlib.sha256(base64.b64decode(b64)).hexdigest() for p, b64 in item.get("headers", {}).items()}
    return portable_flags(item.get("options", {}).get("compile_flags", []), digests)


def backend_kind(execution_backend, target) -> str:
    """``cutedsl`` for TileLang's CuTeDSL backend, else ``cuda`` (every other backend compiles the same CUDA)."""
    if execution_backend in _CUTEDSL or (isinstance(target, str) and target.strip() in _CUTEDSL):
        return "cutedsl"
    if isinstance(target, dict):
        return "cutedsl" if target.get("kind") in _CUTEDSL or "cutedsl" in (target.get("keys") or ()) else "cuda"
    keys = getattr(target, "keys", None)  # a tvm Target: TileLang marks its CuTeDSL targets with a "cutedsl" key
    return "cutedsl" if keys is not None and not callable(keys) and "cutedsl" in [str(k) for k in keys] else "cuda"


def options_of(req) -> dict:
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


def request_key(func, options: dict, *, text: str | None = None) -> str:
    """The identity of a compile request: prim_func (without locations) and options (headers by content).

    ``text``: the prim_func already saved as JSON (:func:`tl_aot.jit.pristine_ir.pristine_ir`, or a record's
    IR); by default the prim_func as this process first saw it, since TileLang's lowering renames its
    variables in place (:mod:`tl_aot.jit.pristine_ir`): a key must not depend on what was lowered before.
    """
    keyed = {**options, "compile_flags": portable_flags(options["compile_flags"])}
    h = hashlib.sha256(normalized_ir(func, pristine_ir(func) if text is None else text).encode())
    h.update(json.dumps(keyed, sort_keys=True, default=str).encode())
    return h.hexdigest()[:32]
