"""Faults a build must survive: every one ends in a library equal to a clean build of the same source,
or a clear error, never a wrong or stale library.

Edits while a build lowers or compiles, damaged cache and work files, relative cache folders, builds
killed at each stage, locks held by stopped or dead builds, and reloading a rebuilt library.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.helpers import ok, tl_aot_argv, tl_aot_cli

pytest.importorskip("tilelang")

KERNEL = """import tilelang.language as T
from sizes import BLOCK


def add(N=4096):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                Y[bx * BLOCK + i] = X[bx * BLOCK + i] + 1.0

    return main
"""

# Imported first while the entry is lowered: edits sizes.py once, as an editor saving mid-build would.
EDITOR = """import os
from pathlib import Path

here = Path(__file__).parent
if os.environ.get("EDIT_WHILE_LOWERING") and not (here / "edited").exists():
    (here / "edited").write_text("")
    (here / "sizes.py").write_text("BLOCK = 256\\n")
"""

SPEC = """[library]
name = "faults"
archs = ["90a"]

[[entry]]
name = "add"
source = "k.py"
function = "add"
imports = ["editor"]
compile_flags = ["-include", "h.h"]
"""


def _project(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "k.py").write_text(KERNEL)
    (root / "sizes.py").write_text("BLOCK = 128\n")
    (root / "editor.py").write_text(EDITOR)
    (root / "h.h").write_text("#define TL_AOT_FAULTS 1\n")
    (root / "kernels.toml").write_text(SPEC)
    return root


def _build(root: Path, cache, *extra, env=None, check=True) -> subprocess.CompletedProcess:
    args = ("build", "--spec", "kernels.toml", "-o", "out", "--cache-dir", cache, "-j", "2", *extra)
    proc = tl_aot_cli(*args, cwd=root, env={**os.environ, **(env or {})})
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _library(root: Path, out: str = "out", name: str = "faults") -> str:
    """What the library holds, as ``inspect --json`` shows it, with the project's folder spelled <root>."""
    text = ok(tl_aot_cli("inspect", "--json", root / out / f"lib{name}.so")).stdout
    return text.replace(str(root), "<root>")


def _outputs(root: Path) -> dict[str, bytes]:
    """The files a build leaves in ``out`` for its user (the library and its header), by name."""
    return {name: (root / "out" / name).read_bytes() for name in ("libfaults.so", "faults.h")}


@dataclass(frozen=True)
class Built:
    """The project built once from an empty cache: its folder, a copy of that folder as the build left it, its library."""

    root: Path
    snapshot: Path
    library: str


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    """One clean build of the project (its own empty cache, ``<root>/cache``), snapshotted for the cases that start from it."""
    base = tmp_path_factory.mktemp("clean")
    root = _project(base / "p")
    _build(root, root / "cache")
    shutil.copytree(root, base / "snapshot", symlinks=True)  # copy2: contents and times, so the stamp stays true
    return Built(root, base / "snapshot", _library(root))


@pytest.fixture(scope="module")
def clean(built) -> str:
    """The library a clean build of the project makes (its own empty cache)."""
    return built.library


@pytest.fixture
def as_built(built) -> Path:
    """The project of :func:`built`, put back exactly as its build left it, at the same path.

    The stamp names absolute paths and digests, and the cache the project's inputs: restored in
    place, a case starts where a fresh build would leave it, without paying for that build (~15 s).
    """
    shutil.rmtree(built.root)
    shutil.copytree(built.snapshot, built.root, symlinks=True)
    return built.root


def _launcher(root: Path, body: str) -> str:
    """A TL_AOT_COMPILER_LAUNCHER script: ``body`` runs first, then the compiler."""
    script = root / "launcher.sh"
    script.write_text(f'#!/bin/sh\n{body}\nexec "$@"\n')
    script.chmod(0o755)
    return str(script)


def test_a_module_edited_while_lowering_is_refused_and_never_cached(clean, tmp_path, fresh_cache):
    root = _project(tmp_path / "p")
    proc = _build(root, fresh_cache, env={"EDIT_WHILE_LOWERING": "1"}, check=False)
    assert proc.returncode == 1
    assert "entry 'add' (sm_90a): sizes.py changed while the build was lowering it; nothing was built from it" in proc.stderr
    (root / "sizes.py").write_text("BLOCK = 128\n")  # reverted
    assert "nvcc add sm_90a" in _build(root, fresh_cache).stdout
    assert _library(root) == clean
    other = _project(tmp_path / "other")  # another project sharing the cache gets the clean kernel too
    _build(other, fresh_cache)
    assert _library(other) == clean


