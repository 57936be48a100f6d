"""A user's kernel module written to a file and imported from it, for tests of what a call key reads of a user's code."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["keys_in_two_processes", "load_user_module", "write_source"]


def write_source(path: Path, text: str) -> None:
    """Write a module's source at ``path``, its bytecode cached by an earlier import dropped: the next import reads ``text``.

    Python checks a ``.pyc`` by the source's mtime (whole seconds) and size, so an edit of the same
    length in the same second would import the old code where bytecode is written
    (``PYTHONDONTWRITEBYTECODE`` unset, as on most machines).
    """
    for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        cached.unlink()
    path.write_text(text)


def load_user_module(folder: Path, monkeypatch, name: str, text: str) -> ModuleType:
    """Module ``name`` holding ``text``, written in ``folder`` and imported afresh (its source is what a call key digests)."""
    write_source(folder / f"{name}.py", text)
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop(name, None)
    importlib.invalidate_caches()
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
