"""``support.snapshot.restore``: a folder put back exactly as a fresh copy of its snapshot, rewriting only what differs.

The fault matrix restores its build folder before every run with it: a restore that missed a
change would let one run's debris decide the next run's verdict.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from support.snapshot import restore


def _state(root: Path) -> dict:
    """Every path under ``root`` with what copytree keeps: kind, bytes, mode, modification time, and lone inode."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        kind = "link" if p.is_symlink() else "dir" if p.is_dir() else "file"
        data = p.read_bytes() if kind == "file" else None
        out[str(p.relative_to(root))] = (kind, data, st.st_mode, st.st_mtime_ns, st.st_nlink if kind == "file" else 1)
    out["."] = ("dir", None, root.stat().st_mode, root.stat().st_mtime_ns, 1)
    return out


def _snapshot(tmp_path: Path) -> Path:
    snap = tmp_path / "snap"
    (snap / "cache" / "entry").mkdir(parents=True)
    (snap / "out").mkdir()
    (snap / "k.py").write_text("N = 256\n")
    (snap / "cache" / "entry" / "image.bin").write_bytes(b"\x01" * 4096)
    (snap / "out" / "libadd.so").write_bytes(b"ELF-256")
    (snap / "out" / "add.h").write_text("// 256\n")
    os.utime(snap / "out" / "add.h", ns=(1_000_000_000, 1_000_000_000))
    return snap


def test_a_folder_a_run_changed_in_every_way_is_restored_as_a_fresh_copy(tmp_path):
    snap = _snapshot(tmp_path)
    work = tmp_path / "work"
    shutil.copytree(snap, work)

    lib = work / "out" / "libadd.so"
    before = lib.stat()
    lib.write_bytes(b"ELF-512")  # same size, new bytes, the old time put back: only the bytes tell
    os.utime(lib, ns=(before.st_atime_ns, before.st_mtime_ns))
    (work / "out" / "add.h").unlink()  # gone
    os.link(work / "k.py", work / "out" / "k-link.py")  # k.py now a hard link
    (work / "out" / ".libadd.so.123.part").write_bytes(b"debris")  # extra file
    (work / "tmp" / "deep").mkdir(parents=True)  # extra folders
    shutil.rmtree(work / "cache" / "entry")
    (work / "cache" / "entry").write_text("a file where a folder was")
    (work / "cache" / "entry2").mkdir()
    (work / "out" / "link").symlink_to(work / "k.py")
    os.chmod(work / "out", 0o755)
    os.chmod(work / "k.py", 0o600)

    restore(snap, work)
    fresh = tmp_path / "fresh"
    shutil.copytree(snap, fresh)
    assert _state(work) == _state(fresh)


def test_unchanged_files_are_left_in_place(tmp_path, monkeypatch):
    snap = _snapshot(tmp_path)
    work = tmp_path / "work"
    restore(snap, work)  # no folder yet: a plain copy
    (work / "out" / "libadd.so").write_bytes(b"ELF-512, longer")
    copied = []
    copy2 = shutil.copy2
    monkeypatch.setattr(shutil, "copy2", lambda src, dst, **kw: copied.append(Path(dst)) or copy2(src, dst, **kw))
    restore(snap, work)
    assert [str(p.relative_to(work)) for p in copied] == ["out/libadd.so"]
    fresh = tmp_path / "fresh"
    shutil.copytree(snap, fresh)
    assert _state(work) == _state(fresh)
