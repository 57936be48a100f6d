"""``run --serve``'s start-up hook loads the libraries when TileLang's JIT is imported, not at interpreter start."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tl_aot.serving.startup import environment


def _python(code: str, serve: str) -> subprocess.CompletedProcess:
    env = environment({"TL_AOT_SERVE": serve, "TL_AOT_SERVE_STRICT": "1"})
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=False)


def test_a_process_that_never_imports_tilelang_loads_nothing(tmp_path):
    missing = tmp_path / "libnothing.so"  # loading it would fail: the process must not try
    out = _python("import sys; print(sorted(m for m in ('tvm_ffi', 'torch', 'tl_aot.runtime.loader') if m in sys.modules))", str(missing))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]" and "tl_aot serve" not in out.stderr


def test_importing_tilelang_loads_the_libraries_and_installs_serving(tmp_path):
    pytest.importorskip("tilelang")
    missing = tmp_path / "libnothing.so"
    out = _python("import tilelang", str(missing))
    assert out.returncode == 1 and f"tl_aot serve: no such library: {missing}" in out.stderr
    assert "nothing can be served (strict)" in out.stderr and "Traceback" not in out.stderr


def test_a_library_that_fails_to_load_in_the_process_is_said_in_one_line(tmp_path):
    """Not strict: the reason once, and TileLang's JIT goes on (the program runs); strict stops it (above)."""
    pytest.importorskip("tilelang")
    fake = tmp_path / "libfake.so"
    fake.write_bytes(b"not a library")
    env = environment({"TL_AOT_SERVE": str(fake), "TL_AOT_SERVE_STRICT": "0"})
    code = "import tilelang; print('the program ran')"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0 and "the program ran" in out.stdout, out.stderr
    assert "tl_aot serve:" in out.stderr and "libfake.so" in out.stderr and "compiles every kernel" in out.stderr
    assert "Traceback" not in out.stderr
