"""The CMake front end, built for real: the top-level project, tests/packages/cmake_*, and the scikit-build-core sample.

The top-level CMakeLists.txt (samples/cmake_app: three kernels, two C++ programs, ctest tests) is
configured and built with Ninja from a copy of its sources; no-op rebuilds and touched kernel
files show what CMake re-runs; the kernels are installed and linked from a downstream project;
cmake_subdir changes ARGS / ARCHS and runs the Makefile generator; cmake_packs builds and installs
image packs (its kernel is test_shards_cli.py's, so their variants are shared); cmake_errors checks each
configure-time error; the scikit-build-core sample's wheel is built, installed and loaded.
Every build uses sm_80 and the session's variant cache (``TL_AOT_CACHE_DIR``).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from support.helpers import child_env, ok, run, run_ok, tl_aot_cli
from support.tree import files
from support.venvs import fresh_venv, pip_into

pytest.importorskip("tilelang")
CMAKE = shutil.which("cmake")
NINJA = shutil.which("ninja")
if not (CMAKE and NINJA and shutil.which("nvcc")):
    pytest.skip("needs cmake, ninja and nvcc on PATH", allow_module_level=True)

from support.builds import cuda_available  # noqa: E402 (after the module-level skip)

import tl_aot  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ROOT / "tests" / "packages"
SKBUILD_SAMPLE = ROOT / "samples" / "skbuild_package"
_IGNORE = shutil.ignore_patterns("build", "dist", "*.egg-info", "*.so", "__pycache__", ".tl_aot")
_KERNEL_LINE = re.compile(r"Building TileLang kernel (\w+) \(")


@functools.cache
def _cmake_dir() -> str:
    """``python -m tl_aot --cmake-dir``, run as a process once per module: every configure of this file passes its answer."""
    return ok(tl_aot_cli("--cmake-dir")).stdout.strip()


def _configure(src: Path, build: Path, env: dict, *args: str, generator: str = "Ninja", check: bool = True) -> subprocess.CompletedProcess:
    """``cmake -S src -B build``, with TileLangAOT_DIR from ``python -m tl_aot --cmake-dir`` and this interpreter."""
    py = [f"-DTL_AOT_PYTHON={sys.executable}", f"-DPython_EXECUTABLE={sys.executable}", f"-DTileLangAOT_DIR={_cmake_dir()}"]
    cmd = [CMAKE, "-S", src, "-B", build, "-G", generator, *py, *args]
    return run_ok(cmd, src, env) if check else run(cmd, src, env)


def _kernels_built(output: str) -> set[str]:
    """The kernels whose build step ran, from CMake's comments (``Building TileLang kernel gemm (sm_80)``)."""
    return set(_KERNEL_LINE.findall(output))


def _touch(path: Path) -> None:
    """Make ``path`` newer than anything built so far (content unchanged)."""
    time.sleep(0.01)
    os.utime(path)


# ---------------------------------------------------------------------------------------------
# The locator and the version file
# ---------------------------------------------------------------------------------------------


def test_cmake_dir_holds_the_package_and_its_version_matches_tl_aot():
    cmake_dir = Path(ok(tl_aot_cli("--cmake-dir")).stdout.strip())  # the locator itself, as a process of its own
    for name in ("TileLangAOTConfig.cmake", "TileLangAOTConfigVersion.cmake", "TileLangAOT.cmake", "TileLangAOTTvmFfi.cmake"):
        assert (cmake_dir / name).is_file(), name
    version = re.search(r'set\(PACKAGE_VERSION "([^"]+)"\)', (cmake_dir / "TileLangAOTConfigVersion.cmake").read_text())
    assert version and version.group(1) == tl_aot.__version__


def test_cmake_code_is_formatted():
    """``cmake-format --check`` with .cmake-format.yaml (cmake_errors holds malformed calls on purpose)."""
    if shutil.which("cmake-format") is None:
        pytest.skip("cmake-format is not installed (pip install 'cmakelang[YAML]')")
    cmake_files = [*files(ROOT / "cmake", "*.cmake"), ROOT / "CMakeLists.txt", *files(ROOT / "samples", "*/CMakeLists.txt")]
    cmake_files += files(PACKAGES / "cmake_subdir", "CMakeLists.txt", recursive=True) + [PACKAGES / "cmake_installed" / "CMakeLists.txt"]
    cmake_files += [PACKAGES / "cmake_packs" / "CMakeLists.txt", PACKAGES / "cmake_packs_left_out" / "CMakeLists.txt"]
    run_ok(["cmake-format", "--check", *cmake_files], ROOT, dict(os.environ))


