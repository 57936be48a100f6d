"""Fresh virtual environments for the runtime tests: a wheel installed where only its own dependencies are.

``python -m venv`` spends 3-5 s (on 2 cores) installing pip into each venv (ensurepip), which a
runtime venv needs only to be installed into. :func:`fresh_venv` makes one without pip and
:func:`pip_into` installs into it with this interpreter's pip (``pip --python``): the same pip a
venv of this Python would bundle, installing the same packages into the venv's own site-packages.
Tests of what another Python's own pip makes of a wheel (``test_setuptools.RUNTIMES``) keep
``python -m venv`` and that pip.
"""

from __future__ import annotations

import sys
from pathlib import Path

from support.helpers import run_ok

__all__ = ["fresh_venv", "pip_into"]


def fresh_venv(path: Path, env: dict) -> Path:
    """A venv of this Python at ``path``, holding nothing (not even pip); returns its ``python``."""
    run_ok([sys.executable, "-m", "venv", "--without-pip", path], path.parent, env)
    return path / "bin" / "python"


def pip_into(python: Path, *args) -> list:
    """``pip ARGS`` acting on the venv of ``python`` (``install``, ``list``), as an argument list to run."""
    return [sys.executable, "-m", "pip", "--python", python, *args]
