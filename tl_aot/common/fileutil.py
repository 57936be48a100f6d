"""Every file tl_aot writes is written here, each error naming the file; and locks that say who holds them.

Writes are atomic (a reader, or a build killed half way, never sees a partial file) or, for a
file in a private folder, plain.

Each helper names the file in the :class:`OSError` it raises. A full disk often refuses a small
file only when it is closed (the data sat in Python's buffer until then), and that error carries
no file name: without one, a front end cannot say which path and which folder to free, and shows
a traceback. ``tests/unit/test_fs_writes.py`` checks that no module of tl_aot writes a file any
other way; ``tests/faultfs.py`` fails these writes, and their close, as a full disk does.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Union

from .fs_errors import fs_error

#: A file-system path as callers hold it: text or a path object.
StrPath = Union[str, "os.PathLike[str]"]

__all__ = [
    "write_file",
    "atomic_write",
    "write_if_different",
    "atomic_replace",
    "file_digest",
    "exclusive_lock",
    "pid_alive",
    "process_state",
    "record_digest",
    "verified_file",
    "install_verified",
    "sweep_dead_temporaries",
]


def write_file(path: StrPath, data: bytes | str) -> None:
    """Write ``data`` to ``path`` in place (a file in a private temporary folder, renamed by its caller or never read by others).

    An :class:`OSError` names ``path``, even one raised when the file is closed (a full disk).
    """
    raw = data.encode() if isinstance(data, str) else data
    try:
        with open(path, "wb") as f:
            f.write(raw)
    except OSError as e:
        if not e.filename:
            e.filename = os.fspath(path)
        raise


def atomic_replace(tmp: StrPath, dest: StrPath) -> None:
    """Move a finished temporary file onto ``dest`` in one step (same filesystem)."""
    os.replace(tmp, dest)


def atomic_write(path: StrPath, data: bytes | str, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename (``mode``: its permissions).

    An :class:`OSError` raised here names ``path`` (its ``filename``), even one raised by a write
    to an open file, so the caller's message can say which file a full disk refused.
    """
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(e, OSError) and not e.filename:
            e.filename = str(path)
        raise


def write_if_different(path: StrPath, text: str | bytes) -> bool:
    """Write ``text`` unless the file already holds it (keeps timestamps for make/ninja); True if written."""
    path = Path(path)
    try:
        if (path.read_bytes() == text) if isinstance(text, bytes) else (path.read_text() == text):
            return False
    except (OSError, UnicodeDecodeError):
        pass
    atomic_write(path, text)
    return True


def file_digest(path: StrPath) -> str:
    """SHA-256 of a file's bytes (hex): what caches and stamps compare."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def record_digest(path: StrPath) -> None:
    """Store ``path``'s SHA-256 beside it (``<path>.sha256``), for :func:`verified_file`."""
    atomic_write(f"{path}.sha256", file_digest(path) + "\n")


def verified_file(path: StrPath) -> bool:
    """Whether ``path`` exists and still has the digest :func:`record_digest` stored (damaged or foreign: False)."""
    try:
        return Path(f"{path}.sha256").read_text().strip() == file_digest(path)
    except OSError:
        return False


def install_verified(made: StrPath, dest: StrPath) -> None:
    """Move ``made`` to ``dest`` with its digest stored beside it: what :func:`verified_file` accepts.

    The digest first, then the file: a process killed between the two leaves a digest with no
    file (a miss), never a file in place without its digest. The rename is atomic, so processes
    (or machines) sharing the folder that install one reproducible file at once agree.
    """
    atomic_write(f"{dest}.sha256", file_digest(made) + "\n")
    os.replace(made, dest)


def sweep_dead_temporaries(folder: Path, prefix: str) -> None:
    """Remove ``<prefix><pid>.*`` files and folders whose writer (process ``pid``) is gone: a killed build's debris."""
    with contextlib.suppress(OSError):
        for p in folder.iterdir():
            pid = p.name[len(prefix) :].split(".", 1)[0]
            if p.name.startswith(prefix) and pid.isdigit() and not pid_alive(int(pid)):
                with contextlib.suppress(OSError):
                    shutil.rmtree(p) if p.is_dir() else p.unlink()