# ---------------------------------------------------------------------------------------------
# The top-level project: build, no-op, touched kernels, ctest, install
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def toplevel(tmp_path_factory, cache_dir):
    """The top-level project copied and built with Ninja for sm_80: (source copy, build dir, env, first build's output)."""
    base = tmp_path_factory.mktemp("cmake-toplevel")
    src = base / "src"
    src.mkdir()
    shutil.copy(ROOT / "CMakeLists.txt", src)
    shutil.copytree(ROOT / "cmake", src / "cmake", ignore=_IGNORE)
    shutil.copytree(ROOT / "samples" / "cmake_app", src / "samples" / "cmake_app", ignore=_IGNORE)
    build = base / "build"
    env = child_env(cache_dir)
    _configure(src, build, env, "-DTL_AOT_ARCHS=80")
    out = run_ok([NINJA, "-C", build], src, env).stdout
    return src, build, env, out


def test_toplevel_builds_every_kernel_and_program(toplevel):
    src, build, env, out = toplevel
    assert _kernels_built(out) == {"sample_add_one", "sample_axpy", "sample_gemm"}
    assert "Building TileLang kernel sample_gemm (sm_80)" in out
    app = build / "samples" / "cmake_app"
    for f in ("libsample_add_one.so", "libsample_axpy.so", "libsample_gemm.so", "tl_aot_cpu_checks", "tl_aot/include/sample_gemm.h"):
        assert (app / f).exists(), f
    assert "namespace sample_gemm" in (app / "tl_aot" / "include" / "sample_gemm.h").read_text()


def test_noop_rebuild_does_nothing(toplevel):
    src, build, env, _ = toplevel
    assert "no work to do" in run_ok([NINJA, "-C", build, "-n"], src, env).stdout
    assert "no work to do" in run_ok([NINJA, "-C", build], src, env).stdout


def test_touching_one_kernel_file_rebuilds_only_that_kernel(toplevel):
    src, build, env, _ = toplevel
    kernels = src / "samples" / "cmake_app" / "kernels"
    _touch(kernels / "tiles.py")  # imported by gemm.py only: found through tl_aot's depfile
    assert _kernels_built(run_ok([NINJA, "-C", build], src, env).stdout) == {"sample_gemm"}
    _touch(kernels / "elementwise.py")  # both elementwise kernels come from it
    assert _kernels_built(run_ok([NINJA, "-C", build], src, env).stdout) == {"sample_add_one", "sample_axpy"}
    assert "no work to do" in run_ok([NINJA, "-C", build], src, env).stdout


def test_libraries_have_a_soname_and_link_tvm_ffi_but_not_libcuda(toplevel):
    src, build, env, _ = toplevel
    lib = build / "samples" / "cmake_app" / "libsample_gemm.so"
    dyn = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=True).stdout
    assert "Library soname: [libsample_gemm.so]" in dyn
    needed = [ln for ln in dyn.splitlines() if "NEEDED" in ln]
    assert any("libtvm_ffi" in ln for ln in needed), needed
    assert not any("libcuda" in ln for ln in needed), needed
    # The build tree's stand-in for tvm_ffi's wheel layout: libtvm_ffi beside the libraries.
    assert (build / "samples" / "cmake_app" / "libtvm_ffi.so").exists()


def test_ctest_cpu_tests_pass_and_gpu_tests_skip_without_a_gpu(toplevel):
    src, build, env, _ = toplevel
    out = run_ok(["ctest", "--test-dir", build, "-LE", "gpu", "--output-on-failure"], src, env).stdout
    assert "100% tests passed" in out and "out of 4" in out
    for name in ("cpu.manifest", "cpu.refuse-cpu-tensor", "cpu.refuse-bad-arguments", "cpu.returned-output"):
        assert name in out
    if not cuda_available():
        gpu = run_ok(["ctest", "--test-dir", build, "-L", "gpu"], src, env).stdout
        assert "gpu.app" in gpu and "Skipped" in gpu


