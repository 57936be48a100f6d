"""Issue 35's front-end cases: each a clean error in the front end's own convention, never a traceback.

A path longer than the OS allows, user code that exits or raises KeyboardInterrupt, a dynamic
dimension named like a tensor, an unknown ``--arg``, bad setuptools ``entries``, a misspelt CMake
keyword after ``ARCHS``, and an up-to-date build into a read-only folder.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.builds import with_runtime
from support.helpers import in_folder

pytest.importorskip("tilelang")

ADD = """import sys
import tilelang.language as T


def add(N=256):
    if N == 512:
        sys.exit(5)

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] + 1.0

    return main
"""

INTERRUPTS = """import tilelang.language as T

raise KeyboardInterrupt
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory, session_runtime) -> Path:
    """The project the cases build, its cache (``<root>/cache``) holding the session's launcher runtime object.

    The cases are about messages; the runtime object depends on the toolchain alone, and compiling it
    here cost the module's first library ~2.5 s of CPU.
    """
    root = tmp_path_factory.mktemp("messages")
    with_runtime(root / "cache", session_runtime)
    (root / "k.py").write_text(ADD)
    (root / "ki.py").write_text(INTERRUPTS)
    return root


def _build(root: Path, *args) -> tuple[int, str]:
    """``python -m tl_aot build ...`` in this process (TileLang imported once): (exit status, stderr)."""
    from tl_aot.frontends import cli

    err = io.StringIO()
    with in_folder(root), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(["build", *args, "--arch", "90a", "-j", "1", "--cache-dir", str(root / "cache")])
    text = err.getvalue()
    assert "Traceback" not in text, text
    return code, text


def test_an_output_path_longer_than_the_os_allows_is_one_line(project):
    for long in ("y" * 300, "/".join(["x" * 200] * 25)):
        code, err = _build(project, "k.py:add", "-o", long)
        assert code == 1
        assert err.startswith("tl_aot: error: cannot create the output folder") and "the path is longer than the OS allows" in err


def test_a_factory_that_exits_is_a_lowering_error_at_its_line(project):
    code, err = _build(project, "k.py:add", "--arg", "N=512", "-o", "out")
    assert code == 1
    assert "entry 'add' (sm_90a): k.py:add called sys.exit(5) while tl_aot built it" in err
    assert f"at {project / 'k.py'}:7: sys.exit(5)" in err


def test_a_kernel_file_raising_keyboard_interrupt_is_named_not_an_interrupt(project):
    code, err = _build(project, "ki.py:add", "-o", "out")
    assert code == 1 and "interrupted" not in err
    assert "ki.py raised KeyboardInterrupt while tl_aot imported it" in err and f"at {project / 'ki.py'}:3" in err


def test_an_unknown_arg_lists_the_parameters_the_function_takes(project):
    code, err = _build(project, "k.py:add", "--arg", "Q=1", "-o", "out")
    assert code == 1
    assert "no level takes Q: add(N=256) has no parameter Q" in err


def test_an_up_to_date_build_never_touches_a_missing_torch_companion(project, monkeypatch):
    code, err = _build(project, "k.py:add", "-o", "uptodate")
    assert code == 0, err
    removed = []
    monkeypatch.setattr(Path, "unlink", lambda self, missing_ok=False: removed.append(self))
    code, err = _build(project, "k.py:add", "-o", "uptodate")
    assert code == 0, err
    assert not removed  # in a read-only folder this unlink was the EROFS error of issue 35


SETUP = """from setuptools import setup
from tl_aot.frontends.setuptools import TileLangExtension, build_ext
setup(name="x", ext_modules=[TileLangExtension("x._k", entries={entries})], cmdclass={{"build_ext": build_ext}})
"""


@pytest.mark.parametrize(
    "entries,needle",
    [
        ('[{"source": "k.py", "function": "add"}]', "missing key(s) name"),
        ('["add"]', "each entry must be a dict"),
        ('[{"name": "a", "source": "k.py", "function": "add", "archs": 90}]', "archs must be a list of archs"),
        ('[{"name": "a", "source": "k.py", "function": "add", "pass_configs": ["x"]}]', "pass_configs must be a table"),
        ('[{"name": "_tl_aot_torch", "source": "k.py", "function": "add"}]', "is reserved by tl_aot"),
    ],
)
def test_bad_setuptools_entries_are_error_lines_without_a_traceback(tmp_path, entries, needle):
    (tmp_path / "setup.py").write_text(SETUP.format(entries=entries))
    proc = subprocess.run([sys.executable, "setup.py", "build_ext"], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: TileLangExtension('x._k'): ")
    assert needle in proc.stderr


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_a_misspelt_cmake_keyword_after_archs_is_named(tmp_path):
    cmake_dir = Path(__file__).resolve().parents[2] / "cmake"
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(t LANGUAGES CXX)\n"
        f'find_package(Python COMPONENTS Interpreter REQUIRED)\ninclude("{cmake_dir}/TileLangAOT.cmake")\n'
        "add_tilelang_kernel(k SOURCE k.py FUNCTION add ARCHS 90a ARG M=1)\n"
    )
    proc = subprocess.run(
        ["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "b"), f"-DPython_EXECUTABLE={sys.executable}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0
    text = " ".join(proc.stderr.split())
    assert "unknown keyword 'ARG' (target k): it follows ARCHS, so it was read as one of its values; did you mean ARGS?" in text
    assert "is not an arch" not in text


def test_a_cubin_cut_short_by_a_tool_that_exits_0_is_never_linked_or_cached(project, monkeypatch):
    """The image step's tool (ptxas, run by nvcc on the PTX) writes half its cubin and exits 0, as on a nearly full disk."""
    from tl_aot.cuda import device_image
    from tl_aot.pipeline.cache import VariantCache

    real_run = device_image.run
    cutting = {"on": True}

    def run_then_cut(cmd, *args, **kwargs):
        result = real_run(cmd, *args, **kwargs)
        out = next((cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == "-o"), "")
        if cutting["on"] and out.endswith((".cubin", ".fatbin")):
            path = Path(kwargs.get("cwd") or ".") / out
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        return result

    monkeypatch.setattr(device_image, "run", run_then_cut)
    code, err = _build(project, "k.py:add", "--arg", "N=384", "-o", "cut")
    assert code == 1
    assert "entry 'add' (sm_90a): nvcc made a damaged image, not a complete cubin:" in err and "nothing was stored" in err
    assert not (project / "cut" / "libadd.so").exists()
    cache = project / "cache"
    for entry in (p for p in cache.iterdir() if not p.name.startswith(".")):
        assert VariantCache(cache).load(entry.name) is not None  # whatever is there is whole
    cutting["on"] = False
    code, err = _build(project, "k.py:add", "--arg", "N=384", "-o", "cut")
    assert code == 0, err
    import tl_aot

    assert tl_aot.load(project / "cut" / "libadd.so").signature("add").params[0].shape == (384,)
