"""The native torch companion: generated source (golden, compiles warning-free), its ops, the options that ask for it."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from support.golden import GOLDEN, REGEN, golden_manifest

from tl_aot.codegen.launcher_context import library_code
from tl_aot.codegen.torch_native import companion_ops, companion_path, render_companion, torch_include_dir
from tl_aot.common.errors import SpecError
from tl_aot.runtime import torch_ops
from tl_aot.spec import load_spec_file


def test_companion_matches_golden():
    assert render_companion(golden_manifest(), header_name="golden.h") == (GOLDEN / "torch_companion.cc.ref").read_text(), f"run {REGEN}"


def _unsized(m):
    """``m`` as the launcher stage has it: every image size still 0 (nvcc is not done)."""
    return replace(m, entries=tuple(replace(e, variants=tuple(replace(v, image_bytes=0) for v in e.variants)) for e in m.entries))


def test_a_fresh_build_renders_its_companion_from_the_launcher_stages_pieces():
    """The launcher stage renders the companion's source from its own pieces, before image sizes are known: the same
    source as the finished library's manifest gives."""
    m = golden_manifest()
    signatures = _unsized(m)
    assert signatures != m
    code = library_code(signatures, f"{m.library}.h")
    assert render_companion(signatures, header_name="golden.h", code=code) == render_companion(m, header_name="golden.h")


def test_one_op_per_export_with_the_python_registrations_schema():
    m = golden_manifest()
    raw = json.loads((GOLDEN / "manifest.json").read_text())
    firsts = {}
    for e in raw["entries"]:
        firsts.setdefault(e.get("export") or e["name"], e)
    ops = companion_ops(m)
    assert [op.name for op in ops] == list(firsts)  # norm's three specialisations are one op
    assert {op.name: op.schema for op in ops} == {name: torch_ops.schema_of(e) for name, e in firsts.items()}
    by = {op.name: op for op in ops}
    assert by["axpy_first"].returns and not by["two"].returns
    assert by["axpy_first"].args == ("c.tensor(0)", "c.real(1)", "c.tensor(2)")  # the inputs alone: outputs come back
    assert by["tile_copy"].args[-1] == 'c.integer<int32_t>(2, "log_tile")'  # range-checked into the C++ type
    assert by["arange"].tensorless and not by["add_one"].tensorless


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_the_golden_companion_compiles_without_a_warning(tmp_path):
    pytest.importorskip("torch")
    tvm_ffi = pytest.importorskip("tvm_ffi")
    from tvm_ffi import libinfo

    shutil.copy(GOLDEN / "header.h.ref", tmp_path / "golden.h")
    src = tmp_path / "golden_torch.cc"
    src.write_text(render_companion(golden_manifest(), header_name="golden.h"))
    inc = Path(libinfo.find_include_path())
    cmd = ["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-isystem", str(torch_include_dir())]
    cmd += ["-isystem", str(inc), "-isystem", str(Path(libinfo.find_dlpack_include_path())), "-I", str(tmp_path)]
    cmd += ["-I", str(Path(__file__).parents[2] / "tl_aot" / "include"), str(src)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr[-3000:] + f" (tvm_ffi {tvm_ffi.__version__})"


def test_the_companion_sits_beside_its_library():
    assert companion_path("/x/lib/libops.so") == Path("/x/lib/libops_torch.so")


def _spec(tmp_path, library: str) -> Path:
    (tmp_path / "k.py").write_text("def f():\n    pass\n")
    p = tmp_path / "lib.toml"
    p.write_text(textwrap.dedent(f"[library]\n{library}\n[[entry]]\nname = 'f'\nsource = 'k.py'\nfunction = 'f'\narchs = ['90a']\n"))
    return p


def test_spec_library_table_turns_torch_ops_on(tmp_path):
    assert load_spec_file(_spec(tmp_path, "name = 'a'\ntorch_ops = true")).torch_ops is True
    assert load_spec_file(_spec(tmp_path, "name = 'a'")).torch_ops is False
    with pytest.raises(SpecError, match="torch_ops must be true or false"):
        load_spec_file(_spec(tmp_path, "name = 'a'\ntorch_ops = 'yes'"))


def test_register_refuses_an_unknown_backend_or_native_without_a_companion():
    pytest.importorskip("torch")
    m = json.loads((GOLDEN / "manifest.json").read_text())
    with pytest.raises(ValueError, match="backend must be 'auto', 'native' or 'python'"):
        torch_ops.register({}, m, "tln_bad", backend="fast")
    with pytest.raises(ValueError, match="needs the library's companion"):
        torch_ops.register({}, m, "tln_bad", backend="native")


def test_a_companion_that_cannot_load_falls_back_to_python_and_says_so(tmp_path, caplog):
    pytest.importorskip("torch")
    m = json.loads((GOLDEN / "manifest.json").read_text())
    m["library"] = "golden_fallback"
    broken = tmp_path / "libgolden_torch.so"
    broken.write_bytes(b"not a shared library")
    fns = {e.get("export") or e["name"]: (lambda *a: None) for e in m["entries"]}
    with pytest.raises(RuntimeError, match="the native companion cannot serve them"):
        torch_ops.register(fns, m, "tln_insist", companion=broken, backend="native")
    with caplog.at_level("DEBUG", logger="tl_aot.runtime.torch_ops"):
        ops = torch_ops.register(fns, m, "tln_fallback", companion=broken)
    assert ops.backend == "python" and torch_ops.backend_of("tln_fallback") == "python"
    assert "python registration (cannot load" in caplog.text


def test_torch_before_2_10_uses_the_python_registration(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch, "__version__", "2.9.1")
    assert "predates the LibTorch Stable ABI" in torch_ops._load_companion(torch, tmp_path / "libx_torch.so", "tln_old")
