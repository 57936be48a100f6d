"""Import the user's kernel files from their source text, never from cached bytecode an edit may have left stale.

CPython trusts a ``__pycache__`` file when its recorded source mtime (whole seconds) and size
match the source's. An edit of the same length within the same second as the import that wrote
the bytecode (``block_M = 64`` to ``32`` by a script that writes a kernel and builds it, an editor
saving just before a rebuild) is then imported as the old code: a build would lower the old kernel
under the new file's snapshot, with no error. A build reads only a handful of kernel files and
their local modules, so compiling them from source costs milliseconds beside lowering; every other
module (TileLang, torch, the user's installed packages) imports as usual.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
import threading
from collections.abc import Iterable, Sequence
from types import CodeType, ModuleType

__all__ = ["FromSource", "from_source", "import_from_source"]


class FromSource(importlib.machinery.SourceFileLoader):
    """A source file's loader that compiles the file's current text: no bytecode read, none written."""

    def get_code(self, fullname: str) -> CodeType:
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


class _Finder:
    """Finds a module whose file is one of :data:`_files` as the path finder does, with :class:`FromSource` as its loader.

    Any other module is left to the finders after it (None): TileLang's, an editable install's and
    tl_aot's own import hooks see every import they would have seen.
    """

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name.rpartition(".")[2] not in _names:
            return None  # no kernel file is imported by that name: not looked up twice
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.origin is None or type(spec.loader) is not importlib.machinery.SourceFileLoader:
            return None
        if os.path.realpath(spec.origin) not in _files:
            return None
        from_source(spec)
        return spec


def from_source(spec: importlib.machinery.ModuleSpec) -> None:
    """Give ``spec`` :class:`FromSource` in place of Python's source loader; any other loader is kept."""
    if type(spec.loader) is importlib.machinery.SourceFileLoader and spec.origin is not None:
        spec.loader = FromSource(spec.name, spec.origin)


#: The kernel files (resolved paths) and local modules imported from their source in this process, and the last part of
#: the module name each is imported as. Kept for the process: a factory's body may import a local module when it runs.
_files: set[str] = set()
_names: set[str] = set()
_finder = _Finder()
_lock = threading.Lock()


def _module_part(file: str) -> str:
    """The last part of the module name ``file`` is imported as (a package's ``__init__.py``: its folder's name)."""
    head, base = os.path.split(file)
    return os.path.basename(head) if base == "__init__.py" else base.rpartition(".")[0]


def import_from_source(files: Iterable[str]) -> None:
    """From now on in this process, modules imported from ``files`` are compiled from their source text."""
    with _lock:
        for f in map(os.path.realpath, files):
            _files.add(f)
            _names.add(_module_part(f))
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
