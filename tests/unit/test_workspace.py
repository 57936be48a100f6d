"""A build's workspace checks every folder it writes before any work, and says why one cannot be written only when it must.

The cache is probed with the other folders when the workspace is made; a cache that cannot store
variants fails a build only when it has variants to make (before lowering starts), never a build
whose variants are all cached or whose library is up to date (``test_hostile_fs.py`` runs that
case as a real build against a read-only cache).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tl_aot.common.errors import FilesystemError
from tl_aot.config.kernel_spec import KernelSpec, LibrarySpec
from tl_aot.config.user_code import snapshot_files
from tl_aot.pipeline.options import BuildOptions
from tl_aot.pipeline.plan import Plan, Task
from tl_aot.pipeline.run import build_variants
from tl_aot.pipeline.workspace import workspace


def _options(cache: Path) -> BuildOptions:
    return BuildOptions.settled(cache_dir=cache, log=None)


def test_the_workspace_makes_its_cache_folder(tmp_path):
    cache = tmp_path / "fresh" / "cache"
    ws = workspace("add", tmp_path / "out", _options(cache))
    assert cache.is_dir()
    assert ws.unwritable is None and ws.cache_unwritable is None


def test_a_cache_that_cannot_be_made_is_held_for_later_not_raised(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    ws = workspace("add", tmp_path / "out", _options(blocker / "cache"))
    assert ws.unwritable is None  # the output folder is fine: only the cache is refused
    assert isinstance(ws.cache_unwritable, FilesystemError)
    assert str(blocker) in str(ws.cache_unwritable)


def test_a_build_with_a_variant_to_make_stops_at_the_cache_before_any_stage(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    ws = workspace("add", tmp_path / "out", _options(blocker / "cache"))
    spec = KernelSpec.create(name="add", source=tmp_path / "k.py", function="add", archs=["90a"])
    assert isinstance(spec, KernelSpec)
    task = Task(spec, spec.archs[0], "0" * 64, snapshot_files([]))
    plan = Plan(LibrarySpec("add", (spec,)), (task,), "1" * 64, "13.0.88", "0.1.0", {}, ())
    with pytest.raises(FilesystemError) as info:
        build_variants(plan, ws, _options(blocker / "cache"))
    assert info.value is ws.cache_unwritable
    assert [p.name for p in ws.work.iterdir()] == ["build.lock"]  # no stage ran: nothing lowered, nothing written
