"""Where a compile request came from: the caller's frame, the ``@tilelang.jit`` function and its arguments, the device.

Stored with each captured request (its ``origins`` and ``devices``) and named by messages: a
build error, a served miss, ``inspect`` say which call of the user's program asked for a kernel.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from ..common.errors import SpecError
from ..common.json_types import JsonMapping, JsonObject
from ..config.values import spell

if TYPE_CHECKING:
    from .seam import JitCall

__all__ = ["caller_origin", "jit_name", "jit_origin", "jit_text", "origin_text", "request_device"]


def caller_origin() -> JsonObject:
    """Where the request came from: the innermost frame of the caller's code (not TileLang, not tl_aot)."""
    skip = ("/tilelang/", "/tvm/", "/tl_aot/", "/functools.py", "/contextlib.py")
    frames = traceback.extract_stack()[:-3]
    for fs in reversed(frames):
        if not any(s in fs.filename.replace(os.sep, "/") for s in skip):
            return {"file": fs.filename, "line": fs.lineno, "function": fs.name}
    return {}


def jit_origin(jit_call: JitCall | None) -> JsonObject:
    """The ``@tilelang.jit`` function compiled and its arguments (spelled), when the request came through one."""
    if jit_call is None:
        return {}
    jit, args, kwargs = jit_call
    out: JsonObject = {"jit": jit_name(jit)}
    spelled: dict[str, str] = {}
    for k, v in {**{str(i): a for i, a in enumerate(args)}, **kwargs}.items():
        try:
            spelled[k] = _tensor_text(v) or spell(v)
        except SpecError:
            spelled[k] = type(v).__name__
    out["args"] = spelled
    return out


def jit_name(jit: object) -> str:
    """A ``@tilelang.jit`` object's function as ``module.qualname``, e.g. ``tileops.kernels.gemm._gemm_main``."""
    fn = getattr(getattr(jit, "func", None), "orig_func", None)
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"


def _tensor_text(value: object) -> str:
    """A tensor argument (eager ``@tilelang.jit`` calls take them) as what the kernel depends on: ``torch.Tensor(bfloat16[4096, 8192])``.

    Its ``repr`` would be its values: kilobytes per origin in the record and in ``inspect``, and
    different for every call of one kernel. '' for anything that is not a torch tensor.
    """
    kind = type(value)
    if kind.__module__ != "torch" or not hasattr(value, "shape") or not hasattr(value, "dtype"):
        return ""
    dims = ", ".join(str(int(d)) for d in value.shape)
    return f"{kind.__module__}.{kind.__qualname__}({str(value.dtype).removeprefix('torch.')}[{dims}])"


def jit_text(origin: JsonMapping) -> str:
    """A :func:`jit_origin` spelled as the call: ``mod.gemm(M=1024, N=1024)``."""
    return f"{origin['jit']}({', '.join(f'{k}={v}' for k, v in origin.get('args', {}).items())})"


def origin_text(item: JsonMapping, *, caller: bool = True) -> str:
    """Where a recorded request came from: the jit function and its arguments, and the caller's file:line.

    The first origin made through a jit function is named, else the first origin. With
    ``caller=False`` only the first of the two that is known is named (``verify``'s short form).
    """
    o = next((o for o in item.get("origins", []) if o.get("jit")), (item.get("origins") or [{}])[0])
    parts = []
    if o.get("jit"):
        parts.append(jit_text(o))
    if o.get("file"):
        parts.append(f"{Path(o['file']).name}:{o.get('line', '?')} ({o.get('function', '?')})")
    return " at ".join(parts if caller else parts[:1]) or f"prim_func {item.get('name', 'main')!r}"


def request_device() -> JsonObject:
    """The device the request was made on (torch's current device, or the emulated profile)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            i = torch.cuda.current_device()
            major, minor = torch.cuda.get_device_capability(i)
            return {"name": torch.cuda.get_device_name(i), "arch": f"sm_{major}{minor}{'a' if major >= 9 else ''}"}
    except Exception:  # noqa: BLE001 (a capture never fails the workload)
        pass
    return {}
