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
    assert out.returncode != 0 and f"no such library: {missing}" in out.stderr
