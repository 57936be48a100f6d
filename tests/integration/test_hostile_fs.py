"""Real builds under file-system faults, and real libraries damaged after the build.

A fault is one line naming the path and the problem (exit status 1, no traceback); the library and
header that were there stay byte-identical and no ``.part`` file is left. The smallest kernel is
built once per module; each case copies that output folder and relinks in the copy.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.helpers import ADD_KERNEL as KERNEL
from support.helpers import child_env, tl_aot_cli

pytest.importorskip("tilelang")


def _cli(root: Path, *args, cache: Path) -> subprocess.CompletedProcess:
    return tl_aot_cli("build", "k.py:add", "--arch", "90a", "--cache-dir", cache, "-j", "2", *args, cwd=root, env=child_env(), timeout=300)


@pytest.fixture(scope="module")
def built(tmp_path_factory, cache_dir) -> Path:
    """A project folder with ``out/libadd.so`` and ``out/add.h`` built."""
    root = tmp_path_factory.mktemp("hostile_fs")
    (root / "k.py").write_text(KERNEL)
    proc = _cli(root, "-o", "out", cache=cache_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root


@pytest.fixture
def project(built):
    """The built project with its stamp removed, so the library must be relinked (put back after the test).

    Each fault leaves the library and header as they were, so the next test finds them unchanged.
    """
    stamp = built / "out" / ".tl_aot" / "add" / "stamp.json"
    kept = stamp.read_bytes()
    header = (built / "out" / "add.h").read_bytes()
    stamp.unlink()
    yield built
    if (built / "out" / "add.h").is_dir():
        (built / "out" / "add.h").rmdir()
    (built / "out" / "add.h").write_bytes(header)
    stamp.write_bytes(kept)


def _snapshot(out: Path) -> dict:
    return {p.name: p.read_bytes() for p in (out / "libadd.so", out / "add.h") if p.is_file()}


def _no_parts(*folders: Path) -> list:
    return [str(p) for f in folders for p in f.rglob("*") if p.name.endswith((".part", ".old"))]


@contextlib.contextmanager
def read_only(path: Path):
    """``path`` and everything under it read-only, also for root (the immutable attribute)."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "-R", "+i", str(path)], capture_output=True).returncode:
            pytest.skip("running as root without chattr +i: cannot make a folder read-only")
        undo = ["chattr", "-R", "-i", str(path)]
    else:
        subprocess.run(["chmod", "-R", "a-w", str(path)], check=True)
        undo = ["chmod", "-R", "u+w", str(path)]
    try:
        yield
    finally:
        subprocess.run(undo, check=True)


def _one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("tl_aot: error:"))
    for f in fragments:
        assert f in line, proc.stderr
    return line


def test_a_read_only_output_folder_still_reports_an_up_to_date_library(built, cache_dir, tmp_path):
    root = tmp_path / "ro"
    shutil.copytree(built, root, symlinks=True)
    with read_only(root / "out"):
        proc = _cli(root, "-o", "out", cache=cache_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "is up to date" in proc.stdout


def test_a_read_only_output_folder_that_needs_a_build_is_one_line_and_keeps_the_library(project, cache_dir):
    before = _snapshot(project / "out")
    with read_only(project / "out"):
        proc = _cli(project, "-o", "out", cache=cache_dir)
    _one_line_error(proc, str(project / "out"))
    assert _snapshot(project / "out") == before
    assert not _no_parts(project / "out")


def test_no_space_at_the_final_copy_keeps_library_and_header(project, cache_dir, monkeypatch):
    from tl_aot.common.errors import FilesystemError
    from tl_aot.pipeline.library import build_library
    from tl_aot.spec import KernelSpec, LibrarySpec

    out = project / "out"
    before = _snapshot(out)
    (out / "add.h").write_text("// a header the build must replace\n")  # so the header is staged too
    before["add.h"] = (out / "add.h").read_bytes()

    def full_disk(src, dst):  # the copy fills the disk half way
        Path(dst).write_bytes(Path(src).read_bytes()[:4096])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))

    monkeypatch.setattr("tl_aot.common.destinations.shutil.copyfile", full_disk)
    # The library is moved in from the work folder, and only when its bytes changed; it is copied from another
    # file system: that case here, the relinked library taken as changed.
    monkeypatch.setattr("tl_aot.common.destinations._renamed", lambda source, part: False)
    monkeypatch.setattr("tl_aot.common.destinations._holds_file", lambda path, source: False)
    spec = KernelSpec.create(name="add", source=project / "k.py", function="add", archs=["90a"])
    with pytest.raises(FilesystemError) as info:
        build_library(LibrarySpec("add", (spec,)), out_dir=out, cache_dir=cache_dir, jobs=2, log=None)
    assert "no space left on the device" in str(info.value) and "libadd.so" in str(info.value)
    assert _snapshot(out) == before
    assert not _no_parts(out)


