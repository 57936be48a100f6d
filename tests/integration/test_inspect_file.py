"""``inspect`` reads a library's manifest from its file's sections: no dlopen, tvm-ffi or torch; checked as loading checks it.

A library built before the manifest had sections of its own is read by loading it, as ``inspect``
always did: made here by renaming the sections of a real library, which is all such a library lacks.
``verify`` reads manifests the same way, and a build found up to date reads none: neither imports
torch either (the commands that need no library: ``tests/unit/test_cli_imports.py``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support.builds import TESTLIB_SPEC
from support.helpers import fails, ok, tl_aot_here
from support.imports import HEAVY, tl_aot_imports

import tl_aot
from tl_aot.common.metadata_json import to_json
from tl_aot.frontends.inspect_text import manifest_json
from tl_aot.runtime.elf import MANIFEST_INDEX_SECTION, MANIFEST_TEXT_SECTION

pytest.importorskip("tilelang")


def _texts(path: Path) -> tuple[str, str]:
    """(manifest, index) as the loaded library's exports return them."""
    module = tl_aot.load(path)._module
    return str(module["tl_aot_manifest"]()), str(module["tl_aot_manifest_index"]())


def _edited(src: Path, dst: Path, old: bytes, new: bytes) -> Path:
    """A copy of ``src`` with the one occurrence of ``old`` replaced by ``new`` (same length: every offset kept)."""
    data = src.read_bytes()
    assert len(old) == len(new) and data.count(old) == 1, (old, data.count(old))
    dst.write_bytes(data.replace(old, new))
    shutil.copymode(src, dst)
    return dst


def test_inspect_as_a_process_imports_neither_tvm_ffi_nor_torch(testlib_path):
    proc, imported = tl_aot_imports("inspect", "--json", testlib_path)
    assert not imported & HEAVY, sorted(imported & HEAVY)
    assert json.loads(ok(proc).stdout) == json.loads(manifest_json(to_json(tl_aot.load(testlib_path).manifest)))  # what loading reads


def test_an_altered_manifest_or_index_is_refused_by_inspect_with_loadings_words(testlib_path, tmp_path):
    manifest, index = _texts(testlib_path)
    gemm = '"name": "gemm_f16"'
    assert gemm in manifest and '"gemm_f16"' in index
    lib = _edited(testlib_path, tmp_path / "libtl_aot_testlib.so", manifest.encode(), manifest.replace(gemm, gemm[:-2] + '9"', 1).encode())
    words = "its manifest was altered after the build (its SHA-256 differs from the one its index records); rebuild the library"
    fails(tl_aot_here("inspect", lib), str(lib), words)
    with pytest.raises(tl_aot.LibraryError, match=r"differs from the one its index records"):
        tl_aot.load(lib).manifest  # noqa: B018 (the property reads and checks it)
    lib = _edited(testlib_path, tmp_path / "libindex.so", index.encode(), index.replace('"gemm_f16"', '"gemm_f19"', 1).encode())
    fails(tl_aot_here("inspect", lib), "its manifest was altered after the build (its SHA-256 differs from the one recorded then)")


def test_a_library_without_the_sections_is_inspected_by_loading_it(testlib_path, tmp_path):
    names = [MANIFEST_INDEX_SECTION, MANIFEST_TEXT_SECTION]
    old = testlib_path.read_bytes()
    for name in names:  # what a library built before these sections lacks: their names (the texts stay, exported)
        assert old.count(f"{name}\0".encode()) == 1
        old = old.replace(f"{name}\0".encode(), f"{name[:-1]}~\0".encode(), 1)
    lib = tmp_path / "libtl_aot_testlib.so"
    lib.write_bytes(old)
    from tl_aot.runtime.elf import library_sections

    assert library_sections(lib, tuple(names))[1] == {}
    assert ok(tl_aot_here("inspect", lib)).stdout == ok(tl_aot_here("inspect", testlib_path)).stdout
    assert '"library": "tl_aot_testlib"' in ok(tl_aot_here("inspect", "--json", lib)).stdout


def test_verify_reads_the_manifests_without_loading_them(testlib_path, tmp_path):
    record = tmp_path / "requests.json"
    record.write_text('{"kernels": {}, "schema": 1}\n')  # a workload that compiled nothing: every variant unreached
    proc, imported = tl_aot_imports("verify", testlib_path, "--record", record)
    assert proc.returncode == 1 and "NOT REACHED gemm_f16 (sm_90a)" in proc.stdout and ": FAILED" in proc.stdout, proc.stdout + proc.stderr
    assert not imported & HEAVY, sorted(imported & HEAVY)


@pytest.mark.skipif(bool(os.environ.get("TL_AOT_TEST_LIBDIR")), reason="a prebuilt test library: built elsewhere, not up to date here")
def test_a_build_found_up_to_date_imports_nothing_heavy(testlib_path, cache_dir):
    out = testlib_path.parent
    proc, imported = tl_aot_imports("build", "--spec", TESTLIB_SPEC, "-o", out, "--cache-dir", cache_dir)
    assert "libtl_aot_testlib.so is up to date" in ok(proc).stdout
    assert not imported & HEAVY, sorted(imported & HEAVY)
