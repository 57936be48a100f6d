"""A real multi-entry library built for sm_80 + sm_90a, loaded and driven on this GPU-less machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.fake_cuda import FakeCudaTensor
from support.helpers import child_env, ok, tl_aot_cli, tl_aot_here

from tl_aot.common.tilelang_compat import tilelang_version

pytest.importorskip("tilelang")

ENTRIES = {
    "gemm_f16",
    "gemm_bf16",
    "gemm_dyn",
    "add_one",
    "axpy",
    "softmax",
    "two_kernels",
    "source_scale",
    "add_one_l2",
    "conv_im2col",
    "cluster_rank",
}


def test_every_entry_built_for_both_archs(testlib):
    m = testlib.manifest
    assert {e.name for e in m.entries} == ENTRIES
    for e in m.entries:
        expected = ["sm_90a"] if e.name in ("conv_im2col", "cluster_rank") else ["sm_80", "sm_90a"]
        assert [str(v.arch) for v in e.variants] == expected
        assert all(v.image_bytes > 1000 for v in e.variants)
    gemm = m.entry("gemm_f16")
    assert len(gemm.variants[1].tma_descriptors) == 2 and not gemm.variants[0].tma_descriptors


def test_library_needs_no_cuda_driver_at_link_time(testlib_path):
    out = subprocess.run(["readelf", "-d", str(testlib_path)], capture_output=True, text=True, check=True).stdout
    needed = [ln for ln in out.splitlines() if "NEEDED" in ln]
    assert not any("libcuda" in ln or "libcudart" in ln for ln in needed), needed
    assert any("libtvm_ffi" in ln for ln in needed)


def test_inspect_cli_text_and_json(testlib_path):
    text = ok(tl_aot_cli("inspect", testlib_path)).stdout
    assert "gemm_dyn(A: float16[m, 512], B: float16[512, 512], C: float16[m, 512])" in text
    assert "dynamic: m = A.shape[0]" in text
    assert "tma A_desc: tiled on A" in text
    assert f"TileLang {tilelang_version()}," in text and "nvcc 13." in text
    data = json.loads(ok(tl_aot_cli("inspect", testlib_path, "--json")).stdout)
    from tl_aot.common.metadata import ABI_VERSION

    assert data["abi_version"] == ABI_VERSION
    assert {e["name"] for e in data["entries"]} == ENTRIES


def test_cpu_tensors_are_refused(testlib):
    torch = pytest.importorskip("torch")
    x = torch.ones(16)
    with pytest.raises(ValueError, match="add_one: argument 'X' expected a CUDA tensor, got a tensor on cpu"):
        testlib.add_one(x, x)


def test_wrong_dtype_shape_count_and_scalar_type(testlib):
    f16 = lambda *s: FakeCudaTensor(list(s), "float16")  # noqa: E731
    with pytest.raises(TypeError, match="gemm_f16: argument 'B' expected dtype float16, got bfloat16"):
        testlib.gemm_f16(f16(1024, 1024), FakeCudaTensor([1024, 1024], "bfloat16"), f16(1024, 1024))
    with pytest.raises(ValueError, match="gemm_f16: argument 'C' expected shape \\[1024, 1024\\] with dim 1 = 1024, got \\[1024, 512\\]"):
        testlib.gemm_f16(f16(1024, 1024), f16(1024, 1024), f16(1024, 512))
    with pytest.raises(
        ValueError, match="gemm_dyn: argument 'C' expected shape \\[m, 512\\] with dim 0 = m = 64 \\(from 'A' dim 0\\), got \\[65, 512\\]"
    ):
        testlib.gemm_dyn(f16(64, 512), f16(512, 512), f16(65, 512))
    with pytest.raises(TypeError, match="takes 3 arguments \\(A, B, C\\) and an optional stream, got 2"):
        testlib.gemm_f16(f16(1024, 1024), f16(1024, 1024))
    x = FakeCudaTensor([4096])
    with pytest.raises(TypeError, match="axpy: argument 'shift' expected an int \\(int32\\), got float"):
        testlib.axpy(x, x, 1.0, 2.5)
    with pytest.raises(ValueError, match="axpy: argument 'shift' expected a value in range of int32"):
        testlib.axpy(x, x, 1.0, 2**40)
    with pytest.raises(TypeError, match="axpy: argument 'Y' expected a tensor, got None"):
        testlib.axpy(x, None, 1.0, 2)


def test_transposed_view_and_zero_size_are_refused(testlib):
    with pytest.raises(ValueError, match="argument 'A' expected a contiguous tensor with strides \\(1024, 1\\)"):
        testlib.gemm_f16(FakeCudaTensor([1024, 1024], "float16", strides=[1, 1024]), *[FakeCudaTensor([1024, 1024], "float16")] * 2)
    with pytest.raises(ValueError, match="add_one: argument 'X' expected dim 0 \\('n'\\) in \\[1, 2147483647\\]"):
        testlib.add_one(FakeCudaTensor([0]), FakeCudaTensor([0]))


def test_a_dynamic_dim_takes_int32_max_and_refuses_one_more(testlib):
    """A dynamic dim is an int32 in the kernel: 2**31 - 1 passes every check (then: no driver here), 2**31 is refused."""
    with pytest.raises(RuntimeError, match="add_one: cannot load the NVIDIA driver library"):
        testlib.add_one(FakeCudaTensor([2**31 - 1]), FakeCudaTensor([2**31 - 1]))
    for n in (2**31, 2**40):
        with pytest.raises(ValueError, match=rf"add_one: argument 'X' expected dim 0 \('n'\) in \[1, 2147483647\], got \[{n}\]"):
            testlib.add_one(FakeCudaTensor([n]), FakeCudaTensor([n]))


def test_good_arguments_reach_the_driver_and_fail_clearly_without_one(testlib):
    x = FakeCudaTensor([1000])
    with pytest.raises(RuntimeError, match="add_one: cannot load the NVIDIA driver library libcuda.so.1"):
        testlib.add_one(x, FakeCudaTensor([1000]))
    # ... and the library stays usable: the next bad call is still diagnosed precisely.
    with pytest.raises(TypeError, match="expected dtype float32"):
        testlib.add_one(x, FakeCudaTensor([1000], "float64"))
    assert testlib.cleanup() == 0


def test_incompatible_abi_is_refused(testlib_path, monkeypatch):
    import tl_aot.runtime.loader as rt
    from tl_aot.common.metadata import ABI_VERSION
    from tl_aot.runtime import manifest_check
    from tl_aot.runtime.manifest_file import manifest_of_file

    monkeypatch.setattr(manifest_check, "ABI_VERSION", 999)  # the one check, whether the library is loaded or read
    with pytest.raises(rt.LibraryError, match=f"launcher ABI {ABI_VERSION}; this tl_aot understands ABI 999"):
        rt.load(testlib_path)
    with pytest.raises(rt.LibraryError, match=f"launcher ABI {ABI_VERSION}; this tl_aot understands ABI 999"):
        manifest_of_file(testlib_path)  # what inspect reads


def test_no_op_rebuild_does_not_import_tilelang(testlib_path, cache_dir, tmp_path):
    """A second build of an unchanged library only checks the stamp (fast: no TileLang import)."""
    from tl_aot.pipeline.library import build_library
    from tl_aot.spec import KernelSpec, LibrarySpec

    kernels = Path(__file__).parents[1] / "kernels"
    lib = LibrarySpec("noop", (KernelSpec.create(name="add_one", source=kernels / "elementwise.py", function="add_one", archs=["80"]),))
    first = build_library(lib, out_dir=tmp_path, cache_dir=cache_dir, log=None)
    assert not first.up_to_date
    src = str(kernels / "elementwise.py")
    code = (
        "import sys, time; t=time.perf_counter()\n"
        "from tl_aot.pipeline.library import build_library; from tl_aot.spec import *\n"
        f"lib = LibrarySpec('noop', (KernelSpec.create(name='add_one', source={src!r}, function='add_one', archs=['80']),))\n"
        f"r = build_library(lib, out_dir={str(tmp_path)!r}, cache_dir={str(cache_dir)!r}, log=None)\n"
        "assert r.up_to_date and not r.rebuilt\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('tilelang', 'torch', 'tvm_ffi'))\n"
        "assert not heavy, heavy[:5]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_default_archs_each_get_their_own_cubin(tmp_path, cache_dir):
    """Without --arch, every default arch this nvcc supports (sm_80 … sm_100a) gets a cubin of its own."""
    from tl_aot.cuda.toolchain import default_archs

    archs = [str(a) for a in default_archs()]
    assert {"sm_80", "sm_89", "sm_90a"} <= set(archs)  # nvcc 12.4+ supports all of these
    kernels = Path(__file__).parents[1] / "kernels"
    cmd = ["build", f"{kernels / 'gemm.py'}:matmul", "--name", "gemm_all"]
    cmd += ["--arg", "M=256", "--arg", "N=256", "--arg", "K=256", "-o", str(tmp_path), "--cache-dir", str(cache_dir)]
    ok(tl_aot_here(*cmd, env=child_env()))  # TL_AOT_ARCHS unset
    info = json.loads(ok(tl_aot_here("inspect", str(tmp_path / "libgemm_all.so"), "--json")).stdout)
    (entry,) = info["entries"]
    variants = {v["arch"]: v for v in entry["variants"]}
    assert list(variants) == archs
    for arch, v in variants.items():
        assert v["image_kind"] == "cubin" and v["image_bytes"] > 1000, arch
    # The Hopper GEMM reads through TMA descriptors; the Ampere one does not.
    assert variants["sm_90a"]["tma_descriptors"] and not variants["sm_80"]["tma_descriptors"]


_KERNEL = """import tilelang.language as T


