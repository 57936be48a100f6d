"""Where a build writes: folders checked before any work, and the library and header swapped in together.

A fault (read-only, full, a file where a folder goes, a folder where a file goes) is one
:class:`~tl_aot.common.errors.FilesystemError` naming the path and the problem; the library and header
that were there stay byte-identical and no ``.part`` file is left behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from pathlib import Path

from .errors import FilesystemError
from .fileutil import StrPath, write_file
from .fs_errors import filesystem_errors, fs_error

__all__ = ["ensure_folder", "check_file_destination", "StagedFiles", "disk_full_note", "LOW_SPACE_BYTES"]

#: Below this much free space a tool's crash or a cut-short output is put down to the disk: nvcc's
#: temporary files for one large kernel take tens of MiB, and cicc / ptxas crash when they cannot write them.
LOW_SPACE_BYTES = 256 * 2**20


def disk_full_note(*paths: StrPath) -> str:
    """``disk full at /mnt/out (84 KiB free)`` for the first of ``paths`` (their nearest existing folder) short of space, else "".

    Used when a tool crashed or wrote a short file: a full disk is then the likely cause, and it is
    said plainly rather than blaming the code being compiled.
    """
    for path in paths:
        folder = Path(path)
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        try:
            st = os.statvfs(folder)
        except OSError:
            continue
        free = st.f_bavail * st.f_frsize
        if free < LOW_SPACE_BYTES or (st.f_files > 0 and st.f_favail == 0):
            return f"disk full at {folder} ({free // 1024} KiB free)"
    return ""


def ensure_folder(path: Path, role: str) -> Path:
    """Create folder ``path`` (its ``role``: "output folder", "cache folder") or say why it cannot be one."""
    path = Path(path)
    with filesystem_errors(f"create the {role}", path):
        for p in (path, *path.parents):
            if p.exists() and not p.is_dir():
                msg = f"{role} {path}: {p} is a file, not a folder; remove it or choose another {role}"
                raise FilesystemError(msg)
            if p.exists():
                break
        path.mkdir(parents=True, exist_ok=True)
    return path


def check_file_destination(path: Path, role: str) -> None:
    """``path`` (the library, the header) can be replaced by a file: it is not a folder, and no file stands where its folder goes."""
    with filesystem_errors(f"write the {role}", path):
        _check_destination(path, role)


def _check_destination(path: Path, role: str) -> None:
    """:func:`check_file_destination`, an :class:`OSError` raised as it is (the caller words it)."""
    if path.is_dir():
        msg = f"{role} {path} is a folder; tl_aot writes a file there: remove or rename the folder"
        raise FilesystemError(msg)
    if path.parent.exists() and not path.parent.is_dir():
        msg = f"{role} {path}: {path.parent} is a file, not a folder"
        raise FilesystemError(msg)


class StagedFiles:
    """Files written beside their destinations as ``.<name>.<pid>.part``, then swapped in together.

    :meth:`stage` writes a part (a fault here removes every part, the destinations untouched) and
    :meth:`remove` marks a file to go; :meth:`publish` renames the parts over their destinations
    and removes what is to go, and puts the earlier files back if a later step fails, so a
    library, its header and its records change together or not at all. Every fault is one
    :class:`~tl_aot.common.errors.FilesystemError` naming the file and its role.
    """

    def __init__(self) -> None:
        self._parts: list[tuple[Path | None, Path]] = []  # (part, destination); no part: the destination goes

    def stage(
        self,
        dest: Path,
        *,
        data: bytes | None = None,
        source: Path | None = None,
        role: str = "file",
        mode: int | None = None,
        if_changed: bool = False,
        move: bool = False,
    ) -> bool:
        """Write ``data`` (or a copy of ``source``) to a part file beside ``dest`` (with permissions ``mode``, if given).

        A fault removes every part staged so far. The folder of ``dest`` is created if it is missing. With ``if_changed``, a ``dest`` that
        already holds ``data`` (or ``source``'s bytes) is left alone, its timestamp kept for make and ninja. With ``move``,
        ``source`` itself becomes the part (renamed, not copied: a whole library's tens of MB; copied
        where it lies on another file system). Returns whether a part was staged.
        """
        if if_changed and (_holds_file(dest, source) if source is not None else _holds(dest, data or b"")):
            return False
        part = dest.with_name(f".{dest.name}.{os.getpid()}.part")
        self._parts.append((part, dest))
        try:
            _check_destination(dest, role)
            dest.parent.mkdir(parents=True, exist_ok=True)
            if source is not None and move and _renamed(source, part):
                pass
            elif source is not None:
                shutil.copyfile(source, part)
                if part.stat().st_size != Path(source).stat().st_size:  # a copy cut short that did not say so
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(part))
            else:
                write_file(part, data or b"")
            if mode is not None:
                os.chmod(part, mode)
        except FilesystemError:
            self.discard()
            raise
        except OSError as e:
            self.discard()
            raise fs_error(e, f"write the {role}", dest) from None
        return True

    def remove(self, dest: Path) -> None:
        """Remove ``dest`` (if there is one) when the parts are published, or keep it if publishing fails."""
        self._parts.append((None, dest))

    def discard(self) -> None:
        """Remove every part written so far."""
        for part, _ in self._parts:
            if part is not None:
                with contextlib.suppress(OSError):
                    part.unlink()
        self._parts.clear()

    def publish(self) -> None:
        """Rename each part over its destination; on a fault, undo the renames already done and remove the parts."""
        done: list[tuple[Path, Path | None]] = []  # (destination, its earlier file kept aside), swapped in
        dest = None
        try:
            for part, dest in self._parts:
                kept = _keep_aside(dest)
                try:
                    if part is not None:
                        os.replace(part, dest)
                    elif kept is not None:
                        os.unlink(dest)
                except OSError:
                    _drop(kept)
                    raise
                done.append((dest, kept))
        except OSError as e:
            for d, kept in reversed(done):
                _restore(d, kept)
            self.discard()
            raise fs_error(e, "replace", dest) from None
        for _, kept in done:
            _drop(kept)
        self._parts.clear()


def _holds(path: Path, data: bytes) -> bool:
    """Whether the file ``path`` holds exactly ``data`` (sizes first: a pack of another size is not read; unreadable or missing: no)."""
    try:
        return path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


def _holds_file(path: Path, source: Path) -> bool:
    """Whether the file ``path`` holds exactly the bytes of file ``source`` (sizes first; unreadable or missing: no)."""
    try:
        if path.stat().st_size != Path(source).stat().st_size:
            return False
        with open(path, "rb") as a, open(source, "rb") as b:
            while True:
                x, y = a.read(1 << 20), b.read(1 << 20)
                if x != y:
                    return False
                if not x:
                    return True
    except OSError:
        return False


def _renamed(source: Path, part: Path) -> bool:
    """Rename ``source`` to ``part``; False where they lie on two file systems (then it is copied)."""
    try:
        os.replace(source, part)
    except OSError as e:
        if e.errno == errno.EXDEV:
            return False
        raise
    return True


def _keep_aside(dest: Path) -> Path | None:
    """A hard link to ``dest``'s current file (to put back if a later swap fails), or None if there is none."""
    if not dest.is_file():
        return None
    kept = dest.with_name(f".{dest.name}.{os.getpid()}.old")
    with contextlib.suppress(OSError):
        kept.unlink()
    try:
        os.link(dest, kept)
    except OSError:
        shutil.copy2(dest, kept)
    return kept


def _restore(dest: Path, kept: Path | None) -> None:
    """Put ``dest``'s earlier file back (or remove the new one if there was none)."""
    with contextlib.suppress(OSError):
        if kept is not None:
            os.replace(kept, dest)
        else:
            dest.unlink()


def _drop(kept: Path | None) -> None:
    if kept is not None:
        with contextlib.suppress(OSError):
            kept.unlink()
