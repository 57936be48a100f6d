"""Where a compile request came from: the caller's frame, the ``@tilelang.jit`` function and its arguments, the device.

Stored with each captured request (its ``origins`` and ``devices``) and named by messages: a
build error, a served miss, ``inspect`` say which call of the user's program asked for a kernel.
"""

from __future__ import annotations

import os
import sys
import traceback

from ..common.errors import SpecError
from ..config.values import spell

__all__ = ["caller_origin", "jit_origin", "request_device"]


def caller_origin() -> dict:
    """Where the request came from: the innermost frame of the caller's code (not TileLang, not tl_aot)."""
    skip = ("/tilelang/", "/tvm/", "/tl_aot/", "/functools.py", "/contextlib.py")
    frames = traceback.extract_stack()[:-3]
    for fs in reversed(frames):
        if not any(s in fs.filename.replace(os.sep, "/") for s in skip):
            return {"file": fs.filename, "line": fs.lineno, "function": fs.name}
    return {}


def jit_origin(jit_call) -> dict:
    """The ``@tilelang.jit`` function compiled and its arguments (spelled), when the request came through one."""
    if jit_call is None:
        return {}
    jit, args, kwargs = jit_call
    fn = getattr(getattr(jit, "func", None), "orig_func", None)
    out = {"jit": f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"}
    spelled = {}
    for k, v in {**{str(i): a for i, a in enumerate(args)}, **kwargs}.items():
        try:
            spelled[k] = spell(v)
        except SpecError:
            spelled[k] = type(v).__name__
    out["args"] = spelled
    return out


def request_device() -> dict:
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
