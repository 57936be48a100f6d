"""The C++ launcher runtime's own unit tests (tests/unit/cpp), built with the host compiler and run here."""

import re
import subprocess
from pathlib import Path

import pytest
from support.tree import files

from tl_aot.cuda.toolchain import RUNTIME_HEADERS, RUNTIME_INCLUDE, RUNTIME_SOURCES, RUNTIME_UNITS

HERE = Path(__file__).parent


def test_launcher_runtime_against_a_fake_driver(tmp_path):
    pytest.importorskip("tvm_ffi")
    from tl_aot.cuda.toolchain import cuda_include_dir, find_cxx, tvm_ffi_paths

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
    assert set(RUNTIME_UNITS) == set(files(src, "*.cc"))
    assert set(files(src, "*.h", at_least=0)) <= set(RUNTIME_SOURCES)
    # Every header a library's units include; torch_native.h is the companion's, keyed by codegen/torch_native.py.
    headers = set(files(RUNTIME_INCLUDE / "tl_aot", "*.h", recursive=True, at_least=10)) - {RUNTIME_INCLUDE / "tl_aot" / "torch_native.h"}
    assert headers <= set(RUNTIME_SOURCES)
    assert set(RUNTIME_HEADERS) == set(files(RUNTIME_INCLUDE / "tl_aot" / "runtime", "*.h", at_least=11))
    assert all(f.is_file() for f in RUNTIME_SOURCES)


def test_launcher_runtime_h_includes_every_part_in_order():
    """The umbrella generated code includes is the parts, in order; every part is in the same versioned namespace."""
    umbrella = (RUNTIME_INCLUDE / "tl_aot" / "launcher_runtime.h").read_text()
    parts = re.findall(r'^#include "(tl_aot/runtime/\w+\.h)"$', umbrella, re.M)
    assert parts == [str(h.relative_to(RUNTIME_INCLUDE)) for h in RUNTIME_HEADERS]
    versions = {h.name: re.findall(r"^inline namespace (v\d+) \{", h.read_text(), re.M) for h in RUNTIME_HEADERS}
    assert all(len(v) == 1 for v in versions.values()), versions
    assert len({v[0] for v in versions.values()}) == 1, versions


def test_each_runtime_header_compiles_on_its_own(tmp_path):
    """Each part of launcher_runtime.h includes what it uses (and keeps its guard): it compiles alone, included twice."""
    pytest.importorskip("tvm_ffi")
    from tl_aot.cuda.toolchain import cuda_include_dir, find_cxx, tvm_ffi_paths

    p = tvm_ffi_paths()
    flags = ["-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-I", str(RUNTIME_INCLUDE)]
    flags += ["-I", p["include"], "-I", p["dlpack"], "-I", cuda_include_dir()]
    procs = {}
    for h in RUNTIME_HEADERS:
        unit = tmp_path / f"{h.stem}.cc"
        unit.write_text(f'#include "tl_aot/runtime/{h.name}"\n#include "tl_aot/runtime/{h.name}"\n')
        procs[h.name] = subprocess.Popen([find_cxx(), *flags, str(unit)], stderr=subprocess.PIPE, text=True)
    errors = {name: proc.communicate()[1] for name, proc in procs.items()}
    failed = {name: err for name, err in errors.items() if procs[name].returncode != 0}
    assert not failed, "\n".join(f"{name}:\n{err}" for name, err in failed.items())
