"""Run code when a module is imported: how capture and serving patch TileLang in a program they did not write."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading

__all__ = ["on_import"]

_waiting: dict[str, list] = {}
_lock = threading.Lock()


def on_import(name: str, callback) -> None:
    """Call ``callback(module)`` once ``name`` is imported (now, if it already is)."""
    module = sys.modules.get(name)
    if module is not None and getattr(module, "__spec__", None) is not None and not _initialising(module):
        callback(module)
        return
    with _lock:
        _waiting.setdefault(name, []).append(callback)
        if not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, _Finder())


def _initialising(module) -> bool:
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the loader of a watched module so its callbacks run right after it executes."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _waiting:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, fullname)
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, name: str) -> None:
        self.inner, self.name = inner, name

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module) -> None:
        self.inner.exec_module(module)
        with _lock:
            callbacks = _waiting.pop(self.name, [])
        for cb in callbacks:
            cb(module)