def test_installed_kernels_are_found_by_a_downstream_project(toplevel, tmp_path):
    src, build, env, _ = toplevel
    prefix = tmp_path / "prefix"
    run_ok([CMAKE, "--install", build, "--prefix", prefix], src, env)
    for f in ("lib/libsample_gemm.so", "include/sample_gemm.h", "lib/cmake/TlAotSampleKernels/TlAotSampleKernelsConfig.cmake"):
        assert (prefix / f).is_file(), f
    assert not (prefix / "lib" / "libtvm_ffi.so").exists()  # the symlink stays in the build tree

    # tests/packages/cmake_installed: find_package(TlAotSampleKernels), no tl_aot involved.
    consumer = tmp_path / "consumer"
    _configure(PACKAGES / "cmake_installed", consumer, env, f"-DCMAKE_PREFIX_PATH={prefix}")
    run_ok([NINJA, "-C", consumer], src, env)
    out = run_ok([consumer / "installed_app"], src, env).stdout
    assert '"library": "sample_gemm"' in out and "expected a CUDA tensor" in out

    # The sample itself, as the GPU machine builds it: prebuilt kernels, its ctest CPU tests.
    app = tmp_path / "app"
    _configure(src / "samples" / "cmake_app", app, env, "-DTL_AOT_APP_PREBUILT=ON", f"-DCMAKE_PREFIX_PATH={prefix}")
    out = run_ok([NINJA, "-C", app], src, env).stdout
    assert not _kernels_built(out)
    assert "100% tests passed" in run_ok(["ctest", "--test-dir", app, "-LE", "gpu"], src, env).stdout


# ---------------------------------------------------------------------------------------------
# tests/packages/cmake_subdir: options that change the build, and the Makefile generator
# ---------------------------------------------------------------------------------------------


def test_args_and_archs_changes_rebuild_and_makefiles_work(tmp_path, cache_dir):
    src = tmp_path / "src"
    shutil.copytree(PACKAGES / "cmake_subdir", src, ignore=_IGNORE)
    env = child_env(cache_dir)
    build = tmp_path / "ninja"
    app = build / "app" / "subdir_app"

    _configure(src, build, env)
    assert _kernels_built(run_ok([NINJA, "-C", build], src, env).stdout) == {"subdir_add_one"}
    assert '["block", "256"]' in run_ok([app], src, env).stdout
    assert "no work to do" in run_ok([NINJA, "-C", build, "-n"], src, env).stdout

    # The same arch in CMAKE_CUDA_ARCHITECTURES spelling: same command, nothing to do.
    _configure(src, build, env, "-DSUBDIR_ARCHS=80-real")
    assert "no work to do" in run_ok([NINJA, "-C", build, "-n"], src, env).stdout

    # Another ARGS value: that kernel is rebuilt and the program sees it.
    _configure(src, build, env, "-DSUBDIR_BLOCK=128")
    assert _kernels_built(run_ok([NINJA, "-C", build], src, env).stdout) == {"subdir_add_one"}
    assert '["block", "128"]' in run_ok([app], src, env).stdout
    assert "no work to do" in run_ok([NINJA, "-C", build], src, env).stdout

    # A local module the kernel imports.
    _touch(src / "kernels" / "values.py")
    assert _kernels_built(run_ok([NINJA, "-C", build], src, env).stdout) == {"subdir_add_one"}

    # Another arch list: the build step would run (dry run; not built).
    _configure(src, build, env, "-DSUBDIR_ARCHS=80;90a")
    assert "Building TileLang kernel subdir_add_one (sm_80, sm_90a)" in run_ok([NINJA, "-C", build, "-n"], src, env).stdout

    # Unix Makefiles: the same project, its variants now cached.
    make_build = tmp_path / "make"
    _configure(src, make_build, env, "-DSUBDIR_ARCHS=80", "-DSUBDIR_BLOCK=256", generator="Unix Makefiles")
    make = ["make", "-C", make_build, "-j2"]
    assert _kernels_built(run_ok(make, src, env).stdout) == {"subdir_add_one"}
    assert not _kernels_built(run_ok(make, src, env).stdout)
    _touch(src / "kernels" / "values.py")
    assert _kernels_built(run_ok(make, src, env).stdout) == {"subdir_add_one"}
    _configure(src, make_build, env, "-DSUBDIR_BLOCK=128", generator="Unix Makefiles")
    assert _kernels_built(run_ok(make, src, env).stdout) == {"subdir_add_one"}
    assert not _kernels_built(run_ok(make, src, env).stdout)
    assert '["block", "128"]' in run_ok([make_build / "app" / "subdir_app"], src, env).stdout


