"""Builds sharing a cache compile each host object once: the others wait for it (a CMake project's libraries under ninja -j)."""

from __future__ import annotations

import errno
import json
import os
import threading
import time

import pytest

from tl_aot.common.fileutil import exclusive_lock
from tl_aot.cuda.host_objects import OBJECTS_FOLDER, generated_object

UNIT = {"probe.cc": "int tl_aot_lock_probe() { return 7; }\n"}


def _launcher(tmp_path, log, sleep=0):
    """A TL_AOT_COMPILER_LAUNCHER that notes each compile in ``log`` and holds it ``sleep`` seconds (for builds to overlap)."""
    script = tmp_path / "launcher.sh"
    script.write_text(f'#!/bin/sh\necho "$*" >> {log}\nsleep {sleep}\nexec "$@"\n')
    script.chmod(0o755)
    return str(script)


def test_three_builds_asking_for_one_object_at_once_compile_it_once(tmp_path, monkeypatch, capfd):
    log = tmp_path / "compiles"
    monkeypatch.setenv("TL_AOT_COMPILER_LAUNCHER", _launcher(tmp_path, log, sleep=1))
    cache = tmp_path / "cache"
    results: list = []

    def build():
        results.append(generated_object(cache, UNIT, "probe.cc", "probe.o", extra_key="", what="compiling the probe"))

    threads = [threading.Thread(target=build) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(log.read_text().splitlines()) == 1  # one compiler run, not three side by side
    assert sorted(made for _, made in results) == [False, False, True]  # the two that waited found it made
    [obj] = {path for path, _ in results}
    assert obj.is_file() and obj.parent.parent == cache / OBJECTS_FOLDER
    # a waiting build says whom it waits for, as a library's lock does
    err = capfd.readouterr().err
    assert "held by pid" in err and "(compiling the probe, for " in err
    # nothing but the key's folder and its lock beside it; no temporary left in the folder
    assert sorted(p.name for p in (cache / OBJECTS_FOLDER).iterdir()) == sorted([obj.parent.name, f"{obj.parent.name}.lock"])
    assert not [p for p in obj.parent.iterdir() if p.name.startswith(".")]


def test_a_forced_build_compiles_again_and_a_cached_one_does_not(tmp_path, monkeypatch):
    log = tmp_path / "compiles"
    monkeypatch.setenv("TL_AOT_COMPILER_LAUNCHER", _launcher(tmp_path, log))
    cache = tmp_path / "cache"
    first = generated_object(cache, UNIT, "probe.cc", "probe.o", extra_key="", what="compiling the probe")
    again = generated_object(cache, UNIT, "probe.cc", "probe.o", extra_key="", what="compiling the probe")
    forced = generated_object(cache, UNIT, "probe.cc", "probe.o", extra_key="", what="compiling the probe", force=True)
    assert (first[1], again[1], forced[1]) == (True, False, True)
    assert first[0] == again[0] == forced[0]
    assert len(log.read_text().splitlines()) == 2


def test_a_file_system_without_flock_builds_unlocked_only_where_the_lock_saves_work(tmp_path, monkeypatch):
    import fcntl

    def no_flock(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    ran = []
    with exclusive_lock(tmp_path / "k.lock", unsupported_ok=True):
        ran.append(1)
    assert ran == [1]
    with pytest.raises(OSError, match="No locks available"), exclusive_lock(tmp_path / "k.lock"):
        pass  # a lock that keeps builds apart (a library's folder) is never skipped
    obj, made = generated_object(tmp_path / "cache", UNIT, "probe.cc", "probe.o", extra_key="", what="compiling the probe")
    assert made and obj.is_file()


def _hold(lock, *, name_after: float | None, release_after: float) -> threading.Thread:
    """Hold ``lock`` as another build does (taken now), writing who holds it after ``name_after`` s (None: never)."""
    import fcntl

    f = open(lock, "a+")  # noqa: SIM115 (closed by the thread)
    fcntl.flock(f.fileno(), fcntl.LOCK_EX)

    def run():
        with f:
            if name_after is not None:
                time.sleep(name_after)
                f.write(json.dumps({"pid": os.getpid(), "holder": "building libx.so", "since": time.time()}))
                f.flush()
            time.sleep(release_after)
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_waiter_names_a_holder_that_writes_who_it_is_just_after_taking_the_lock(tmp_path):
    """A waiter that came between the holder's flock and its note reads nothing yet: it waits a moment for the name."""
    said: list[str] = []
    holder = _hold(tmp_path / "k.lock", name_after=0.3, release_after=0.6)
    with exclusive_lock(tmp_path / "k.lock", log=said.append):
        pass
    holder.join()
    assert len(said) == 1 and f"held by pid {os.getpid()} (building libx.so, for " in said[0], said


def test_a_holder_that_never_says_who_it_is_is_waited_for_by_name_of_its_lock(tmp_path):
    """A holder that writes nothing (a full disk refused it) is called another process, once the moment has passed."""
    said: list[str] = []
    holder = _hold(tmp_path / "k.lock", name_after=None, release_after=1.6)
    with exclusive_lock(tmp_path / "k.lock", log=said.append):
        pass
    holder.join()
    assert said == [f"tl_aot: waiting for {tmp_path / 'k.lock'}, held by another process"]
