"""Where apache-tvm-ffi's headers, library and CMake files are (tl_aot.cuda.toolchain.tvm_ffi_paths), found without importing it.

Every build asks (the runtime object's key, the host compile, the link); ``import tvm_ffi`` loads
the FFI and torch, ~1 s that a build lowering nothing (every variant cached, a link, a no-op CMake
step) would otherwise pay for these paths alone.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tl_aot.cuda import toolchain

pytest.importorskip("tvm_ffi")

_ASK = """
import json, sys
from tl_aot.cuda.toolchain import tvm_ffi_paths
paths = tvm_ffi_paths()
print(json.dumps({"paths": paths, "imported": sorted(m for m in ("tvm_ffi", "torch") if m in sys.modules)}))
"""


def _libinfo_answers() -> dict[str, str]:
    """The paths as tvm_ffi itself gives them, from the imported package."""
    from tvm_ffi import libinfo

    return toolchain.paths_from(libinfo)


def test_the_paths_are_tvm_ffis_own_and_asking_imports_neither_tvm_ffi_nor_torch():
    proc = subprocess.run([sys.executable, "-c", _ASK], capture_output=True, text=True, check=True)
    answer = json.loads(proc.stdout)
    assert answer["imported"] == [], f"asking for tvm-ffi's paths imported {answer['imported']}"
    assert answer["paths"] == _libinfo_answers()
    assert Path(answer["paths"]["lib"]).is_file() and (Path(answer["paths"]["include"]) / "tvm" / "ffi").is_dir()


def test_a_package_without_libinfo_py_is_asked_through_its_import(monkeypatch, tmp_path):
    """Another layout of tvm_ffi (no ``libinfo.py`` beside ``__init__``): the package's own ``libinfo``, imported."""
    real = importlib.util.find_spec

    def elsewhere(name, *args):
        spec = real(name, *args)
        if name == "tvm_ffi" and spec is not None:
            spec.submodule_search_locations = [str(tmp_path)]  # a folder without libinfo.py
        return spec

    monkeypatch.setattr(importlib.util, "find_spec", elsewhere)
    toolchain.tvm_ffi_paths.cache_clear()
    try:
        assert toolchain.tvm_ffi_paths() == _libinfo_answers()
    finally:
        toolchain.tvm_ffi_paths.cache_clear()


def test_no_tvm_ffi_is_named_with_its_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tvm_ffi" else real(name, *a))
    toolchain.tvm_ffi_paths.cache_clear()
    try:
        with pytest.raises(toolchain.ToolchainNotFound, match="pip install apache-tvm-ffi"):
            toolchain.tvm_ffi_paths()
    finally:
        toolchain.tvm_ffi_paths.cache_clear()