# ---------------------------------------------------------------------------------------------
# tests/packages/cmake_packs: IMAGE_PACKS, built and installed
# ---------------------------------------------------------------------------------------------

_CHECK_IMAGES = """
import sys, tvm_ffi
check = tvm_ffi.load_module(sys.argv[1])["tl_aot_check_images"]
for arch in sys.argv[2:]:
    print(f"{arch}: " + " ".join(str(check(arch)).split()))
"""


def _check_images(lib: Path, env: dict, *archs: str) -> list[str]:
    """``tl_aot_check_images`` of each arch, the check an entry's first call makes, run on the CPU: one line each."""
    return run_ok([sys.executable, "-c", _CHECK_IMAGES, lib, *archs], lib.parent, env).stdout.splitlines()


def test_image_packs_are_build_outputs_and_are_installed_beside_the_library(tmp_path, cache_dir):
    env = child_env(cache_dir)
    build = tmp_path / "build"
    _configure(PACKAGES / "cmake_packs", build, env)
    names = ["libadd_one.sm_80.tlpack", "libadd_one.sm_90a.tlpack"]
    ninja_text = (build / "build.ninja").read_text()
    outputs = next(ln for ln in ninja_text.splitlines() if ln.startswith("build lib/libadd_one.so "))
    assert all(f"lib/{n}" in outputs.split(":")[0] for n in names), f"the packs are outputs ninja knows: {outputs[:300]}"
    assert "--image-packs" in (build / "tl_aot" / "add_one" / "add_one.options").read_text().splitlines()

    assert _kernels_built(run_ok([NINJA, "-C", build], tmp_path, env).stdout) == {"add_one"}
    for n in names:
        assert (build / "lib" / n).is_file(), n
    assert "no work to do" in run_ok([NINJA, "-C", build, "-n"], tmp_path, env).stdout
    (build / "lib" / names[1]).unlink()  # a deleted pack is made again
    assert _kernels_built(run_ok([NINJA, "-C", build], tmp_path, env).stdout) == {"add_one"}
    assert (build / "lib" / names[1]).is_file()

    prefix = tmp_path / "prefix"
    run_ok([CMAKE, "--install", build, "--prefix", prefix], tmp_path, env)
    installed = prefix / "lib" / "libadd_one.so"
    assert sorted(p.name for p in installed.parent.glob("*.tlpack")) == names
    assert (prefix / "include" / "add_one.h").is_file()
    assert '"library": "add_one"' in ok(tl_aot_cli("inspect", "--json", installed, env=env)).stdout
    assert _check_images(installed, env, "sm_80", "sm_90a") == ["sm_80: ", "sm_90a: "]
    (installed.parent / names[1]).unlink()
    missing = _check_images(installed, env, "sm_90a")[0]
    assert f"{names[1]}, which is not installed" in missing and "pip install 'tl-cmake-packs-sm90a==0.1'" in missing, missing


