"""A library with one sub-byte (int4) tensor entry: that entry is refused while lowering, never by the launcher stage.

TileLang's int4 GEMM example (``examples/gemm_int4``) declares ``T.Tensor((M, K), T.int4)``
parameters. tl_aot's launcher has no DLPack check for a sub-byte tensor; it used to find that out
while rendering the launcher, after every variant was built, and fail the whole library even with
``--keep-going``. The dtype is now checked with the signature, so the one variant fails alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.helpers import KERNELS, fails, ok, tl_aot_here

pytest.importorskip("tilelang")

SPEC = """[library]
name = "subbyte"

[[entry]]
name = "add_one"
source = "{kernels}/elementwise.py"
function = "add_one"

[[entry]]
name = "int4_copy"
source = "{kernels}/subbyte.py"
function = "int4_copy"
"""


def _build(tmp_path: Path, cache_dir: Path, *flags: str):
    spec = tmp_path / "subbyte.toml"
    spec.write_text(SPEC.format(kernels=KERNELS.as_posix()))
    return tl_aot_here("build", "--spec", spec, "--arch", "80", "-o", tmp_path / "out", "--cache-dir", cache_dir, *flags)


def test_keep_going_leaves_out_the_int4_entry_and_ships_the_rest(tmp_path, cache_dir):
    import tl_aot

    log = ok(_build(tmp_path, cache_dir, "--keep-going")).stdout
    assert (
        "left out 1 variant(s) that failed (--keep-going):\n  int4_copy (sm_80): parameter 'A': tensor dtype int4 is not supported" in log
    )
    lib = tl_aot.load(tmp_path / "out" / "libsubbyte.so")
    assert sorted(lib.entries) == ["add_one"]
    assert "int4_copy" not in (tmp_path / "out" / "subbyte.h").read_text()


def test_without_keep_going_the_build_names_the_entry_and_the_dtype(tmp_path, cache_dir):
    fails(_build(tmp_path, cache_dir), "int4_copy", "parameter 'A': tensor dtype int4 is not supported by tl_aot launchers")
    assert not (tmp_path / "out" / "libsubbyte.so").exists()
