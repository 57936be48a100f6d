"""A real build whose launcher code for one entry does not compile (a tl_aot bug, injected here): the rest still ships.

The fault is injected in-process where generated code is made (one entry's launch function gets a
declaration naming an undeclared identifier, as TileOPs' mHC kernels once got two parameters of
one name). ``--keep-going`` names the entry, leaves every arch of it out and links the others; the
header, manifest and launcher agree. Without it the build stops, naming the entry, not only the unit.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from support.helpers import KERNELS, fails, ok, tl_aot_here

pytest.importorskip("tilelang")

BAD = "axpy"
FAULT = "tl_aot_injected_fault"


SPEC = """[library]
name = "faulty"

[[entry]]
name = "add_one"
source = "{kernels}/elementwise.py"
function = "add_one"

[[entry]]
name = "axpy"
source = "{kernels}/elementwise.py"
function = "axpy"
args = {{ N = 4096 }}

[[entry]]
name = "two_kernels"
source = "{kernels}/multi.py"
function = "scale_then_shift"
args = {{ N = 4096 }}
"""


def _build(tmp_path: Path, cache_dir: Path, *flags: str):
    """``python -m tl_aot build --spec faulty.toml --arch 80 ...`` as documented, run in this process (where the fault is injected)."""
    spec = tmp_path / "faulty.toml"
    spec.write_text(SPEC.format(kernels=KERNELS.as_posix()))
    return tl_aot_here("build", "--spec", spec, "--arch", "80", "-o", tmp_path / "out", "--cache-dir", cache_dir, "-j", "2", *flags)


@pytest.fixture
def bad_launch_code(monkeypatch):
    """Entry :data:`BAD`'s launch function, wherever it is rendered (its unit, or compiled apart), refers to :data:`FAULT`."""
    from tl_aot.codegen import launcher_context

    real = launcher_context.entry_code

    def entry_code(e, index, label=""):
        code = real(e, index, label)
        return dataclasses.replace(code, locals=(*code.locals, f"const int64_t broken = {FAULT}")) if e.name == BAD else code

    monkeypatch.setattr(launcher_context, "entry_code", entry_code)


def test_keep_going_leaves_out_the_entry_whose_launcher_code_fails_and_ships_the_rest(tmp_path, cache_dir, bad_launch_code, monkeypatch):
    import tl_aot
    from tl_aot.codegen import launcher_units
    from tl_aot.pipeline.launcher_faults import ISSUES

    monkeypatch.setattr(launcher_units, "UNIT_WEIGHT", 9)  # one unit per entry (and the library's): the fault is in one of four
    log = ok(_build(tmp_path, cache_dir, "--keep-going")).stdout
    assert f"launcher: left out '{BAD}' (sm_80): its generated C++ does not compile" in log and FAULT in log
    assert f"left out 1 variant(s) that failed (--keep-going):\n  {BAD} (sm_80): its generated launcher code" in log

    out = tmp_path / "out"
    header = (out / "faulty.h").read_text()
    assert "add_one(" in header and "two_kernels(" in header and BAD not in header
    lib = tl_aot.load(out / "libfaulty.so")
    assert sorted(lib.entries) == ["add_one", "two_kernels"]
    assert [e.name for e in lib.manifest.entries] == ["add_one", "two_kernels"]
    (left,) = lib.manifest.left_out  # as the library records it (inspect lists it)
    assert (left.entry, left.arch) == (BAD, "sm_80")
    assert "generated launcher code does not compile, a tl_aot bug" in left.error and ISSUES in left.error
    assert f"error: ‘{FAULT}’" in left.error or f"error: '{FAULT}'" in left.error  # the compiler's own line
    assert not (out / ".tl_aot" / "faulty" / "stamp.json").exists()  # the next build tries it again


def test_without_keep_going_the_error_names_the_entry_and_nothing_is_written(tmp_path, cache_dir, bad_launch_code):
    err = fails(_build(tmp_path, cache_dir), "the launcher of libfaulty.so did not compile", f"entry '{BAD}':", FAULT, "tl_aot bug")
    assert "add_one" not in err and "two_kernels" not in err  # only the entry at fault is named
    assert not (tmp_path / "out" / "libfaulty.so").exists() and not (tmp_path / "out" / "faulty.h").exists()


def test_link_of_a_sharded_build_leaves_the_entry_out_with_keep_going_and_names_it_without(tmp_path, cache_dir, bad_launch_code):
    import tl_aot

    spec = tmp_path / "faulty.toml"
    spec.write_text(SPEC.format(kernels=KERNELS.as_posix()))
    for k in (1, 2):  # the README's sharded CI build: every shard, then link
        common = ("--arch", "80", "--cache-dir", cache_dir, "-j", "2")
        ok(tl_aot_here("build", "--spec", spec, *common, "--shard", f"{k}/2", "-o", tmp_path / f"part{k}"))
    parts = (tmp_path / "part1", tmp_path / "part2")
    fails(tl_aot_here("link", *parts, "-o", tmp_path / "plain", "--cache-dir", cache_dir), f"entry '{BAD}':", FAULT, "tl_aot bug")
    assert not (tmp_path / "plain" / "libfaulty.so").exists()
    log = ok(tl_aot_here("link", *parts, "-o", tmp_path / "out", "--cache-dir", cache_dir, "--keep-going")).stdout
    assert f"link: left out '{BAD}': its generated C++ does not compile" in log and FAULT in log
    lib = tl_aot.load(tmp_path / "out" / "libfaulty.so")
    assert sorted(lib.entries) == ["add_one", "two_kernels"] and BAD not in (tmp_path / "out" / "faulty.h").read_text()
    (left,) = lib.manifest.left_out
    assert (left.entry, left.arch) == (BAD, "sm_80") and "generated launcher code does not compile, a tl_aot bug" in left.error
