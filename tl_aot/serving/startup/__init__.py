"""Start-up hook of processes run under ``python -m tl_aot capture`` or ``run --serve`` (see sitecustomize.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["install", "environment"]


def install() -> None:
    """Install what the environment asks for: capture (``TL_AOT_CAPTURE``) and/or serving (``TL_AOT_SERVE``).

    Both (``capture --serve LIB``): serving is installed first, so the capture, installed after
    it, sees every request first: it records each one, then lets the libraries answer what they
    hold (TileLang compiles the rest), and takes the device code of a served kernel from its library.
    """
    capture = os.environ.get("TL_AOT_CAPTURE")
    if os.environ.get("TL_AOT_SERVE"):
        from ..active import install_from_env as serve_from_env

        serve_from_env()
    if capture:
        from ...capture.process_hooks import install_from_env

        cap = install_from_env()
        if cap is not None and os.environ.get("TL_AOT_SERVE"):
            from ..active import held_device_code

            cap.held = held_device_code


def environment(extra: Mapping[str, str]) -> dict[str, str]:
    """The current environment with the start-up hook first on ``PYTHONPATH`` and ``extra`` set."""
    env = dict(os.environ, **extra)
    here = str(Path(__file__).parent)
    tl_aot_root = str(Path(__file__).parents[3])
    parts = [here, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p], tl_aot_root]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    return env
