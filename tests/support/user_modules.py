"""A user's kernel module written to a file and imported from it, for tests of what a call key reads of a user's code."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["keys_in_two_processes", "load_user_module"]


def load_user_module(folder: Path, monkeypatch, name: str, text: str) -> ModuleType:
    """Module ``name`` holding ``text``, written in ``folder`` and imported afresh (its source is what a call key digests)."""
    (folder / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop(name, None)
    return importlib.import_module(name)


def keys_in_two_processes(folder: Path, probe: str) -> set[str]:
    """What ``probe`` (Python code printing call keys; ``folder`` is its ``sys.argv[1]``) prints in two fresh processes of
    two hash seeds, as a capture and a served run are: one line when the keys depend on nothing of the process."""
    return {
        subprocess.run(
            [sys.executable, "-c", probe, str(folder)],
            capture_output=True, text=True, timeout=120, check=True, env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }  # fmt: skip