@contextlib.contextmanager
def exclusive_lock(
    path: StrPath,
    *,
    holder: str = "",
    log: Callable[[str], object] | None = None,
    remind_s: float = 30.0,
    unsupported_ok: bool = False,
) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path`` (two builds of one library, or two capturing processes, take turns).

    The holder writes its pid and ``holder`` (what it is doing) into the file; a process that has
    to wait says who it waits for (``log``, default stderr), and again every ``remind_s`` seconds,
    naming a holder that is stopped. A holder that died released the lock with its last breath
    (``flock``), so the next one takes it at once. (tvm_ffi.utils.FileLock does the same, but
    importing tvm_ffi imports torch: 1.3 s a no-op build cannot afford.) ``unsupported_ok``: on a
    file system without ``flock`` (some network folders) go on unlocked, for a lock that only saves
    work, rather than fail.
    """
    import fcntl

    say: Callable[[str], object] = log or (lambda text: print(text, file=sys.stderr, flush=True))
    try:
        f = open(path, "a+")  # noqa: SIM115 (closed by the with below)
    except OSError as e:  # a full disk, a read-only or vanished folder: one line naming the lock file
        raise fs_error(e, "open the lock file", path, "a build takes this lock before it reads or writes anything") from None
    with contextlib.closing(_QuietClose(f)):
        waited_since = None
        first_try = time.monotonic()
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                now = time.monotonic()
                if waited_since is None or now - waited_since >= remind_s:
                    text = _waiting_for(path, f)
                    # the holder writes who it is just after taking the lock: a waiter that came in between reads
                    # nothing yet, so its first message waits a moment for the name rather than say "another process"
                    if waited_since is not None or _UNNAMED not in text or now - first_try >= _HOLDER_GRACE_S:
                        say(text)
                        waited_since = now
                time.sleep(0.2)
            except OSError as e:
                if not unsupported_ok or e.errno not in _NO_FLOCK:
                    raise
                yield  # no locks here: the caller's work is safe without one, only not shared
                return
        try:
            with contextlib.suppress(OSError):  # who holds it is for a waiting build's message; a full disk may refuse it
                f.seek(0)
                f.truncate()
                f.write(json.dumps({"pid": os.getpid(), "holder": holder, "since": time.time()}))
                f.flush()
            yield
        finally:
            with contextlib.suppress(OSError):
                f.truncate(0)
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


#: What ``flock`` says on a file system that has no such locks.
_NO_FLOCK = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})


class _QuietClose:
    """Closes a lock file ignoring a refused flush: its text (who holds it) is a courtesy a full disk may refuse at close too."""

    def __init__(self, f: IO[str]) -> None:
        self.f = f

    def close(self) -> None:
        try:
            self.f.close()
        except OSError:
            with contextlib.suppress(OSError):
                self.f.close()  # the buffer was dropped by the failed flush; this releases the descriptor


#: How long a waiter's first message waits for the holder to write who it is; what a holder that says nothing is called.
_HOLDER_GRACE_S = 1.0
_UNNAMED = "held by another process"


def _waiting_for(path: StrPath, f: IO[str]) -> str:
    """``waiting for <lock>, held by pid 123 (building libx.so, for 12 s)``, with a stopped holder named."""
    try:
        f.seek(0)
        info = json.loads(f.read() or "{}")
        pid = int(info["pid"])
    except (ValueError, KeyError, TypeError, OSError):
        return f"tl_aot: waiting for {path}, {_UNNAMED}"
    what = f"{info.get('holder') or 'a tl_aot process'}, for {time.time() - float(info.get('since', time.time())):.0f} s"
    text = f"tl_aot: waiting for {path}, held by pid {pid} ({what})"
    if process_state(pid) == "T":
        text += f"; that process is stopped: resume it (kill -CONT {pid}) or end it (kill {pid})"
    return text


def process_state(pid: int) -> str:
    """The one-letter state of process ``pid`` from /proc (``R``, ``S``, ``T`` stopped, ``Z``), "" if unknown or gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else ""


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return process_state(pid) != "Z"
