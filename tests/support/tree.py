"""The files a structure test reads: never none, and counted in what the test says.

A structure test that globs a folder which has moved reads nothing and passes (two template
checks read ``tl_aot/templates/`` for months after the templates moved to ``codegen/templates/``).
:func:`files` fails the test instead, and :func:`read` names how many files were read so a
failure message says what was checked.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["PACKAGE", "READ", "ROOT", "TEMPLATES", "files", "read"]

ROOT = Path(__file__).resolve().parents[2]
#: The package's source (the checkout's, whatever tl_aot is installed).
PACKAGE = ROOT / "tl_aot"
#: The Jinja templates of the generated files.
TEMPLATES = PACKAGE / "codegen" / "templates"
#: ``"<folder>/<pattern>": count`` for each :func:`files` call of the running test (``conftest.py`` reports them).
READ: dict[str, int] = {}


def files(folder: Path, pattern: str, *, recursive: bool = False, at_least: int = 1) -> list[Path]:
    """The files under ``folder`` matching ``pattern``, sorted; the test fails when fewer than ``at_least`` match.

    ``recursive`` globs every sub-folder too (``rglob``).
    """
    found = sorted(p for p in (folder.rglob(pattern) if recursive else folder.glob(pattern)) if p.is_file())
    where = f"{_shown(folder)}/{'**/' if recursive else ''}{pattern}"
    READ[where] = len(found)
    if len(found) < at_least:
        msg = f"{where}: {len(found)} files, expected at least {at_least} (did the folder move?)"
        raise AssertionError(msg)
    return found


def _shown(folder: Path) -> str:
    return str(folder.relative_to(ROOT)) if folder.is_relative_to(ROOT) else str(folder)


def read(paths: list[Path], what: str = "files") -> str:
    """``"read N <what>"``, for a structure test's message: how much the check covered."""
    return f"read {len(paths)} {what}"