def test_an_arch_wholly_left_out_has_no_pack_and_installs_without_it(tmp_path, cache_dir):
    """cmake_packs_left_out: KEEP_GOING leaves sm_80 out (shared memory): no sm_80 pack made, waited for or installed."""
    env = child_env(cache_dir)
    build = tmp_path / "build"
    _configure(PACKAGES / "cmake_packs_left_out", build, env)
    assert "--keep-going" in (build / "tl_aot" / "big_smem" / "big_smem.options").read_text().splitlines()
    proc = run_ok([NINJA, "-C", build], tmp_path, env)
    assert _kernels_built(proc.stdout) == {"big_smem"}
    assert "big_smem (sm_80): kernel main_kernel cannot launch on sm_80: 204800 bytes of shared memory" in proc.stdout
    assert sorted(p.name for p in (build / "lib").glob("*.tlpack")) == ["libbig_smem.sm_90a.tlpack"]
    assert "no work to do" in run_ok([NINJA, "-C", build, "-n"], tmp_path, env).stdout  # no output it waits for in vain

    prefix = tmp_path / "prefix"
    run_ok([CMAKE, "--install", build, "--prefix", prefix], tmp_path, env)
    installed = prefix / "lib" / "libbig_smem.so"
    assert sorted(p.name for p in installed.parent.glob("*.tlpack")) == ["libbig_smem.sm_90a.tlpack"]
    sm80, sm90a = _check_images(installed, env, "sm_80", "sm_90a")
    assert sm90a == "sm_90a: "
    # the check a call on an sm_80 GPU makes: the arch named, and why it is missing (not a pack to install)
    assert sm80.startswith("sm_80: big_smem has no sm_80 image (built for sm_90a); the build left it out (--keep-going): "), sm80
    assert "big_smem (sm_80): kernel main_kernel cannot launch on sm_80: 204800 bytes of shared memory" in sm80, sm80
    assert "tl-left-out" not in sm80, sm80
    run_ok([NINJA, "-C", build, "clean"], tmp_path, env)
    assert not list((build / "lib").glob("*.tlpack")), "clean removes the packs Ninja was not told of"


# ---------------------------------------------------------------------------------------------
# tests/packages/cmake_errors: every wrong call stops the configure, naming the mistake
# ---------------------------------------------------------------------------------------------

ERRORS = {
    "missing_source": "add_tilelang_kernel(): 'SOURCE' is required",
    "missing_function": "add_tilelang_kernel(): 'FUNCTION' is required",
    "no_name": "add_tilelang_kernel(): the first argument must be the target name",
    "unknown_keyword": "add_tilelang_kernel(): unknown argument(s) 'SOURCES other.py'",
    "missing_value": "add_tilelang_kernel(): 'FUNCTION' needs a value",
    "missing_file": "nope.py' does not exist",
    "bad_arch": "target k: ARCHS: unsupported arch name '9z'",
    "native_arch": "target k: ARCHS: arch 'native' is not supported",
    "empty_archs": "add_tilelang_kernel(): 'ARCHS' is empty (target k): name the archs",
    "empty_archs_variable": "add_tilelang_kernel(): 'ARCHS' is empty (target k): name the archs",
    "bad_arg": "target k: ARGS item 'M4096': expected NAME=VALUE",
    "bad_name": "target name 'my-kernel' is not a valid identifier",
    "dependency_name": "target name 'tvm_ffi' would make libtvm_ffi.so, the file name of a library tl_aot's libraries load",
    "macro_name": "target name 'EOF' is a C/C++ macro",
    "spec_and_source": "'SPEC' cannot be combined with 'SOURCE'",
    "duplicate": "a target named 'k' already exists",
    "install_not_a_kernel": "'other' was not made by add_tilelang_kernel()",
    "install_namespace_without_export": "install_tilelang_kernels(): 'NAMESPACE' needs 'EXPORT'",
    "pack_hint_without_packs": "add_tilelang_kernel(): 'PACK_HINT' needs 'IMAGE_PACKS' (target k)",
    "packs_without_archs": "target k: IMAGE_PACKS needs the archs at configure time",
}


def _unwrap(text: str) -> str:
    """CMake wraps messages at 80 columns: join the lines back."""
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_configure_errors(case, tmp_path, cache_dir):
    proc = _configure(PACKAGES / "cmake_errors", tmp_path, child_env(cache_dir), f"-DCASE={case}", check=False)
    assert proc.returncode != 0
    assert ERRORS[case] in _unwrap(proc.stderr), proc.stderr


