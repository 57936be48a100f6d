"""Cached variants of kernel files labelled by another tl_aot walk: walked again, kept when they reach the same request."""

from __future__ import annotations

import dataclasses
import types

import pytest
from support.records import lowered_variant

from tl_aot.config.kernel_spec import KernelSpec, LibrarySpec
from tl_aot.config.user_code import snapshot_sources
from tl_aot.jit.walk_digest import walk_digest
from tl_aot.lower import lower
from tl_aot.pipeline.plan import Plan, Task
from tl_aot.pipeline.relabel import walk_again, walked_again
from tl_aot.pipeline.stages import Stages


class _Cache:
    def __init__(self):
        self.stored = []

    def store(self, key, variant, image, project=None, *, replace=False):
        self.stored.append((key, variant.resolved, variant.walk, image, replace))


def _plan(tmp_path, walks: dict[str, str]) -> Plan:
    """One kernel-file entry per name, each a cache hit whose variant the walk ``walks[name]`` labelled."""
    (tmp_path / "k.py").write_text("def f():\n    return 1\n")
    specs = [KernelSpec.create(name=n, source=tmp_path / "k.py", function="f", archs=["90a"]) for n in walks]
    tasks = tuple(Task(s, s.archs[0], f"key-{s.name}", snapshot_sources(s.source, s.imports)) for s in specs)
    hits = {
        t.key: (
            lowered_variant(
                t.spec.name, "sm_90a", resolved=f"old label of {t.spec.name}", walk=walks[t.spec.name], request_key=f"rk-{t.spec.name}"
            ),
            b"image",
        )
        for t in tasks
    }
    return Plan(LibrarySpec("lib", entries=tuple(specs)), tasks, "libkey", "13.0", "0.1", hits, ())


def test_hits_of_this_walk_are_not_walked_again(tmp_path, monkeypatch):
    monkeypatch.setattr(lower, "walk_variant", lambda *a, **k: pytest.fail("walked"))
    plan = _plan(tmp_path, {"a": walk_digest(), "b": walk_digest()})
    assert walk_again(plan) == (plan, {})


def test_a_stale_hit_is_lowerings_to_walk_first_kept_with_its_image_when_it_reaches_the_same_request(tmp_path, monkeypatch):
    """A walk that reaches the same request key is the same kernel; one that reaches another (or fails) is lowered."""
    reached = {"same": "rk-same", "moved": "rk-another", "fails": None}

    def walk_again_(spec, arch, *, native_log):
        if reached[spec.name] is None:
            raise RuntimeError("the user's factory raised")
        return lower.Walked(f"new label of {spec.name}", reached[spec.name], walk_digest())

    monkeypatch.setattr(lower, "walk_variant", walk_again_)
    monkeypatch.setattr(lower, "lower_variant", lambda spec, arch, **_: lowered_variant(spec.name, "sm_90a", resolved="lowered"))
    plan = _plan(tmp_path, {"same": "an older walk", "moved": "", "fails": "an older walk", "current": walk_digest()})
    got, stale = walk_again(plan)
    assert sorted(t.spec.name for t in got.todo) == ["fails", "moved", "same"] and set(stale) == {"key-fails", "key-moved", "key-same"}
    assert got.hits == {"key-current": plan.hits["key-current"]}  # labelled by this walk: untouched, not lowered
    cache, steps = _Cache(), []
    stages = Stages(tmp_path, cache, "13.0", "0.1", types.SimpleNamespace(step=steps.append), native_log="off", walk_again=stale)
    lowered = {t.spec.name: (t, stages.lower(t)) for t in got.todo}
    assert {n: v.resolved for n, (_, v) in lowered.items()} == {"same": "new label of same", "moved": "lowered", "fails": "lowered"}
    task, same = lowered["same"]
    assert same == dataclasses.replace(plan.hits["key-same"][0], resolved="new label of same", walk=walk_digest())
    assert [stages.kept(t, v) for t, v in lowered.values()] == [b"image", None, None]  # only the kept one skips nvcc
    assert cache.stored == [("key-same", "new label of same", walk_digest(), b"image", True)]  # current next time
    assert steps == ["kept same sm_90a (walked again: the same kernel)"]


def test_a_stale_hit_whose_file_changed_while_it_was_walked_is_lowered(tmp_path, monkeypatch):
    plan = _plan(tmp_path, {"a": "an older walk"})
    _, stale = walk_again(plan)
    [task] = plan.tasks
    monkeypatch.setattr(lower, "walk_variant", lambda *a, **k: (tmp_path / "k.py").write_text("x = 2\n") and lower.Walked("l", "rk-a", "w"))
    assert walked_again(task, stale[task.key], native_log="off") is None


def test_the_walk_digest_is_the_walks_own_bytes():
    import hashlib
    from pathlib import Path

    import tl_aot.jit.factory_walk as walk

    assert walk_digest() == hashlib.sha256(Path(walk.__file__).read_bytes()).hexdigest()[:16]
