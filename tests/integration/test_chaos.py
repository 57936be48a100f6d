"""Builds killed at seeded random instants, and builds racing, through the CLI, setuptools, CMake and ``link``.

A small seeded sample of ``bench/chaos_kills.py`` (the sweep; the harness is ``tests/support/chaos.py``):
each kill SIGKILLs the build's whole process group at an instant drawn on its CPU-time clock; then
every output is absent or whole, every cache entry verifies, no compiler outlives the build, and
the next build is byte-identical to an undisturbed one. The races: eight builds of one library into
one folder with one cache across the three front ends, and two "machines" sharing one
``--cache-url``. (The cluster driver's kill is in ``test_cluster_cpu.py``, beside its cluster.)

Cheap by construction: one one-entry library for one arch, the launcher runtime object copied in
from the session cache, one undisturbed build measured for all front ends (they make the same bytes).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

pytest.importorskip("tilelang")

from support import chaos

#: The sample's seed: the same kills on every run (change it to draw others).
SEED = 42


@pytest.fixture(scope="module")
def objects(session_runtime) -> Path:
    """The session's launcher runtime object folder, as a cache's ``.objects`` (a trial's cache starts with it)."""
    return session_runtime.parents[1]


@pytest.fixture(scope="module")
def reference_build(tmp_path_factory, objects) -> tuple[chaos.Reference, Path]:
    """An undisturbed CLI build and the snapshot of its cache (what warm trials start from)."""
    import dataclasses

    ws = tmp_path_factory.mktemp("reference")
    build = dataclasses.replace(chaos.front_end("cli", ws), objects=objects)
    ref = chaos.undisturbed(build)
    return ref, chaos.take_snapshot(build, ws / "snapshot")


@pytest.fixture(scope="module")
def reference(reference_build) -> chaos.Reference:
    """The library and header of an undisturbed CLI build, and its CPU time (CLI, setuptools and CMake make these bytes)."""
    return reference_build[0]


def _kills(front_end: str, n: int) -> list[float]:
    """``n`` instants (fractions of the build's CPU time) for ``front_end``, the same on every run.

    Drawn within the first 80 % of the build, so that it is still running when the kill comes (the
    sweep draws over all of it).
    """
    rng = random.Random(f"{SEED}:{front_end}")
    return [0.8 * rng.random() for _ in range(n)]


@pytest.mark.parametrize("front_end", ["cli", "setuptools", "cmake"])
def test_a_build_killed_at_random_instants_leaves_nothing_damaged(front_end, reference, objects, tmp_path):
    import dataclasses

    build = dataclasses.replace(chaos.front_end(front_end, tmp_path / front_end), objects=objects)
    for i, at in enumerate(_kills(front_end, 1)):
        trial = chaos.kill_trial(build, reference, at=at, seed=i, log_dir=tmp_path / "logs")
        assert trial.killed and trial.ok, trial
    assert (build.outputs[0]).read_bytes() == reference.outputs[build.outputs[0].name]


def test_a_warm_build_killed_at_a_random_instant_leaves_nothing_damaged(reference_build, objects, tmp_path):
    """The sweep's cheap trial: the variant cached, the build forked from a Python with TileLang imported.

    The fork builds the undisturbed bytes (the sweep relies on it), and a kill at a seeded instant of
    its launcher compile, link or publish leaves nothing damaged.
    """
    import dataclasses

    from support import chaos_warm

    ref, snapshot = reference_build
    build = dataclasses.replace(chaos.front_end("cli", tmp_path / "cli"), objects=objects)
    warm = chaos_warm.WarmPython(chaos.child_env())
    try:
        again = chaos.undisturbed(build, warmth="variant", snapshot=snapshot, warm=warm)
        assert again.outputs == ref.outputs
        [at] = _kills("cli-variant", 1)
        trial = chaos.kill_trial(
            build, ref, at=at, seed=0, log_dir=tmp_path / "logs", warmth="variant", snapshot=snapshot, warm=warm, cpu_s=again.cpu_s
        )
    finally:
        warm.close()
    assert trial.killed and trial.ok, trial


def test_link_killed_at_random_instants_leaves_nothing_damaged(tmp_path, objects):
    import dataclasses

    ws = tmp_path / "link"
    build = dataclasses.replace(chaos.front_end("link", ws, parts=chaos.shard_parts(ws)), objects=objects)
    ref = chaos.undisturbed(build)
    for i, at in enumerate(_kills("link", 1)):
        trial = chaos.kill_trial(build, ref, at=at, seed=i, log_dir=tmp_path / "logs")
        assert trial.killed and trial.ok, trial


def test_eight_builds_through_three_front_ends_race_into_one_folder_and_one_cache(reference, tmp_path):
    """3 CLI + 3 setuptools + 2 CMake builds of one library at once: all succeed, one library, the cache verifies."""
    results, cli = chaos.race(tmp_path)
    assert len(results) == 8
    for r in results:
        assert r.returncode == 0, f"{' '.join(r.args)}\n{r.stdout}\n{r.stderr}"
        assert "Traceback" not in r.stderr
    out = cli.outputs[0].parent
    assert sorted(p.name for p in out.glob("libadd_one*")) == ["libadd_one.so"]  # (CMake also puts libtvm_ffi.so there)
    assert (out / "libadd_one.so").read_bytes() == reference.outputs["libadd_one.so"]
    assert (out / "add_one.h").read_bytes() == reference.outputs["add_one.h"]
    assert not [p.name for p in out.iterdir() if p.name.startswith(".") and p.name != ".tl_aot"], "a staged file was left"
    assert chaos.cache_damage(cli.cache) == []
    assert len([d for d in cli.cache.iterdir() if not d.name.startswith(".")]) == 1  # one variant entry


def test_two_machines_share_one_cache_url(reference, tmp_path, session_runtime):
    """Two builds with their own caches and one file:// --cache-url, at once: both succeed with the same library."""
    results, builds = chaos.two_machines(tmp_path, session_runtime)
    for r in results:
        assert r.returncode == 0, r.stderr
    for b in builds:
        assert b.outputs[0].read_bytes() == reference.outputs["libadd_one.so"]
        assert chaos.cache_damage(b.cache, b.shared) == []
    assert len(list(builds[0].shared.glob("*.tlv"))) == 1
    assert not list(builds[0].shared.glob(".*.tmp")), "a temporary object was left in the shared cache"
