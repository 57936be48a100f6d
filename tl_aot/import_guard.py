"""Import a user's kernel file without letting it end the build: exits and argv parsing at import are errors.

While the file is imported, ``sys.argv`` is ``[<kernel file>]`` (tl_aot's own command line is not
the kernel's to parse) and ``os._exit`` raises instead of ending the process; a ``sys.exit``,
``os._exit`` or an argparse error at import becomes a :class:`~tl_aot.errors.LoweringError` naming
the file and line, and the build stops with a non-zero exit code.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from .errors import LoweringError

__all__ = ["guarded_import"]


class _HardExit(BaseException):
    """``os._exit(code)`` called while a kernel file was imported."""

    def __init__(self, code) -> None:
        super().__init__(code)
        self.code = code


def _hard_exit(code=0) -> None:
    raise _HardExit(code)


@contextlib.contextmanager
def guarded_import(path: Path, files, *, entry: str = "", arch: str = ""):
    """Import ``path`` (its local modules are ``files``) with tl_aot's argv hidden and exits refused."""
    saved_argv, saved_exit = sys.argv, os._exit
    sys.argv = [str(path)]
    os._exit = _hard_exit
    try:
        yield
    except (SystemExit, _HardExit) as e:
        raise LoweringError(
            _message(e, path, files, entry, arch), entry=entry or None, arch=arch or None, location=_where(e, files)
        ) from None
    finally:
        sys.argv = saved_argv
        os._exit = saved_exit


def _where(e: BaseException, files) -> str | None:
    from .source import user_location

    return user_location(e, set(files)) or None


def _message(e: BaseException, path: Path, files, entry: str, arch: str) -> str:
    """``entry 'add' (sm_90a): k.py called sys.exit(3) while it was imported, at k.py:2: sys.exit(3)`` and the fix."""
    from .source import format_user_error

    call = "os._exit" if isinstance(e, _HardExit) else "sys.exit"
    what = f"called {call}({e.code!r}) while tl_aot imported it"
    if _through_argparse(e):
        what = "parsed the command line (argparse) while tl_aot imported it, and the arguments it wants are not there"
    where = format_user_error(e, set(files)) or str(path)
    head = f"entry {entry!r} ({arch}): " if entry else ""
    return (
        f"{head}{path.name} {what}\n  at {where}\n  a kernel file is imported by the build: move command-line "
        'parsing and exits under `if __name__ == "__main__":`'
    )


def _through_argparse(e: BaseException) -> bool:
    tb = e.__traceback__
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).name == "argparse.py":
            return True
        tb = tb.tb_next
    return False
