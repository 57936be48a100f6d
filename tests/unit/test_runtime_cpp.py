"""The C++ launcher runtime's own unit tests (tests/unit/cpp), built with the host compiler and run here."""

import subprocess
from pathlib import Path

import pytest

from tl_aot.cuda.toolchain import RUNTIME_SOURCES, RUNTIME_UNITS

HERE = Path(__file__).parent


def test_launcher_runtime_against_a_fake_driver(tmp_path):
    pytest.importorskip("tvm_ffi")
    from tl_aot.cuda.toolchain import RUNTIME_INCLUDE, cuda_include_dir, find_cxx, tvm_ffi_paths

    p = tvm_ffi_paths()
    exe = tmp_path / "test_launcher_runtime"
    cmd = [
        find_cxx(), "-std=c++17", "-O1", "-g", "-pthread", "-Wall", "-Werror",
        "-I", str(RUNTIME_INCLUDE), "-I", p["include"], "-I", p["dlpack"], "-I", cuda_include_dir(),
        str(HERE / "cpp" / "test_launcher_runtime.cc"), *map(str, RUNTIME_UNITS),
        "-L" + p["libdir"], "-ltvm_ffi", "-ldl", "-Wl,-rpath," + p["libdir"], "-o", str(exe),
    ]  # fmt: skip
    build = subprocess.run(cmd, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("ok ") and int(run.stdout.split()[1]) >= 25


def test_runtime_sources_name_every_shipped_runtime_file():
    """Every unit in src/ is compiled and every runtime file keys the cached objects: a file left out would be stale."""
    src = RUNTIME_UNITS[0].parent
    assert set(RUNTIME_UNITS) == set(src.glob("*.cc"))
    assert set(src.glob("*.h")) <= set(RUNTIME_SOURCES)
    assert all(f.is_file() for f in RUNTIME_SOURCES)
