"""tlops (tests/packages/factory_shapes): every factory shape built as written, equal to TileLang's JIT.

The reference is the library's own call of each kernel through TileLang's real JIT on this CPU
machine (``jit_reference.py``, with ``TILELANG_DEFAULT_TARGET`` naming sm_90a): each build (spec
file, CLI, setuptools) must give the same prim_func (structural hash), the same options and, when
lowered, the same CUDA source.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from support.builds import with_runtime
from support.helpers import ok, run_ok, tl_aot_cli, tl_aot_here

pytest.importorskip("tilelang")

PACKAGE = Path(__file__).parents[1] / "packages" / "factory_shapes"
ENTRIES = ("gemm", "relu6_scale", "relu6_half", "rms_norm", "act_fwd", "act_bwd", "negate", "fill_like")


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    """A private copy of the package (builds write into it)."""
    dest = tmp_path_factory.mktemp("factory_shapes") / "factory_shapes"
    shutil.copytree(PACKAGE, dest, ignore=shutil.ignore_patterns("build", "*.so", "_aot.py", "_tl_aot_torch*", "__pycache__"))
    return dest


@pytest.fixture(scope="module")
def jit(package, tmp_path_factory) -> dict:
    """What TileLang's JIT compiles for each of the library's calls (real compiles, target sm_90a, no GPU)."""
    out = tmp_path_factory.mktemp("jit") / "jit.json"
    env = dict(os.environ, TILELANG_DEFAULT_TARGET='{"kind": "cuda", "arch": "sm_90a"}', TILELANG_CACHE_DIR=str(out.parent / "cache"))
    run_ok([sys.executable, "jit_reference.py", out], package, env)
    return json.loads(out.read_text())


def _variants(library: Path) -> dict:
    text = ok(tl_aot_here("inspect", "--json", library, cwd=PACKAGE.parent)).stdout
    return {e["name"]: e["variants"][0] for e in json.loads(text)["entries"]}


def _assert_same_as_jit(variants: dict, jit: dict, entries=ENTRIES) -> None:
    for name in entries:
        v, ref = variants[name], jit[name]
        assert v["func_hash"] == ref["func_hash"], name
        assert v["pass_configs"] == ref["pass_configs"], name
        assert v["compile_flags"] == ref["compile_flags"], name


def test_spec_file_builds_every_shape_as_the_jit_compiles_it(package, jit, cache_dir):
    out = package / "build-spec"
    ok(tl_aot_here("build", "--spec", "tlops.toml", "-o", out, "--cache-dir", cache_dir, "-q", cwd=package))
    variants = _variants(out / "libtlops_aot.so")
    assert sorted(variants) == sorted(ENTRIES)
    _assert_same_as_jit(variants, jit)
    assert variants["relu6_scale"]["compile_flags"][0] == "-include"  # the library's own header reached nvcc
    assert isinstance(variants["gemm"]["pass_configs"], dict) and isinstance(variants["gemm"]["compile_flags"], list)


def test_lowered_cuda_source_is_the_jits(package, jit):
    from tl_aot.common.arch import parse_arch
    from tl_aot.lower.lower import lower_variant
    from tl_aot.spec import load_spec_file

    lib = load_spec_file(package / "tlops.toml")
    for spec in lib.entries:
        v = lower_variant(spec, parse_arch("90a"))
        assert v.cuda_source == jit[spec.name]["source"], spec.name


def test_cli_reaches_every_level(package, jit, cache_dir):
    k = "tlops/kernels/"
    common = ["--arch", "90a", "--cache-dir", cache_dir, "-q"]
    builds = {
        "gemm": [k + "gemm.py:gemm_kernel", "--arg", "m=256", "--arg", "n=256", "--arg", "k=128", "--arg", "dtype=torch.float16"]
        + ["--jit-arg", "block_m=128", "--arg", "num_stages=3"],
        "act_bwd": [k + "multi.py:activation", "--select", "bwd", "--arg", "shape=Problem(rows=64, cols=256)"]
        + ["--arg", "dtype=float16", "--arg", "act=Act.RELU"],
        "rms_norm": [k + "norm.py:rms_norm", "--arg", "rows=256", "--arg", "cols=128", "--arg", "dtype=torch.float16"]
        + ["--arg", "clip=float('inf')", "--arg", "config=TileConfig(block=64, threads=64)"],
        "negate": [k + "dispatch.py:from_registry", "--import", "tlops.ops", "--arg", "op=negate", "--arg", "n=4096", "--out-idx", "-1"],
    }
    for name, args in builds.items():
        out = package / f"build-cli-{name}"
        ok(tl_aot_here("build", *args, "--name", name, "-o", out, *common, cwd=package))
        _assert_same_as_jit(_variants(out / f"lib{name}.so"), jit, entries=(name,))


def test_setuptools_takes_the_objects_the_library_passes(package, jit, cache_dir):
    env = dict(os.environ, TL_AOT_CACHE_DIR=str(cache_dir))
    run_ok([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], package, env)
    _assert_same_as_jit(_variants(package / "tlops" / "lib_aot.so"), jit)
    man = json.loads(ok(tl_aot_cli("inspect", "--json", package / "tlops" / "lib_aot.so", cwd=package)).stdout)
    gemm = next(e for e in man["entries"] if e["name"] == "gemm")
    assert ["jit_args.block_m", "128"] in gemm["args"] and ["dtype", "torch.float16"] in gemm["args"]


def test_editing_an_included_header_rebuilds_the_image(package, tmp_path, session_runtime):
    args = ["build", "tlops/kernels/scale.py:relu6_scale", "--arg", "n=1000", "--arg", "factor=2.0"]
    args += ["--arch", "90a", "--cache-dir", with_runtime(tmp_path / "cache", session_runtime), "-o", tmp_path / "out"]
    ok(tl_aot_here(*args, cwd=package))
    assert "is up to date" in ok(tl_aot_here(*args, cwd=package)).stdout
    header = package / "tlops" / "kernels" / "include" / "tlops_helpers.h"
    before = (tmp_path / "out" / "librelu6_scale.so").read_bytes()
    original = header.read_text()
    try:
        header.write_text(original.replace("6.0f", "5.0f"))
        out = ok(tl_aot_here(*args, cwd=package)).stdout
        assert "nvcc relu6_scale sm_90a" in out  # the cached image was compiled from the old header
        assert (tmp_path / "out" / "librelu6_scale.so").read_bytes() != before
    finally:
        header.write_text(original)


def test_checkouts_sharing_a_cache_each_build_with_their_own_headers(package, tmp_path, session_runtime):
    """A cache shared by two copies of the project: a hit reports the copy's own -include path, and an
    edited header in one copy rebuilds its image instead of reusing the other copy's."""
    other = tmp_path / "other" / "factory_shapes"
    shutil.copytree(package, other, ignore=shutil.ignore_patterns("build*", "*.so", "__pycache__"))
    cache = with_runtime(tmp_path / "cache", session_runtime)  # the variants' cache: empty of them

    def build(root: Path) -> tuple[str, list]:
        args = ["build", "tlops/kernels/scale.py:relu6_scale", "--arg", "n=1000", "--arg", "factor=2.0", "--arch", "90a"]
        out = ok(tl_aot_here(*args, "--cache-dir", cache, "-o", root / "out-shared", cwd=root)).stdout
        return out, _variants(root / "out-shared" / "librelu6_scale.so")["relu6_scale"]["compile_flags"]

    header = Path("tlops") / "kernels" / "include" / "tlops_helpers.h"
    out, flags = build(package)
    assert "nvcc relu6_scale sm_90a" in out and flags == ["-include", str(package / header)]
    out, flags = build(other)
    assert "nvcc relu6_scale" not in out and flags == ["-include", str(other / header)]  # a hit, in its own paths
    (other / header).write_text((other / header).read_text().replace("6.0f", "5.0f"))
    out, flags = build(other)
    assert "nvcc relu6_scale sm_90a" in out and flags == ["-include", str(other / header)]


