"""Start-up hook of processes run under ``python -m tl_aot capture`` or ``run --serve`` (see sitecustomize.py)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["install", "environment"]


def install() -> None:
    """Install what the environment asks for: capture (``TL_AOT_CAPTURE``) and/or serving (``TL_AOT_SERVE``)."""
    if os.environ.get("TL_AOT_CAPTURE"):
        from ...capture.recorder import install_from_env

        install_from_env()
    if os.environ.get("TL_AOT_SERVE"):
        from ..server import install_from_env as serve_from_env

        serve_from_env()


def environment(extra: dict) -> dict:
    """The current environment with the start-up hook first on ``PYTHONPATH`` and ``extra`` set."""
    env = dict(os.environ, **extra)
    here = str(Path(__file__).parent)
    tl_aot_root = str(Path(__file__).parents[3])
    parts = [here, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p], tl_aot_root]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    return env
