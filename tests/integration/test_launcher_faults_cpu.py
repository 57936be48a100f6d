"""A real build whose launcher code for one entry does not compile (a tl_aot bug, injected here): the rest still ships.

The fault is injected in-process where generated code is made (one entry's launch function gets a
declaration naming an undeclared identifier, as TileOPs' mHC kernels once got two parameters of
one name). ``--keep-going`` names the entry, leaves every arch of it out and links the others; the
header, manifest and launcher agree. Without it the build stops, naming the entry, not only the unit.
"""

from __future__ import annotations

import dataclasses

import pytest
from support.helpers import KERNELS

pytest.importorskip("tilelang")

BAD = "axpy"
FAULT = "tl_aot_injected_fault"


def _library():
    from tl_aot.spec import KernelSpec, LibrarySpec

    def entry(name: str, source: str, function: str, **args):
        return KernelSpec.create(name=name, source=KERNELS / source, function=function, args=args, archs=["80"])

    return LibrarySpec(
        "faulty",
        (
            entry("add_one", "elementwise.py", "add_one"),
            entry(BAD, "elementwise.py", "axpy", N=4096),
            entry("two_kernels", "multi.py", "scale_then_shift", N=4096),
        ),
    )


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
    from tl_aot.pipeline.library import build_library

    monkeypatch.setattr(launcher_units, "UNIT_WEIGHT", 9)  # one unit per entry (and the library's): the fault is in one of four
    lines: list[str] = []
    result = build_library(_library(), out_dir=tmp_path, cache_dir=cache_dir, keep_going=True, jobs=2, log=lines.append)

    assert [e.name for e in result.manifest.entries] == ["add_one", "two_kernels"]
    (left,) = result.left_out
    assert (left.entry, left.arch) == (BAD, "sm_80")
    assert "generated launcher code does not compile, a tl_aot bug" in left.error and ISSUES in left.error
    assert f"error: ‘{FAULT}’" in left.error or f"error: '{FAULT}'" in left.error  # the compiler's own line
    log = "\n".join(lines)
    assert f"launcher: left out '{BAD}' (sm_80): its generated C++ does not compile" in log and FAULT in log
    assert f"left out 1 variant(s) that failed (--keep-going):\n  {BAD} (sm_80): its generated launcher code" in log

    header = result.header.read_text()
    assert "add_one(" in header and "two_kernels(" in header and BAD not in header
    lib = tl_aot.load(result.library)
    assert sorted(lib.entries) == ["add_one", "two_kernels"]
    assert lib.manifest.left_out == result.left_out  # as the library itself records it (inspect lists it)
    assert not (tmp_path / ".tl_aot" / "faulty" / "stamp.json").exists()  # the next build tries it again


def test_without_keep_going_the_error_names_the_entry_and_nothing_is_written(tmp_path, cache_dir, bad_launch_code):
    from tl_aot.common.errors import CompileError
    from tl_aot.pipeline.library import build_library

    with pytest.raises(CompileError) as caught:
        build_library(_library(), out_dir=tmp_path, cache_dir=cache_dir, jobs=2, log=None)
    text = str(caught.value)
    assert caught.value.entry == BAD
    assert "the launcher of libfaulty.so did not compile" in text and f"entry '{BAD}':" in text and FAULT in text
    assert "add_one" not in text and "two_kernels" not in text  # only the entry at fault is named
    assert not (tmp_path / "libfaulty.so").exists() and not (tmp_path / "faulty.h").exists()