def test_a_header_path_that_is_a_folder_keeps_the_library(project, cache_dir):
    out = project / "out"
    before = (out / "libadd.so").read_bytes()
    (out / "add.h").unlink()
    (out / "add.h").mkdir()
    _one_line_error(_cli(project, "-o", "out", cache=cache_dir), "add.h is a folder")
    assert (out / "libadd.so").read_bytes() == before
    assert not _no_parts(out)


def test_output_naming_an_existing_file_is_refused(project, cache_dir):
    (project / "afile").write_text("mine\n")
    _one_line_error(_cli(project, "-o", "afile", cache=cache_dir), "afile is a file, not a folder")
    assert (project / "afile").read_text() == "mine\n"


def test_a_read_only_cache_on_a_miss_is_one_line(project, tmp_path):
    cache = tmp_path / "ro-cache"
    cache.mkdir()
    before = _snapshot(project / "out")
    with read_only(cache):
        proc = _cli(project, "-o", "out", "--arg", "N=512", cache=cache)
    _one_line_error(proc, "cache folder", str(cache))
    assert _snapshot(project / "out") == before


def test_a_read_only_cache_still_reports_an_up_to_date_library(built, tmp_path):
    root = tmp_path / "ro"
    shutil.copytree(built, root, symlinks=True)
    cache = tmp_path / "ro-cache"  # empty: every variant a miss, none to make
    cache.mkdir()
    with read_only(cache):
        proc = _cli(root, "-o", "out", cache=cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "is up to date" in proc.stdout


def test_an_up_to_date_build_notices_a_truncated_header(built, cache_dir):
    root = built
    header = root / "out" / "add.h"
    good = header.read_bytes()
    header.write_bytes(good[: len(good) // 2])
    proc = _cli(root, "-o", "out", cache=cache_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "is up to date" not in proc.stdout
    assert header.read_bytes() == good


def _damaged(built: Path, tmp_path: Path, case: str) -> Path:
    data = (built / "out" / "libadd.so").read_bytes()
    at = data.find(b'{"abi_version":')  # the manifest's index: what load reads (the manifest spells '": ' with a space)
    assert at > 0
    if case == "truncated":
        data = data[: len(data) * 2 // 3]
    elif case == "dtype_altered":
        data = data.replace(b'"dtype": "float32"', b'"dtype": "float16"')
    elif case == "shape_altered":
        data = data.replace(b'"shape": [256]', b'"shape": [512]')
    elif case == "manifest_not_json":
        data = data[: at + 1] + b"X" + data[at + 2 :]
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "libadd.so"
    path.write_bytes(data)
    return path


DAMAGE = {
    "truncated": "not a complete shared library",
    "dtype_altered": "its manifest was altered",
    "shape_altered": "its manifest was altered",
    "manifest_not_json": "its manifest was altered",
}

PROBE = """import json, sys, io, contextlib
import tl_aot
from tl_aot.frontends import cli
out = {}
for path in sys.argv[1:]:
    try:
        lib = tl_aot.load(path)
        for e in lib.index.entries:  # each entry's record is checked when first used
            lib.signature(e.name)
        loaded = "loaded"
    except tl_aot.common.errors.LibraryError as e:
        loaded = "refused: " + str(e)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(["inspect", path])
    out[path] = [loaded, code, err.getvalue()]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def damaged(built, tmp_path_factory) -> dict:
    """case -> (what load said, inspect's exit status, its stderr), from one child process (a crash would show)."""
    folder = tmp_path_factory.mktemp("damaged")
    paths = {case: _damaged(built, folder / case, case) for case in DAMAGE}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *map(str, paths.values())], capture_output=True, text=True, check=False, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    import json

    seen = json.loads(proc.stdout.splitlines()[-1])
    return {case: seen[str(p)] for case, p in paths.items()}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_library_is_refused_by_load_or_its_first_use_and_by_inspect(damaged, case):
    loaded, code, err = damaged[case]
    assert loaded.startswith("refused:") and DAMAGE[case] in loaded
    assert code == 1 and "Traceback" not in err and DAMAGE[case] in err


def test_the_undamaged_library_loads(built):
    import tl_aot

    lib = tl_aot.load(built / "out" / "libadd.so")
    assert lib.signature("add").params[0].dtype == "float32"
