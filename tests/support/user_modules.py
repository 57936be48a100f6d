"""A user's kernel module written to a file and imported from it, for tests of what a call key reads of a user's code."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["load_user_module"]


def load_user_module(folder: Path, monkeypatch, name: str, text: str) -> ModuleType:
    """Module ``name`` holding ``text``, written in ``folder`` and imported afresh (its source is what a call key digests)."""
    (folder / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop(name, None)
    return importlib.import_module(name)