def add(N, block={block}):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] + T.float32({value})

    return main
"""


def test_editing_one_kernel_reuses_the_launcher_unless_its_launch_changes(tmp_path, fresh_cache):
    """A kernel body edit rebuilds that entry only and reuses the compiled launcher; a launch change recompiles it."""
    from tl_aot.pipeline.library import build_library
    from tl_aot.spec import KernelSpec, LibrarySpec

    (tmp_path / "a.py").write_text(_KERNEL.format(block=128, value=1.0))
    (tmp_path / "b.py").write_text(_KERNEL.format(block=128, value=2.0))
    lib = LibrarySpec(
        "pair",
        tuple(KernelSpec.create(name=n, source=tmp_path / f"{n}.py", function="add", args={"N": 4096}, archs=["80"]) for n in ("a", "b")),
    )
    out = tmp_path / "out"

    def build():
        lines = []
        result = build_library(lib, out_dir=out, cache_dir=fresh_cache, log=lines.append)  # its own: no launcher of another run
        return result, next(line for line in lines if "launcher pair.cc" in line)

    first, _ = build()
    before = first.library.read_bytes()
    (tmp_path / "a.py").write_text(_KERNEL.format(block=128, value=3.0))  # new code, same launch
    second, line = build()
    assert second.rebuilt == (("a", "sm_80"),)
    assert "unchanged, reused" in line
    assert second.library.read_bytes() != before  # a's new image is in the library
    (tmp_path / "a.py").write_text(_KERNEL.format(block=256, value=3.0))  # new grid and block
    third, line = build()
    assert third.rebuilt == (("a", "sm_80"),)
    assert "unchanged" not in line
    block = third.manifest.entry("a").variants[0].kernels[0].block
    assert [str(b) for b in block] == ["256", "1", "1"]


def test_a_fresh_output_folder_with_a_warm_cache_compiles_nothing(tmp_path, fresh_cache):
    """Launcher, manifest and runtime objects come from the cache by content: a second folder only links, to the same bytes."""
    from tl_aot.pipeline.library import build_library
    from tl_aot.spec import KernelSpec, LibrarySpec

    kernels = Path(__file__).parents[1] / "kernels"
    lib = LibrarySpec("fresh", (KernelSpec.create(name="add_one", source=kernels / "elementwise.py", function="add_one", archs=["80"]),))
    first = build_library(lib, out_dir=tmp_path / "a", cache_dir=fresh_cache, log=None)
    objects = {p: p.stat().st_mtime_ns for p in fresh_cache.glob(".objects/*/*.o")}
    assert sorted(p.name for p in objects) == ["fresh.launcher.o", "fresh.manifest.o", "launcher_runtime.o"]
    lines = []
    second = build_library(lib, out_dir=tmp_path / "b", cache_dir=fresh_cache, log=lines.append)
    assert second.rebuilt == () and any("launcher fresh.cc (1 entries, unchanged, reused)" in line for line in lines)
    assert {p: p.stat().st_mtime_ns for p in fresh_cache.glob(".objects/*/*.o")} == objects  # nothing compiled again
    assert second.library.read_bytes() == first.library.read_bytes()
    assert not list((tmp_path / "b" / ".tl_aot" / "fresh").glob("*.launcher.o"))  # no per-folder copy to go stale


def test_the_runtime_objects_key_does_not_depend_on_the_working_folder(session_runtime, cache_dir, tmp_path, monkeypatch):
    """Builds started from any folder share one runtime object (its key spells the compile for a fixed folder)."""
    from tl_aot.common.versions import package_version
    from tl_aot.cuda.host_objects import runtime_object
    from tl_aot.cuda.toolchain import nvcc_version
    from tl_aot.pipeline.stages import objects_key

    monkeypatch.chdir(tmp_path)
    obj, compiled = runtime_object(cache_dir, extra_key=objects_key(nvcc_version(), package_version("apache-tvm-ffi")))
    assert obj == session_runtime and not compiled


def test_a_launcher_cut_into_units_links_a_library_that_serves_every_entry(testlib_path, cache_dir, tmp_path, monkeypatch):
    """A launcher big enough to cut (here the testlib's, cut ~3 entries a unit) is one working library, the same whatever -j.

    Every entry is exported, listed by ``inspect`` and checks its arguments; a second build with
    ``-j 1`` into a fresh folder compiles no unit and links the same bytes.
    """
    from support.builds import TESTLIB_SPEC

    import tl_aot
    from tl_aot.codegen import launcher_units
    from tl_aot.pipeline.library import build_library
    from tl_aot.spec import load_spec_file

    monkeypatch.setattr(launcher_units, "UNIT_WEIGHT", 30)

    def build(folder: str, jobs: int):
        lines: list[str] = []
        result = build_library(load_spec_file(TESTLIB_SPEC), out_dir=tmp_path / folder, cache_dir=cache_dir, log=lines.append, jobs=jobs)
        return result, next(line for line in lines if "launcher tl_aot_testlib.cc" in line)

    first, line = build("a", 3)
    units = len(launcher_units.unit_plans(first.manifest, 30)) + 1
    assert units >= 4 and f"{units} units" in line, line
    work = tmp_path / "a" / ".tl_aot" / "tl_aot_testlib"
    assert sorted(p.name for p in work.glob("tl_aot_testlib.unit*.cc")) == sorted(f"tl_aot_testlib.unit{k}.cc" for k in range(1, units))
    exported = subprocess.run(["nm", "-D", "--defined-only", str(first.library)], capture_output=True, text=True, check=True).stdout
    assert {f"__tvm_ffi_{name}" for name in ENTRIES} <= {ln.split()[-1] for ln in exported.splitlines()}
    data = json.loads(ok(tl_aot_cli("inspect", first.library, "--json")).stdout)
    assert {e["name"] for e in data["entries"]} == ENTRIES

    lib = tl_aot.load(first.library)
    f16 = lambda *s: FakeCudaTensor(list(s), "float16")  # noqa: E731
    with pytest.raises(TypeError, match="gemm_f16: argument 'B' expected dtype float16, got bfloat16"):
        lib.gemm_f16(f16(1024, 1024), FakeCudaTensor([1024, 1024], "bfloat16"), f16(1024, 1024))
    with pytest.raises(RuntimeError, match="add_one: cannot load the NVIDIA driver library libcuda.so.1"):
        lib.add_one(FakeCudaTensor([1000]), FakeCudaTensor([1000]))
    assert lib.cleanup() == 0

    second, line = build("b", 1)
    assert f"{units} units, 0 compiled" in line, line
    assert second.library.read_bytes() == first.library.read_bytes()


def test_a_changed_factory_walk_relabels_cached_variants_without_lowering_them(tmp_path, fresh_cache, monkeypatch):
    """The "built from" label is the walk's, cached with the variant: another walk walks it again, keeps its image, relabels it."""
    from tl_aot.jit import factory_walk, walk_digest
    from tl_aot.pipeline.library import build_library
    from tl_aot.spec import KernelSpec, LibrarySpec

    kernels = Path(__file__).parents[1] / "kernels"
    lib = LibrarySpec("walked", (KernelSpec.create(name="add_one", source=kernels / "elementwise.py", function="add_one", archs=["80"]),))

    def build():
        lines = []
        result = build_library(lib, out_dir=tmp_path / "out", cache_dir=fresh_cache, jobs=2, log=lines.append)
        return result, result.manifest.entry("add_one").variants[0].resolved, lines

    first, label, _ = build()
    assert first.rebuilt == (("add_one", "sm_80"),) and label == "add_one() -> prim_func"
    another = tmp_path / "factory_walk.py"  # tl_aot's walk, edited: how it names a level changed
    another.write_bytes(Path(factory_walk.__file__).read_bytes() + b"\n# labels spelled otherwise\n")
    monkeypatch.setattr(walk_digest, "_WALK", another)
    walk_digest.walk_digest.cache_clear()
    real_label = factory_walk._label
    monkeypatch.setattr(factory_walk, "_label", lambda obj: f"walked:{real_label(obj)}")
    try:
        again, label, lines = build()
        assert not again.up_to_date and again.rebuilt == ()  # relinked, nothing lowered or compiled
        assert label == "walked:add_one() -> prim_func"
        assert "tl_aot's factory walk changed: 1 cached variant(s) walked again and kept" in lines
        third, label, lines = build()
        assert third.up_to_date and label == "walked:add_one() -> prim_func"  # kept in the cache: not walked again
    finally:
        walk_digest.walk_digest.cache_clear()


def test_load_makes_its_index_with_the_collector_held_off(testlib_path, monkeypatch):
    """``tl_aot.load`` parses the index with the cyclic collector off: a pass then would walk the whole process (~80 ms after torch)."""
    import gc

    import tl_aot
    from tl_aot.runtime import loader

    seen: list[bool] = []
    read_index, library = loader.read_index, loader.Library

    def watched_read(*args):
        seen.append(gc.isenabled())
        return read_index(*args)

    def watched_library(*args):
        seen.append(gc.isenabled())
        return library(*args)

    monkeypatch.setattr(loader, "read_index", watched_read)
    monkeypatch.setattr(loader, "Library", watched_library)
    lib = tl_aot.load(testlib_path)
    assert seen == [False, False]  # the index parsed, the Library made: both with the collector off
    assert gc.isenabled()  # and given back
    assert {e.name for e in lib.manifest.entries} == ENTRIES  # the library loaded whole