def test_archs_in_every_spelling(tmp_path, cache_dir):
    proc = _configure(PACKAGES / "cmake_errors", tmp_path, child_env(cache_dir), "-DCASE=ok")
    assert "configured" in proc.stdout
    options = (tmp_path / "tl_aot" / "k" / "k.options").read_text().splitlines()
    archs = [options[i + 1] for i, a in enumerate(options) if a == "--arch"]
    assert archs == ["80", "90a", "80+PTX"]  # 80-real, 90a-real, 80-virtual; sm_80 is a duplicate
    assert "Building TileLang kernel k (sm_80, sm_90a, sm_80+PTX)" in (tmp_path / "build.ninja").read_text()


def test_torch_ops_option_builds_the_companion(tmp_path, cache_dir):
    _configure(PACKAGES / "cmake_errors", tmp_path, child_env(cache_dir), "-DCASE=ok", "-DTL_AOT_TORCH_OPS=ON")
    assert "--torch-ops" in (tmp_path / "tl_aot" / "k" / "k.options").read_text().splitlines()
    assert "libk_torch.so" in (tmp_path / "build.ninja").read_text()  # a byproduct of the build step


def test_missing_tl_aot_or_tilelang_says_what_to_install(tmp_path, cache_dir):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = bare / "bin" / "python"
    env = child_env(cache_dir)
    env.pop("PYTHONPATH", None)
    cmd = [
        CMAKE,
        "-S",
        PACKAGES / "cmake_errors",
        "-B",
        tmp_path / "b1",
        f"-DTL_AOT_PYTHON={python}",
        f"-DTileLangAOT_DIR={_cmake_dir()}",
        "-DCASE=ok",
    ]
    proc = run(cmd, tmp_path, env)
    assert proc.returncode != 0
    assert f"tl_aot is not installed in {python}" in _unwrap(proc.stderr)
    assert 'pip install "tl_aot[build]"' in _unwrap(proc.stderr)

    stub = tmp_path / "stub" / "tl_aot"  # a tl_aot without TileLang beside it
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("")
    cmd[4] = tmp_path / "b2"
    proc = run(cmd, tmp_path, {**env, "PYTHONPATH": str(stub.parent)})
    assert proc.returncode != 0
    assert f"TileLang is not installed in {python}" in _unwrap(proc.stderr)
    assert 'pip install "tilelang>=0.1.12,<=0.1.15"' in _unwrap(proc.stderr)


# ---------------------------------------------------------------------------------------------
# samples/skbuild_package: a wheel built through add_tilelang_kernel by scikit-build-core
# ---------------------------------------------------------------------------------------------


def _build_skbuild_wheel(tmp_path: Path, env: dict) -> tuple[Path, str]:
    pytest.importorskip("scikit_build_core")
    src = tmp_path / "skbuild_src"
    shutil.copytree(SKBUILD_SAMPLE, src, ignore=_IGNORE)
    dist = tmp_path / "dist"
    cmd = [sys.executable, "-m", "pip", "wheel", src, "--no-build-isolation", "--no-deps", "-w", dist, "-v"]
    proc = run_ok(cmd, tmp_path, {**env, "TL_AOT_ARCHS": "80"})
    (wheel,) = dist.glob("tl_skb_sample-*.whl")
    return wheel, proc.stdout + proc.stderr  # pip -v passes CMake's output on to either


