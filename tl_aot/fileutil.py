"""Atomic file writes: a reader (or a build killed half way) never sees a partial file."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write", "write_if_different", "atomic_replace", "file_digest"]


def atomic_replace(tmp: str | os.PathLike, dest: str | os.PathLike) -> None:
    """Move a finished temporary file onto ``dest`` in one step (same filesystem)."""
    os.replace(tmp, dest)


def atomic_write(path: str | os.PathLike, data: bytes | str, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename (``mode``: its permissions)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_if_different(path: str | os.PathLike, text: str) -> bool:
    """Write ``text`` unless the file already holds it (keeps timestamps for make/ninja); True if written."""
    path = Path(path)
    try:
        if path.read_text() == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    atomic_write(path, text)
    return True


def file_digest(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes (hex): what caches and stamps compare."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike):
    """Hold an exclusive advisory lock on ``path`` (two builds of one library, or two capturing processes, take turns).

    (tvm_ffi.utils.FileLock does the same, but importing tvm_ffi imports torch: 1.3 s a no-op build
    cannot afford.)
    """
    import fcntl

    with open(path, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
