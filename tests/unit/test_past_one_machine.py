"""Builds past one machine, the parts that need no compiler: shards, part checks, the shared cache's format, toolsets."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from support.elf_images import cubin
from support.records import lowered_variant

from tl_aot.common.arch import parse_arch
from tl_aot.common.metadata import LoweredVariant
from tl_aot.common.metadata_json import to_json
from tl_aot.pipeline.cache import VariantCache
from tl_aot.pipeline.part import Part, PartTask
from tl_aot.pipeline.result_check import accept_result
from tl_aot.pipeline.shards import PartError, check_parts, parse_shard, shard_of
from tl_aot.pipeline.shared_cache import SharedCache, pack_entry, unpack_entry
from tl_aot.pipeline.toolset import TEST_VERSION_ENV, differences, local_toolset
from tl_aot.pipeline.variant_task import ShippedSources, VariantResult, VariantTask, build_variant_task


def test_shards_are_a_deterministic_partition():
    tasks = list(range(11))
    shares = [shard_of(tasks, k, 3) for k in (1, 2, 3)]
    assert sorted(sum(shares, [])) == tasks
    assert shares == [shard_of(tasks, k, 3) for k in (1, 2, 3)]
    assert [len(s) for s in shares] == [4, 4, 3]


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "a/b", "1/0"])
def test_a_bad_shard_is_refused(text):
    with pytest.raises(Exception, match="--shard"):
        parse_shard(text)


def _part(k, n, key="L1", tools=None, library="lib"):
    return Part(
        folder=Path(f"/parts/{library}-{k}-{key}"),
        library=library,
        shard=k,
        of=n,
        lib_key=key,
        toolset=tools or local_toolset(nvcc=False).as_dict(),
        tasks=(PartTask("e", "sm_80", "k1"),),
    )


def test_parts_of_one_library_pass():
    n, by_k = check_parts([_part(2, 2), _part(1, 2)])
    assert n == 2 and sorted(by_k) == [1, 2]


def test_link_names_a_missing_shard():
    with pytest.raises(PartError, match=r"shards 2/3, 3/3 missing"):
        check_parts([_part(1, 3)])


def test_link_names_a_duplicate_shard():
    with pytest.raises(PartError, match=r"shard 1/2 given twice"):
        check_parts([_part(1, 2), _part(1, 2)])


def test_link_refuses_parts_of_other_sources():
    with pytest.raises(PartError, match="different sources"):
        check_parts([_part(1, 2), _part(2, 2, key="L2")])


def test_link_refuses_parts_of_other_tools():
    other = dict(local_toolset(nvcc=False).as_dict(), tilelang="0.0.1")
    with pytest.raises(PartError, match=r"different tools: TileLang .* 0\.0\.1"):
        check_parts([_part(1, 2), _part(2, 2, tools=other)])


def test_toolset_differences_are_named(monkeypatch):
    here = local_toolset(nvcc=False)
    monkeypatch.setenv(TEST_VERSION_ENV, "9.9.9")
    there = local_toolset(nvcc=False)
    assert differences(here, there) == [f"tl_aot {here.tl_aot} here, 9.9.9 there"]


def _variant() -> LoweredVariant:
    return lowered_variant("e", "sm_80", cuda_source='extern "C" __global__ void k() {}')


def test_shared_cache_entries_are_verified():
    text, image = to_json(_variant()), b"\x7fELF" + b"x" * 100
    data = pack_entry("k1", text, image)
    assert unpack_entry(data, "k1") == (text, image)
    assert unpack_entry(data, "k2") is None  # another key's entry is never used
    assert unpack_entry(data[:-1], "k1") is None  # truncated
    flipped = bytearray(data)
    flipped[-5] ^= 1
    assert unpack_entry(bytes(flipped), "k1") is None  # damaged


def test_two_machines_share_variants_through_a_url(tmp_path):
    url = (tmp_path / "shared").as_uri()
    a = SharedCache(VariantCache(tmp_path / "a"), url)
    b = SharedCache(VariantCache(tmp_path / "b"), url)
    image = cubin("k")
    a.store("k1", _variant(), image)
    assert b.local.load("k1") is None
    got = b.load("k1")
    assert got is not None and got[1] == image and got[0].entry == "e"
    assert b.local.load("k1") is not None  # copied into b's own cache
    # a damaged shared entry is a miss, and the next store replaces it
    obj = tmp_path / "shared" / "k2.tlv"
    a.store("k2", _variant(), image)
    obj.write_bytes(obj.read_bytes()[:-3])
    c = SharedCache(VariantCache(tmp_path / "c"), url)
    assert c.load("k2") is None
    c.store("k2", _variant(), image)
    assert unpack_entry(obj.read_bytes(), "k2") is not None
    assert not list((tmp_path / "shared").glob(".*.tmp"))  # no temporary object left


def test_a_worker_with_other_tools_refuses_the_task(monkeypatch):
    from tl_aot.common.arch import parse_arch
    from tl_aot.spec import KernelSpec

    spec = KernelSpec.create(name="e", source=Path(__file__), function="f", archs=["80"])
    task = VariantTask(spec, parse_arch("80"), "k1", local_toolset(), ShippedSources("/", ()))
    monkeypatch.setenv(TEST_VERSION_ENV, "9.9.9")
    result = build_variant_task(task, worker="tcp://w")
    assert result.error_class == "ToolsetMismatch"
    assert "9.9.9" in result.error and "tcp://w" in result.error
    with pytest.raises(Exception, match="9.9.9"):
        accept_result(type("T", (), {"spec": spec, "arch": parse_arch("80")})(), result)


def test_cluster_tasks_batch_the_variants_of_one_arch_and_flags():
    """As many variants per task as keep every worker thread busy; one arch, flags and backend per task; none lost."""
    from types import SimpleNamespace

    from tl_aot.pipeline.cluster_batch import batches_of, label_of, tasks_for
    from tl_aot.pipeline.scheduler import MAX_BATCH

    def task(i, arch, flags=()):
        return SimpleNamespace(key=f"k{i}", arch=parse_arch(arch), spec=SimpleNamespace(name=f"e{i}", compile_flags=flags, backend=""))

    todo = [task(i, ("80", "86", "90a", "100a")[i % 4]) for i in range(104)]  # bench/scaling.toml's shape
    groups = batches_of(todo, 16)
    assert sorted(len(g) for g in groups) == [6] * 8 + [7] * 8  # one task per thread, 4 per arch
    assert all(len({str(t.arch) for t in g}) == 1 for g in groups)
    assert sorted(t.key for g in groups for t in g) == sorted(t.key for t in todo)
    assert [len(g) for g in batches_of(todo, 1)] == [13, 13] * 4  # capped at MAX_BATCH, cut evenly
    assert [t.key for t in batches_of(todo, 1)[0][:3]] == ["k0", "k8", "k16"]  # dealt out, not cut in runs
    assert max(len(g) for g in batches_of([task(i, "80") for i in range(1000)], 1)) <= MAX_BATCH
    assert tasks_for(3, 3, 1) == 1 and tasks_for(1, 2, 1) == 1 and tasks_for(2, 2, 8) == 2
    assert [len(g) for g in batches_of([task(0, "80"), task(1, "90a")], 2)] == [1, 1]
    mixed = batches_of([task(0, "80"), task(1, "80", ("-DX=1",)), task(2, "80")], 1)
    assert [[t.key for t in g] for g in mixed] == [["k0", "k2"], ["k1"]]
    assert label_of(todo[:20:4]) == "e0, e4, e8 +2 sm_80" and label_of(todo[:1]) == "e0 sm_80"


def test_a_batch_task_answers_for_each_variant_and_one_failure_loses_no_other(tmp_path, monkeypatch):
    """A variant that fails lowering is its own error; the others are compiled together and each sent back verified."""
    import tl_aot.pipeline.images as images
    from tl_aot.common.errors import LoweringError
    from tl_aot.pipeline.variant_task import build_variant_tasks
    from tl_aot.spec import KernelSpec

    monkeypatch.setenv("TL_AOT_WORKER_DIR", str(tmp_path))
    compiled = []

    def fake_images_of(variants, arch, work, on_done, *, path_map=(), on_batch=None):
        compiled.append([v.entry for v, _ in variants])
        for i, (v, _) in enumerate(variants):
            on_done(i, cubin(v.entry))
        on_batch(list(range(len(variants))))

    def lower(spec, arch):
        if spec.name == "bad":
            msg = "entry 'bad': no such kernel"
            raise LoweringError(msg, entry="bad", arch=arch.sm)
        return LoweredVariant(entry=spec.name, arch=arch, cuda_source='extern "C" __global__ void k() {}')

    monkeypatch.setattr(images, "images_of", fake_images_of)
    arch = parse_arch("80")
    tasks = [
        VariantTask(
            KernelSpec.create(name=n, source=Path(__file__), function="f", archs=["80"]),
            arch,
            f"k{n}",
            local_toolset(),
            ShippedSources("/", ()),
        )
        for n in ("a", "bad", "c")
    ]
    results = build_variant_tasks(tasks, worker="tcp://w", lower_fn=lower)
    assert [r.key for r in results] == ["ka", "kbad", "kc"] and compiled == [["a", "c"]]  # one compile for the two lowered
    assert results[1].error_class == "LoweringError" and "no such kernel" in results[1].error
    for t, r in zip((tasks[0], tasks[2]), (results[0], results[2])):
        assert r.ok and (r.batch, r.shared) == (3, 2)
        variant, image = accept_result(t, r)
        assert variant.entry == t.spec.name and image == cubin(t.spec.name)


def test_a_damaged_result_is_refused():
    from tl_aot.common.arch import parse_arch
    from tl_aot.common.errors import CompileError
    from tl_aot.spec import KernelSpec

    spec = KernelSpec.create(name="e", source=Path(__file__), function="f", archs=["80"])
    task = type("T", (), {"spec": spec, "arch": parse_arch("80")})()
    text, image = to_json(_variant()), cubin("k")
    good = VariantResult("k1", "w", text, hashlib.sha256(text.encode()).hexdigest(), image, hashlib.sha256(image).hexdigest())
    assert accept_result(task, good)[1] == image
    bad = VariantResult("k1", "w", text, good.variant_sha256, image + b"!", good.image_sha256)
    with pytest.raises(CompileError, match="damaged"):
        accept_result(task, bad)
    not_cubin = VariantResult("k1", "w", text, good.variant_sha256, b"PTX", hashlib.sha256(b"PTX").hexdigest())
    with pytest.raises(CompileError, match="not a cubin"):
        accept_result(task, not_cubin)
    truncated = image[:-8]
    cut = VariantResult("k1", "w", text, good.variant_sha256, truncated, hashlib.sha256(truncated).hexdigest())
    with pytest.raises(CompileError, match="damaged"):
        accept_result(task, cut)


class _Counting:
    """A filesystem that counts the calls made to it (each a round trip on an object store) and passes them on."""

    def __init__(self, fs) -> None:
        self._fs, self.calls = fs, []

    def __getattr__(self, name):
        attr = getattr(self._fs, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        def counted(*args, **kwargs):
            self.calls.append(name)
            return attr(*args, **kwargs)

        return counted


@pytest.mark.parametrize("n", [3, 24])
def test_a_plan_looks_up_the_shared_cache_in_one_batch(tmp_path, n):
    """A plan's keys cost one listing and one batched read, however many; entries are still verified."""
    url = (tmp_path / "shared").as_uri()
    writer = SharedCache(VariantCache(tmp_path / "w"), url)
    image = cubin("k")
    keys = [f"key{i:03d}" for i in range(n)]
    for key in keys[: n // 2]:
        writer.store(key, _variant(), image)
    damaged = tmp_path / "shared" / f"{keys[0]}.tlv"
    damaged.write_bytes(damaged.read_bytes()[:-2])
    reader = SharedCache(VariantCache(tmp_path / "r"), url)
    reader.fs = _Counting(reader.fs)
    hits = reader.load_many([(k, None) for k in keys])
    assert sorted(hits) == keys[1 : n // 2]  # the damaged entry and the absent ones are misses
    assert all(hits[k][1] == image for k in hits)
    assert sorted(reader.fs.calls) == ["cat", "ls"], reader.fs.calls  # not one call per key
    reader.fs.calls.clear()
    for key in keys:  # storing what was missing asks nothing per key: the listing said what is there
        reader.store(key, _variant(), image)
    assert "exists" not in reader.fs.calls and reader.fs.calls.count("makedirs") == 1, reader.fs.calls
    assert unpack_entry(damaged.read_bytes(), keys[0]) is not None  # the damaged entry was written again


def test_a_shared_cache_that_is_not_there_yet_is_one_listing(tmp_path):
    reader = SharedCache(VariantCache(tmp_path / "r"), (tmp_path / "none").as_uri())
    reader.fs = _Counting(reader.fs)
    assert reader.load_many([(f"k{i}", None) for i in range(50)]) == {}
    assert reader.fs.calls == ["ls"]


def test_link_refuses_parts_of_another_host_compiler():
    other = dict(local_toolset(nvcc=False).as_dict(), host_compiler="clang version 99.0.0")
    mine = local_toolset(nvcc=False).host_compiler
    with pytest.raises(PartError, match=rf"different tools: host C\+\+ compiler {re.escape(mine)} in .*, clang version 99\.0\.0 in "):
        check_parts([_part(1, 2), _part(2, 2, tools=other)])


def test_link_refuses_parts_whose_host_compiler_is_not_this_machines(tmp_path):
    """The link compiles the launcher: with another host compiler than the parts' the library would be no one machine's."""
    from dataclasses import replace

    from tl_aot.pipeline.shards import link_parts

    part = tmp_path / "part"
    part.mkdir()
    made = _part(1, 1, tools=dict(local_toolset(nvcc=False).as_dict(), host_compiler="clang version 99.0.0"))
    (part / "part.json").write_text(replace(made, folder=part).to_json())
    mine = local_toolset(nvcc=False).host_compiler
    with pytest.raises(PartError, match=rf"host C\+\+ compiler clang version 99\.0\.0 in the parts \(.*part\), {re.escape(mine)} here"):
        link_parts([str(part)], out_dir=tmp_path / "out", log=None)
    assert not (tmp_path / "out").exists()


def test_a_host_compiler_is_named_by_name_and_version_not_path(tmp_path, monkeypatch):
    import shutil

    from tl_aot.cuda.host_identity import compiler_identity

    monkeypatch.delenv("CXX", raising=False)
    cxx = shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    alias = tmp_path / "bin" / "my-cxx"
    alias.parent.mkdir()
    alias.symlink_to(cxx)
    name = compiler_identity(cxx)
    assert name and name == compiler_identity(str(alias))
    assert str(tmp_path) not in name and not name.startswith(("c++ ", "g++ ", "my-cxx "))
    assert local_toolset(nvcc=False).host_compiler == name


@pytest.mark.parametrize("jobs", [0, -1, 2.0, "4"])
def test_link_refuses_a_job_count_that_is_no_whole_number_of_at_least_one(tmp_path, jobs):
    from tl_aot.common.errors import SpecError
    from tl_aot.pipeline.shards import link_parts

    with pytest.raises(SpecError, match=rf"link: jobs must be a whole number of at least 1 .*got {re.escape(repr(jobs))}"):
        link_parts([str(tmp_path / "part")], out_dir=tmp_path / "out", jobs=jobs, log=None)
    assert not (tmp_path / "out").exists()
