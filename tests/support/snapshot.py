"""Put a folder back as a snapshot of it holds it, rewriting only what differs.

``restore(snapshot, dest)`` leaves ``dest`` as ``shutil.rmtree(dest); shutil.copytree(snapshot, dest)``
would (the same paths, kinds, bytes, modes and times; every file its own inode), but a file that
is already the snapshot's stays where it is. Tests that restore a build folder before each of
hundreds of runs (:mod:`test_fault_matrix`) spent half their time deleting and re-creating
unchanged files: on a disk mounted with ``discard`` (this machine's ext4), every unlink waits on
the device. Measured on the fault matrix's folder (48 paths): ~23 ms a delete and copy on an idle
machine (2.5 ms on tmpfs), ~4 ms a restore of what one build changed; more apart under load.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

__all__ = ["restore"]


def restore(snapshot: Path, dest: Path) -> None:
    """Make ``dest`` the copy of ``snapshot`` that ``copytree`` would make, touching only what differs.

    Where something cannot be compared or rewritten (a folder left unreadable), it falls back to
    exactly that delete and copy, and fails where they would.
    """
    try:
        if dest.is_symlink() or not dest.is_dir():
            _remove(dest)
            shutil.copytree(snapshot, dest)
            return
        _sync(snapshot, dest)
    except OSError:
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(snapshot, dest)


def _sync(src: Path, dest: Path) -> None:
    """``dest`` (a real folder) made ``src``'s copy: extra entries removed, differing files copied, then ``src``'s mode and times."""
    wanted = {e.name: e for e in os.scandir(src)}
    for e in os.scandir(dest):
        theirs = wanted.get(e.name)
        if theirs is None or _kind(e) != _kind(theirs):
            _remove(Path(e.path))
    for name, e in wanted.items():
        target = dest / name
        if e.is_dir():
            if target.is_dir() and not target.is_symlink():
                _sync(Path(e.path), target)
            else:
                _remove(target)
                shutil.copytree(e.path, target)
        elif not _same_file(Path(e.path), target):
            _remove(target)
            shutil.copy2(e.path, target)
    shutil.copystat(src, dest)  # as copytree leaves a folder: the snapshot's mode and times


def _kind(entry: os.DirEntry) -> str:
    """``dir`` or ``file`` as ``copytree`` (following links in the snapshot) would make it; ``link`` for a link in ``dest``."""
    if entry.is_symlink():
        return "link"
    return "dir" if entry.is_dir() else "file"


def _same_file(src: Path, dest: Path) -> bool:
    """Whether ``dest`` is a lone regular file with ``src``'s bytes, mode and modification time."""
    try:
        a, b = src.stat(), dest.lstat()
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(b.st_mode) or b.st_nlink != 1:  # a hard link copytree would not make
        return False
    if (a.st_size, a.st_mtime_ns, stat.S_IMODE(a.st_mode)) != (b.st_size, b.st_mtime_ns, stat.S_IMODE(b.st_mode)):
        return False
    return src.read_bytes() == dest.read_bytes()


def _remove(path: Path) -> None:
    """Remove a file, link or folder (nothing there is fine)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