def test_a_header_edited_while_nvcc_runs_is_refused_and_never_cached(clean, tmp_path, fresh_cache):
    root = _project(tmp_path / "a" / "p")
    edit = f'case "$*" in *nvcc*) [ -e {root}/mark ] || {{ touch {root}/mark; echo "// edited" >> {root}/h.h; }};; esac'
    env = {"TL_AOT_COMPILER_LAUNCHER": _launcher(root, edit)}
    proc = _build(root, fresh_cache, env=env, check=False)
    assert proc.returncode == 1
    assert f"entry 'add' (sm_90a): {root / 'h.h'} changed while nvcc compiled it; nothing was stored" in proc.stderr
    (root / "h.h").write_text("#define TL_AOT_FAULTS 1\n")  # reverted (the mark stays: no more edits)
    _build(root, fresh_cache, env=env)
    # the clean build's library: a compiler launcher leaves no trace in a library (inspect shows none), so a clean
    # build under a launcher that edits nothing is this same library, and would cost a build and an inspect more
    assert _library(root) == clean


def _entry_dir(cache: Path) -> Path:
    [entry] = [p for p in cache.iterdir() if not p.name.startswith(".")]
    return entry


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _change_a_digit(path: Path) -> None:
    text = path.read_text()
    m = re.search(r'"dynamic_smem": "(\d)', text) or re.search(r"\d", text)
    path.write_text(text[: m.end() - 1] + str((int(text[m.end() - 1]) + 1) % 10) + text[m.end() :])


def _one(cache: Path, pattern: str) -> Path:
    [path] = cache.glob(pattern)
    return path


# What each case damages: where the file is (in the cache or the work folder), and what is done to it.
DAMAGE = {
    "variant.json truncated": (lambda c, w: _entry_dir(c) / "variant.json", _truncate),
    "variant.json of another shape": (lambda c, w: _entry_dir(c) / "variant.json", lambda p: p.write_text("[]")),
    "one digit of variant.json changed": (lambda c, w: _entry_dir(c) / "variant.json", _change_a_digit),
    "image truncated": (lambda c, w: _entry_dir(c) / "image.bin", _truncate),
    "runtime object truncated": (lambda c, w: _one(c, ".objects/*/launcher_runtime.o"), _truncate),
    "launcher object truncated": (lambda c, w: _one(c, ".objects/*/faults.launcher.o"), _truncate),
    "manifest object truncated": (lambda c, w: _one(c, ".objects/*/faults.manifest.o"), _truncate),
    "stamp of another shape": (lambda c, w: w / "stamp.json", lambda p: p.write_text('{"key": 1, "inputs": {}}')),
    "stamp not JSON": (lambda c, w: w / "stamp.json", lambda p: p.write_text("{{{")),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_cache_and_work_files_are_rebuilt_never_used(damage, clean, built, as_built):
    root = as_built  # as a build from an empty cache left it, at the same path
    cache, work = root / "cache", root / "out" / ".tl_aot" / "faults"
    where, spoil = DAMAGE[damage]
    for force in ((), ("--force",)):
        damaged = where(cache, work)
        assert damaged.is_file(), damaged  # there before the build: the build meets the damage, not a gap
        spoil(damaged)
        if "stamp" not in damage:
            (work / "stamp.json").unlink(missing_ok=True)  # make the build run its stages
        _build(root, cache, *force)
        # Byte for byte the clean build's library and header (builds are reproducible, and the project sits where the
        # clean build had it): stronger than equal ``inspect --json``, without a ~1.5 s process to read it; the
        # message on a difference is that of ``inspect``.
        if _outputs(root) != _outputs(built.snapshot):
            assert _library(root) == clean, (damage, force)
            pytest.fail(f"{damage} {force}: the library differs from the clean build's, though inspect shows no difference")


def test_relative_cache_folders_work(clean, tmp_path, session_runtime):
    from tl_aot.cuda.host_objects import OBJECTS_FOLDER

    root = _project(tmp_path / "p")
    _build(root, "relcache")  # from nothing: every object compiled into the relative folder
    assert (_entry_dir(root / "relcache") / "variant.json").is_file() and _library(root) == clean
    first = _outputs(root)
    shutil.rmtree(root / "out")
    # the runtime object copied in (it depends on the toolchain alone): the variant and launcher still land here
    shutil.copytree(session_runtime.parent, root / "envcache" / OBJECTS_FOLDER / session_runtime.parent.name)
    proc = tl_aot_cli("build", "--spec", "kernels.toml", "-o", "out", "-q", cwd=root, env={**os.environ, "TL_AOT_CACHE_DIR": "envcache"})
    assert proc.returncode == 0, proc.stderr
    # the clean library again: byte for byte the first build's here (same project folder), which inspect found clean
    assert (_entry_dir(root / "envcache") / "variant.json").is_file() and _outputs(root) == first
    assert len(list((root / "envcache").glob(f"{OBJECTS_FOLDER}/*/faults.launcher.o"))) == 1


def _start(root: Path, cache: Path, env: dict) -> subprocess.Popen:
    cmd = tl_aot_argv("build", "--spec", "kernels.toml", "-o", "out", "--cache-dir", cache, "-j", "2")
    return subprocess.Popen(cmd, cwd=root, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(predicate, timeout=120.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.1)


def _running(marker: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False).stdout
    return [int(p) for p in out.split()]


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="needs pgrep")
@pytest.mark.parametrize("stage", ["lowering", "compiling"])
def test_a_killed_build_leaves_no_compiler_and_no_debris(stage, clean, tmp_path):
    root = _project(tmp_path / "p")
    marker = f"{61 + len(stage)}.{os.getpid()}"  # a sleep no other test runs
    env = {"TL_AOT_COMPILER_LAUNCHER": _launcher(root, f"touch {root}/started; sleep {marker}")} if stage == "compiling" else {}
    proc = _start(root, tmp_path / "cache", env)  # an empty cache: the first compile is the runtime's
    if stage == "compiling":
        _wait_for(lambda: (root / "started").exists() and _running(f"sleep {marker}"))
    else:
        time.sleep(1.5)  # importing TileLang and lowering: no tool runs yet
    proc.kill()
    proc.wait()
    time.sleep(0.5)
    _wait_for(lambda: not _running(f"sleep {marker}"), timeout=5)  # the compiler went with the build
    _build(root, tmp_path / "cache")
    assert _library(root) == clean
    work = root / "out" / ".tl_aot" / "faults"
    debris = [*work.glob(".lib*"), *(work / "kernels").glob(".*"), *(tmp_path / "cache").glob(".objects/*/.*")]
    debris += [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".") and p.name != ".objects"]
    assert not debris


