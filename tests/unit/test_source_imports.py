"""A build imports the user's kernel files from their text: bytecode a same-second edit of the same length left stale is
never read (CPython checks a ``.pyc`` by the source's mtime in whole seconds and its size)."""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import py_compile
import sys
from pathlib import Path

import pytest

from tl_aot.common.errors import LoweringError
from tl_aot.config.source_imports import FromSource
from tl_aot.config.user_code import import_kernel_file


def stale_edit(path: Path, old: str, new: str) -> None:
    """Write ``old``, byte-compile it, then write ``new`` (same length) with ``old``'s mtime: its bytecode now lies."""
    assert len(old) == len(new)
    path.write_text(old)
    # as an earlier import leaves it (a test run, the JIT): checked by mtime and size, whatever SOURCE_DATE_EPOCH says
    py_compile.compile(str(path), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    stat = path.stat()
    path.write_text(new)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the same second: an editor's save, a script's rewrite


@pytest.fixture
def clean_modules():
    """Modules the test imports by plain names are dropped after it (another test may write the same names)."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        sys.modules.pop(name, None)


def test_python_itself_imports_the_stale_bytecode(tmp_path, monkeypatch, clean_modules):
    """The hazard is real: a plain import of the edited file runs the old code."""
    stale_edit(tmp_path / "plainmod.py", "BLOCK_M = 64\n", "BLOCK_M = 32\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert importlib.import_module("plainmod").BLOCK_M == 64


def test_a_kernel_file_is_imported_from_its_text(tmp_path):
    kernel = tmp_path / "gemm_kernel.py"
    stale_edit(kernel, "def f():\n    return 64\n", "def f():\n    return 32\n")
    module = import_kernel_file(kernel)
    assert module.f() == 32
    assert isinstance(module.__loader__, FromSource)


def test_local_modules_of_a_package_are_imported_from_their_text(tmp_path, clean_modules):
    """``from .tiles import BLOCK`` at the top and in a factory's body (run after the import) both read the new text."""
    pkg = tmp_path / "stalepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    stale_edit(pkg / "tiles.py", "BLOCK = 64\n", "BLOCK = 32\n")
    stale_edit(pkg / "inner.py", "WARPS = 4\n", "WARPS = 8\n")
    (pkg / "kern.py").write_text(
        "from .tiles import BLOCK\n\ndef f():\n    from .inner import WARPS\n\n    return BLOCK, WARPS\n\n"
        "def other():\n    import importlib\n\n    return importlib.import_module('stalepkg.unlisted')\n"
    )
    (pkg / "unlisted.py").write_text("X = 1\n")
    module = import_kernel_file(pkg / "kern.py")
    assert module.f() == (32, 8)  # inner.py is first imported here, when the factory runs
    # a module no import statement names (not one of the build's files) is imported as Python imports it
    assert type(module.other().__loader__) is importlib.machinery.SourceFileLoader


def test_no_bytecode_is_written_for_kernel_files(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    kernel = tmp_path / "written_kernel.py"
    kernel.write_text("def f():\n    return 1\n")
    assert import_kernel_file(kernel).f() == 1
    assert not list(tmp_path.glob("__pycache__/written_kernel.*.pyc"))


def test_an_edit_between_two_imports_in_one_process_is_seen_even_with_stale_bytecode(tmp_path):
    """A long-lived process (setup.py building twice, a notebook) re-imports an edited file: the new text, not the .pyc."""
    kernel = tmp_path / "twice_kernel.py"
    kernel.write_text("def f():\n    return 64\n")
    assert import_kernel_file(kernel).f() == 64
    stale_edit(kernel, "def f():\n    return 64\n", "def f():\n    return 16\n")
    assert import_kernel_file(kernel).f() == 16


def test_a_file_python_would_not_import_is_still_refused(tmp_path):
    """Only Python's own source loader is replaced: a kernel "file" Python has no loader for is refused as before."""
    (tmp_path / "kernels.txt").write_text("def f():\n    return 1\n")
    with pytest.raises(LoweringError, match="Python has no loader for kernels.txt"):
        import_kernel_file(tmp_path / "kernels.txt")
