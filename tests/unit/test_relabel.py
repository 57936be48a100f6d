"""Cached variants of kernel files labelled by another tl_aot walk: walked again, kept when they reach the same request."""

from __future__ import annotations

import dataclasses

import pytest
from support.records import lowered_variant

from tl_aot.config.kernel_spec import KernelSpec, LibrarySpec
from tl_aot.config.user_code import snapshot_sources
from tl_aot.jit.walk_digest import walk_digest
from tl_aot.lower import lower
from tl_aot.pipeline.plan import Plan, Task
from tl_aot.pipeline.relabel import relabelled, stale_walks


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
    assert stale_walks(plan) == [] and relabelled(plan, _Cache(), native_log="off", log=None) is plan


def test_a_stale_hit_reaching_the_same_request_keeps_its_image_with_the_new_label_and_another_is_lowered_again(tmp_path, monkeypatch):
    """A walk that reaches the same request key is the same kernel; one that reaches another (or fails) is a miss."""
    reached = {"same": "rk-same", "moved": "rk-another", "fails": None}

    def walk_again(spec, arch, *, native_log):
        if reached[spec.name] is None:
            raise RuntimeError("the user's factory raised")
        return lower.Walked(f"new label of {spec.name}", reached[spec.name], walk_digest())

    monkeypatch.setattr(lower, "walk_variant", walk_again)
    plan = _plan(tmp_path, {"same": "an older walk", "moved": "", "fails": "an older walk", "current": walk_digest()})
    lines, cache = [], _Cache()
    got = relabelled(plan, cache, native_log="off", log=lines.append)
    assert sorted(t.spec.name for t in got.todo) == ["fails", "moved"]
    assert got.hits["key-same"] == (
        dataclasses.replace(plan.hits["key-same"][0], resolved="new label of same", walk=walk_digest()),
        b"image",
    )
    assert got.hits["key-current"] == plan.hits["key-current"]  # labelled by this walk: untouched
    assert cache.stored == [("key-same", "new label of same", walk_digest(), b"image", True)]  # current next time
    assert lines == [
        "tl_aot's factory walk changed: 1 cached variant(s) walked again and kept; 2 reached another kernel and are lowered again"
    ]


def test_the_walk_digest_is_the_walks_own_bytes():
    import hashlib
    from pathlib import Path

    import tl_aot.jit.factory_walk as walk

    assert walk_digest() == hashlib.sha256(Path(walk.__file__).read_bytes()).hexdigest()[:16]