def test_a_lock_says_who_holds_it_and_a_dead_holder_releases_it(clean, tmp_path, fresh_cache):
    root = _project(tmp_path / "p")
    marker = f"67.{os.getpid()}"
    holder = _start(root, fresh_cache, {"TL_AOT_COMPILER_LAUNCHER": _launcher(root, f"sleep {marker}")})
    try:
        _wait_for(lambda: _running(f"sleep {marker}"))
        os.kill(holder.pid, signal.SIGSTOP)
        waiter = _start(root, fresh_cache, {})
        lines = []
        _wait_for(lambda: lines.append(waiter.stdout.readline()) or "that process is stopped" in lines[-1], timeout=60)
        text = lines[-1]
        assert f"held by pid {holder.pid} (building {root / 'out' / 'libfaults.so'}" in text
        assert f"resume it (kill -CONT {holder.pid}) or end it (kill {holder.pid})" in text
    finally:
        holder.kill()
        holder.wait()
    out, err = waiter.communicate(timeout=300)
    assert waiter.returncode == 0, out + err
    assert _library(root) == clean


def test_load_after_a_rebuild_in_one_process_returns_the_new_library(tmp_path, fresh_cache):
    import tl_aot
    from tl_aot.pipeline.library import build_library
    from tl_aot.spec import KernelSpec, LibrarySpec

    root = _project(tmp_path / "p")

    def build(n: int):
        spec = KernelSpec.create(name="add", source=root / "k.py", function="add", args={"N": n}, archs=["90a"])
        return build_library(LibrarySpec("grow", (spec,)), out_dir=root / "lib", cache_dir=fresh_cache, log=None).library

    first = tl_aot.load(build(1024))
    assert first.signature("add").params[0].shape == (1024,)
    second = tl_aot.load(build(2048))
    assert second.signature("add").params[0].shape == (2048,)
    assert first.signature("add").params[0].shape == (1024,)  # the old object keeps its library
    assert tl_aot.load(root / "lib" / "libgrow.so").signature("add").params[0].shape == (2048,)
