"""Run a user's kernel code without letting it end the build: exits and argv parsing are errors.

While the file is imported, ``sys.argv`` is ``[<kernel file>]`` (tl_aot's own command line is not
the kernel's to parse) and ``os._exit`` raises instead of ending the process; a ``sys.exit``,
``os._exit`` or an argparse error at import becomes a :class:`~tl_aot.common.errors.LoweringError` naming
the file and line, and the build stops with a non-zero exit code. :func:`guarded_call` does the
same while a factory runs. A ``KeyboardInterrupt`` the user's code raises itself (not a Ctrl-C)
is reported as that code's error, at its file:line, not as an interrupted build.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import sys
import threading
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import NoReturn, Union

from ..common.errors import LoweringError
from ..common.user_frames import format_user_error, user_frame, user_location

__all__ = ["guarded_import", "guarded_call"]

#: The user's local files (resolved paths as text): what decides that a frame is the user's.
UserFiles = Collection[str]


class _HardExit(BaseException):
    """``os._exit(code)`` called while a kernel file was imported."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


#: What the user's code may end a build with: an exit, or a KeyboardInterrupt it raised itself.
_Stop = Union[SystemExit, _HardExit, KeyboardInterrupt]


def _hard_exit(status: int = 0) -> NoReturn:
    raise _HardExit(status)


@contextlib.contextmanager
def guarded_import(path: Path, files: UserFiles, *, entry: str = "", arch: str = "") -> Iterator[None]:
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
    except KeyboardInterrupt as e:
        if not raised_by_code(e, files):
            raise
        raise LoweringError(
            _message(e, path, files, entry, arch), entry=entry or None, arch=arch or None, location=_where(e, files)
        ) from None
    finally:
        sys.argv = saved_argv
        os._exit = saved_exit


@contextlib.contextmanager
def guarded_call(what: str, files: UserFiles, *, entry: str = "", arch: str = "") -> Iterator[None]:
    """Run the user's ``what`` (``k.py:matmul``, a factory) with exits refused.

    A ``sys.exit``, ``os._exit`` or a ``KeyboardInterrupt`` the code raises becomes a
    :class:`LoweringError` naming the user's file:line.
    """
    saved_exit = os._exit
    os._exit = _hard_exit
    try:
        yield
    except (SystemExit, _HardExit, KeyboardInterrupt) as e:
        if isinstance(e, KeyboardInterrupt) and not raised_by_code(e, files):
            raise
        head = f"entry {entry!r} ({arch}): " if entry else ""
        where = format_user_error(e, set(files))
        msg = f"{head}{what} {_did(e)} while tl_aot built it" + (f"\n  at {where}" if where else "")
        if not isinstance(e, KeyboardInterrupt):
            msg += "\n  a kernel's factory runs inside the build: raise an exception instead of exiting"
        raise LoweringError(msg, entry=entry or None, arch=arch or None, location=_where(e, files)) from None
    finally:
        os._exit = saved_exit


def raised_by_code(e: KeyboardInterrupt, files: UserFiles) -> bool:
    """Whether the user's code raised ``e`` itself (``raise KeyboardInterrupt``) rather than a Ctrl-C delivering it.

    Python delivers a Ctrl-C in the main thread only, so in any other thread it was raised by code;
    in the main thread, when the innermost frame in the user's files is a ``raise`` statement.
    """
    if threading.current_thread() is not threading.main_thread():
        return True
    fs = user_frame(e.__traceback__, set(files))
    tb = e.__traceback__
    if fs is None or tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    innermost = tb.tb_frame.f_code.co_filename
    line = (fs.line or linecache.getline(fs.filename, fs.lineno or 0)).strip()
    return innermost == fs.filename and line.startswith("raise")


def _did(e: _Stop) -> str:
    if isinstance(e, KeyboardInterrupt):
        return "raised KeyboardInterrupt"
    return f"called {'os._exit' if isinstance(e, _HardExit) else 'sys.exit'}({e.code!r})"


def _where(e: _Stop, files: UserFiles) -> str | None:
    return user_location(e, set(files)) or None


def _message(e: _Stop, path: Path, files: UserFiles, entry: str, arch: str) -> str:
    """``entry 'add' (sm_90a): k.py called sys.exit(3) while it was imported, at k.py:2: sys.exit(3)`` and the fix."""
    what = f"{_did(e)} while tl_aot imported it"
    if _through_argparse(e):
        what = "parsed the command line (argparse) while tl_aot imported it, and the arguments it wants are not there"
    where = format_user_error(e, set(files)) or str(path)
    head = f"entry {entry!r} ({arch}): " if entry else ""
    if isinstance(e, KeyboardInterrupt):
        return f"{head}{path.name} {what}\n  at {where}"
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
