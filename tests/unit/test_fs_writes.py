"""Every file tl_aot writes goes through ``tl_aot.common.fileutil``, whose errors name the file.

A full disk often refuses a small file only when it is closed, with an :class:`OSError` that
names no file; a front end then cannot say which path to free and used to print a traceback
(``cuda/host_objects.py`` writing the launcher source into the object cache, at 16 KiB free).
The helpers in ``fileutil`` attach the path; this test keeps every other module from writing a
file any other way, and the fault matrix (``tests/integration/test_fault_matrix.py``) fails those
writes and closes as a full disk does.
"""

from __future__ import annotations

import ast
import errno
from pathlib import Path

import pytest
from support.tree import files, read

import tl_aot
from tl_aot.common import fileutil

PACKAGE = Path(tl_aot.__file__).parent

#: The one module allowed to open files for writing.
WRITER = PACKAGE / "common" / "fileutil.py"


def _mode_of(call: ast.Call) -> str:
    """The mode literal of an ``open(...)`` call ("r" when absent or not a literal string).

    ``open(path, mode)`` and ``io.open(path, mode)`` take it second, ``path.open(mode)`` first.
    """
    fn = call.func
    method = isinstance(fn, ast.Attribute) and not (isinstance(fn.value, ast.Name) and fn.value.id in ("io", "builtins"))
    at = 0 if method else 1
    mode = call.args[at] if len(call.args) > at else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return mode.value if isinstance(mode, ast.Constant) and isinstance(mode.value, str) else "r"


def raw_writes(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """``file:line: call`` for each write in ``path`` that does not go through ``fileutil``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
        owner = fn.value.id if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name) else ""
        writing = any(c in _mode_of(node) for c in "wax+")
        if (
            name in ("write_text", "write_bytes")
            or (owner == "os" and name in ("write", "fdopen"))
            or (name == "open" and owner != "os" and writing)
        ):
            found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node.func)}(...)")
    return found


def test_no_module_writes_a_file_but_through_fileutil():
    modules = files(PACKAGE, "*.py", recursive=True, at_least=100)
    offenders = [w for p in modules if p != WRITER for w in raw_writes(p)]
    assert not offenders, (
        f"{read(modules, 'modules')}; write these through tl_aot.common.fileutil (write_file, atomic_write, write_if_different):\n"
        + "\n".join(offenders)
    )


def test_the_scan_sees_each_way_of_writing(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('p.write_text("x")\nopen(p, "wb")\nos.write(fd, b"")\nq.open("a")\nopen(p)\nos.open(p, 0)\nq.open()\n')
    assert [w.split(": ", 1)[1] for w in raw_writes(sample, tmp_path)] == ["p.write_text(...)", "open(...)", "os.write(...)", "q.open(...)"]


@pytest.mark.parametrize("helper", [fileutil.write_file, fileutil.atomic_write])
def test_a_write_refused_at_close_names_the_file(helper, tmp_path):
    """A full disk refuses the file at its close, with an OSError naming no file (as faultfs fails it); the helper names it."""
    from support.faultfs import FaultFS

    target = tmp_path / "out.txt"
    with FaultFS(tmp_path) as traced:
        helper(target, "text")
    close = next(op for op in traced.trace if op[0] == "close")
    with FaultFS(tmp_path, target=close, fault=errno.ENOSPC) as fs, pytest.raises(OSError) as info:
        helper(target, "more text")
    assert fs.fired is not None and info.value.errno == errno.ENOSPC
    assert Path(info.value.filename) == target