def _load_and_refuse_cpu_tensor(wheel: Path, tmp_path: Path, env: dict, extra_path: str = "") -> str:
    site = tmp_path / "site"
    run_ok([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", site, wheel], tmp_path, env)
    code = "import torch, tl_skb_sample as s\nx = torch.ones(16)\ntry:\n    s.add_one(x, x)\nexcept ValueError as e:\n    print(e)\n"
    path = os.pathsep.join(p for p in (str(site), extra_path) if p)
    return run_ok([sys.executable, "-c", code], tmp_path, {**env, "PYTHONPATH": path}).stdout


def test_skbuild_wheel_ships_kernels_built_by_cmake(tmp_path, cache_dir):
    env = child_env(cache_dir)
    wheel, out = _build_skbuild_wheel(tmp_path, env)
    assert "Building TileLang kernel skb_add_one (sm_80)" in out
    names = zipfile.ZipFile(wheel).namelist()
    for f in (
        "tl_skb_sample/__init__.py",
        "tl_skb_sample/libskb_add_one.so",
        "tl_skb_sample/libskb_axpy.so",
        "tl_skb_sample/include/skb_axpy.h",
    ):
        assert f in names, names
    assert wheel.name.endswith("-py3-none-linux_x86_64.whl")
    assert "skb_add_one: argument 'X' expected a CUDA tensor, got a tensor on cpu" in _load_and_refuse_cpu_tensor(wheel, tmp_path, env)

    # scikit-build-core tags linux_x86_64, which PyPI refuses: check-wheel --retag gives the true manylinux tag.
    out = ok(tl_aot_cli("check-wheel", "--retag", wheel, cwd=tmp_path, env=env)).stdout
    (retagged,) = wheel.parent.glob("tl_skb_sample-*.whl")
    tag = re.fullmatch(r"tl_skb_sample-0\.1\.0-py3-none-manylinux_2_(\d+)_x86_64\.whl", retagged.name)
    assert tag and int(tag[1]) <= 28, out
    assert f"-> {retagged}" in out and "tl_skb_sample/libskb_axpy.so: GLIBC_2." in out
    if importlib.util.find_spec("auditwheel"):  # its symbol-versions verdict: the same tag
        show = run_ok([sys.executable, "-m", "auditwheel", "show", retagged], tmp_path, env).stdout.replace("\n", " ")
        assert f'constrains the platform tag to "manylinux_2_{tag[1]}_x86_64"' in show, show

    # Installed into a fresh venv with apache-tvm-ffi alone (no tl_aot, no torch): it imports.
    python = fresh_venv(tmp_path / "rt", env)
    clean = {k: v for k, v in env.items() if k not in ("PIP_CONSTRAINT", "PIP_BUILD_CONSTRAINT", "PYTHONPATH")}
    run_ok(pip_into(python, "install", "-q", retagged), tmp_path, clean)
    names = run_ok(pip_into(python, "list", "--format=freeze"), tmp_path, clean).stdout
    installed = {re.sub(r"[-_.]+", "-", n).lower() for n in re.findall(r"^([\w.-]+)==", names, re.M)}
    assert installed <= {"apache-tvm-ffi", "pip", "setuptools", "typing-extensions", "tl-skb-sample"}, installed
    code = "import sys, tl_skb_sample as s\n"
    code += (
        "print(callable(s.add_one), callable(s.axpy), sorted(m for m in sys.modules if m.split('.')[0] in ('tl_aot', 'torch', 'tilelang')))"
    )
    assert run_ok([python, "-c", code], tmp_path, clean).stdout.strip() == "True True []"


def test_skbuild_finds_an_installed_tl_aot_through_its_cmake_root_entry_point(tmp_path, cache_dir):
    """A non-editable tl_aot wheel (with tl_aot/cmake inside): scikit-build-core alone locates TileLangAOT."""
    pytest.importorskip("setuptools")
    env = child_env(cache_dir)
    src = tmp_path / "tl_aot_src"
    src.mkdir()
    for f in ("setup.py", "pyproject.toml", "README.md", "LICENSE"):  # LICENSE: pyproject's license-files
        shutil.copy(ROOT / f, src)
    for d in ("tl_aot", "cmake"):
        shutil.copytree(ROOT / d, src / d, ignore=_IGNORE)
    run_ok([sys.executable, "-m", "pip", "wheel", src, "--no-deps", "--no-build-isolation", "-w", tmp_path / "tl_dist"], tmp_path, env)
    (tl_wheel,) = (tmp_path / "tl_dist").glob("tl_aot-*.whl")
    assert "tl_aot/cmake/TileLangAOTConfig.cmake" in zipfile.ZipFile(tl_wheel).namelist()
    tl_site = tmp_path / "tl_site"
    run_ok([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", tl_site, tl_wheel], tmp_path, env)

    env = {**env, "PYTHONPATH": str(tl_site)}
    wheel, out = _build_skbuild_wheel(tmp_path, env)
    assert f"at {tl_site / 'tl_aot' / 'cmake'} (found by find_package)" in out
    assert "expected a CUDA tensor" in _load_and_refuse_cpu_tensor(wheel, tmp_path, env, str(tl_site))