def test_verify_proves_each_entry_is_the_kernel_the_librarys_jit_compiles(package, cache_dir, tmp_path):
    """``verify`` runs the library's own JIT calls (compiling nothing, as an H100) and finds every entry identical;
    a build with an option the library does not set is named, with what differs."""
    env = dict(os.environ, TL_AOT_CACHE_DIR=str(cache_dir))
    out = tmp_path / "spec"
    ok(tl_aot_cli("build", "--spec", "tlops.toml", "-o", out, "-q", cwd=package, env=env))
    workload = ["--", sys.executable, "-c", "import jit_reference; jit_reference.jit_kernels()"]
    verify = ("--device", "H100-SXM", *workload)
    text = ok(tl_aot_cli("verify", out / "libtlops_aot.so", *verify, cwd=package, env=env)).stdout
    assert f"{len(ENTRIES)} variants: {len(ENTRIES)} identical: passed" in text
    for name in ENTRIES:
        assert f"ok          {name} (sm_90a): " in text
    assert "ok          gemm (sm_90a): tlops.kernels.gemm.gemm_kernel.<locals>._gemm(block_m=128, num_stages=3)" in text

    other = tmp_path / "other"
    build = ("build", "tlops/kernels/scale.py:relu6_scale", "--arg", "n=1000", "--arg", "factor=2.0")
    ok(tl_aot_cli(*build, "--pass-config", "tl.disable_tma_lower=true", "--arch", "90a", "-o", other, "-q", cwd=package, env=env))
    proc = tl_aot_cli("verify", other, *verify, cwd=package, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        "DIFFERENT   relu6_scale (sm_90a): tlops.kernels.scale.relu6_scale(0=1000, 1=2.0) asks for it with other options: " in proc.stdout
    )
    assert "pass_configs: tl.disable_tma_lower = true built, absent requested" in proc.stdout
    assert "1 different: FAILED" in proc.stdout


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja")), reason="needs cmake and ninja")
def test_cmake_keywords_reach_every_level(package, jit, cache_dir):
    cmake_dir = ok(tl_aot_cli("--cmake-dir", cwd=package)).stdout.strip()
    build = package / "build-cmake"
    env = dict(os.environ, TL_AOT_CACHE_DIR=str(cache_dir))
    py = [f"-DTL_AOT_PYTHON={sys.executable}", f"-DPython_EXECUTABLE={sys.executable}", f"-DTileLangAOT_DIR={cmake_dir}"]
    run_ok(["cmake", "-S", package, "-B", build, "-G", "Ninja", *py], package, env)
    run_ok(["cmake", "--build", build], package, env)
    for name in ("gemm", "act_bwd", "negate"):
        _assert_same_as_jit(_variants(build / f"lib{name}.so"), jit, entries=(name,))
    assert "no work to do" in run_ok(["cmake", "--build", build], package, env).stdout
