"""Real builds with hostile names and paths: macro-named parameters build end to end, a kernel folder
whose name holds a newline gives an inert wheel loader, and a depfile that cannot spell it is refused."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tilelang")

from support.helpers import place_torch_glue  # noqa: E402

from tl_aot.codegen.render import render_loader  # noqa: E402
from tl_aot.common.errors import SpecError  # noqa: E402
from tl_aot.pipeline.library import build_library  # noqa: E402
from tl_aot.spec import KernelSpec, LibrarySpec  # noqa: E402

KERNEL = Path(__file__).parents[1] / "kernels" / "hostile.py"
#: A folder name that, pasted raw into Python, would run code on import.
EVIL = "evil\nopen('PWNED', 'w').write('x')  # "


@pytest.fixture(scope="module")
def hostile_build(tmp_path_factory, cache_dir):
    """``libmacros.so`` from ``hostile.py:macro_names`` (params NULL, SIZE_MAX, errno; dim EOF), in a newline-named folder."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "pyproject.toml").write_text("")  # the project: paths are recorded from here, the folder name included
    src = root / EVIL / "hostile.py"
    src.parent.mkdir()
    shutil.copy(KERNEL, src)
    lib = LibrarySpec("macros", (KernelSpec.create(name="scale", source=src, function="macro_names", archs=["80"]),))
    out = root / "out"
    return src, build_library(lib, out_dir=out, cache_dir=cache_dir, log=None)


def test_macro_named_params_build_end_to_end(hostile_build, tmp_path):
    """The library, its header and manifest keep the user's names; a program including libc headers first compiles."""
    tvm_ffi = pytest.importorskip("tvm_ffi")  # noqa: F841
    from tl_aot.cuda.toolchain import find_cxx, tvm_ffi_paths

    _, result = hostile_build
    assert result.library.is_file()
    (entry,) = result.manifest.entries
    assert [p.name for p in entry.params] == ["NULL", "SIZE_MAX", "errno"]
    assert [s.name for s in entry.symbols] == ["EOF"]
    header = result.header.read_text()
    assert "void scale(::tvm::ffi::TensorView NULL_, ::tvm::ffi::TensorView SIZE_MAX_, float errno_)" in header
    prog = tmp_path / "prog.cc"
    prog.write_text(f'#include <cstdio>\n#include <climits>\n#include <cerrno>\n#include "{result.header}"\nint main() {{ return 0; }}\n')
    p = tvm_ffi_paths()
    cmd = [find_cxx(), "-std=c++17", "-fsyntax-only", "-I", p["include"], "-I", p["dlpack"], str(prog)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_newline_in_the_kernel_path_gives_an_inert_wheel_loader(hostile_build, tmp_path):
    """The loader's first comment names the path; importing the package runs none of it."""
    _, result = hostile_build
    assert "\n" in result.manifest.entries[0].source
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(result.library, pkg / "lib_kernels.so")
    (pkg / "_kernels.py").write_text(render_loader(result.manifest, module="pkg._kernels", library_file="lib_kernels.so"))
    place_torch_glue(pkg)
    assert "evil\\nopen(" in (pkg / "_kernels.py").read_text().splitlines()[0]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    code = "import pkg._kernels as k; print(sorted(k.__all__))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "'scale'" in proc.stdout
    assert not (tmp_path / "PWNED").exists()


def test_depfile_that_cannot_spell_the_kernel_path_is_refused_before_building(hostile_build):
    src, result = hostile_build
    before = result.library.read_bytes()
    lib = LibrarySpec("macros", (KernelSpec.create(name="scale", source=src, function="macro_names", archs=["80"]),))
    with pytest.raises(SpecError, match="cannot be written to a Makefile depfile"):
        build_library(lib, out_dir=result.library.parent, depfile=result.library.parent / "macros.d", log=None, force=True)
    assert result.library.read_bytes() == before
    assert not (result.library.parent / "macros.d").exists()
