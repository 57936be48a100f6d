"""Where the user's code is in a traceback: the innermost frame in the user's files, as ``file:line``.

Errors name the kernel file's line that raised (an error's ``location`` field, a message's
``at file:line: source``), never tl_aot's or TileLang's frames; importing the kernel file, guarding
it against exits and lowering it all ask here.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from types import TracebackType

__all__ = ["user_frame", "format_user_error", "user_location"]


def user_frame(tb: TracebackType | None, files: set[str]) -> traceback.FrameSummary | None:
    """The innermost traceback frame that lies in one of the user's files."""
    found = None
    for fs in traceback.extract_tb(tb):
        try:
            if str(Path(fs.filename).resolve()) in files:
                found = fs
        except OSError:
            continue
    return found


def format_user_error(exc: BaseException, files: set[str]) -> str:
    """``file:line: <source line>`` of the innermost user frame of ``exc``, or ''."""
    where = _user_line(exc, files)
    return f"{where[0]}:{where[1]}: {where[2]}" if where else ""


def user_location(exc: BaseException, files: set[str]) -> str:
    """``file:line`` of the innermost user frame of ``exc`` (an error's ``location`` field), or ''."""
    where = _user_line(exc, files)
    return f"{where[0]}:{where[1]}" if where else ""


def _user_line(exc: BaseException, files: set[str]) -> tuple[str, int | None, str] | None:
    """(file, line, its source) of the innermost frame of ``exc`` in ``files`` (a SyntaxError's own), or None."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return exc.filename, exc.lineno, (exc.text or "").strip()
    fs = user_frame(exc.__traceback__, files)
    return None if fs is None else (fs.filename, fs.lineno, (fs.line or "").strip())
