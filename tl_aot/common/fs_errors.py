"""File-system ``OSError`` s as one-line :class:`~tl_aot.common.errors.FilesystemError` s: what failed, where, why, the fix.

Every wing that touches files (outputs, caches, locks, records) reports a read-only, full or
missing place the same way; this module holds only the wording, so the lowest helpers can use it.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator

from .errors import FilesystemError

__all__ = ["fs_error", "filesystem_errors"]

_HINTS = {
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "not permitted (read-only or immutable)",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.ENOTDIR: "a file is where a folder is needed",
    errno.EISDIR: "a folder is where a file is needed",
    errno.EEXIST: "a file is where a folder is needed",
    errno.EIO: "an input/output error (a failing disk, or a network file system that went away)",
    errno.ENAMETOOLONG: "the path is longer than the OS allows (255 bytes a name, 4096 a path)",
    errno.ENOENT: "no such file or folder (removed while the build ran?)",
    errno.ELOOP: "too many levels of symbolic links",
}


def fs_error(e: OSError, what: str, path: str | os.PathLike[str] | None = None, hint: str = "") -> FilesystemError:
    """A one-line :class:`FilesystemError`: ``cannot <what> <path>: <problem>[; <hint>]``."""
    where = path if path is not None else (e.filename or "?")
    problem = (_HINTS.get(e.errno) if e.errno is not None else None) or e.strerror or str(e)
    return FilesystemError(f"cannot {what} {where}: {problem}" + (f"; {hint}" if hint else ""))


@contextlib.contextmanager
def filesystem_errors(what: str, path: str | os.PathLike[str] | None = None, hint: str = "") -> Iterator[None]:
    """Turn a file-system :class:`OSError` raised inside (read-only, full, wrong kind of path) into a :class:`FilesystemError`.

    Other OS errors (a tool that cannot start, a signal) pass through unchanged: they are not about a path.
    """
    try:
        yield
    except OSError as e:
        if e.errno not in _HINTS or (path is None and not e.filename):
            raise
        raise fs_error(e, what, path if path is not None else e.filename, hint) from None
