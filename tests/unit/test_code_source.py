"""A call key names a function's code by the source lines its code object spans: every line it runs, read once."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap

import pytest

from tl_aot.call_keys.code_source import code_source_digest, code_span

HELPER = '''
import math


def pad(n):
    """Round up to a tile."""
    return math.ceil(n / 64) * 64


def banner(kind):
    return (
        "kernel "
        + kind
    )


def ptx():
    return """
        mov.u32 %r0, 1;
    """
# a comment after the last function


X = 1
'''


@pytest.fixture
def helper(tmp_path, monkeypatch):
    """A user's module imported from a file, re-imported after each edit (as a reload does)."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def load(text: str = HELPER, name: str = "cs_helper"):
        (tmp_path / f"{name}.py").write_text(text)
        sys.modules.pop(name, None)
        importlib.invalidate_caches()
        return importlib.import_module(name)

    return load


def _digest(fn) -> str:
    return code_source_digest(fn.__code__, fn.__globals__)


def test_the_span_ends_at_the_last_line_of_code_even_when_it_holds_no_instruction_of_its_own(helper):
    m = helper()
    lines = HELPER.splitlines()
    first, last = code_span(m.banner.__code__)
    assert lines[first - 1] == "def banner(kind):" and lines[last - 1] == "    )"  # the closing bracket of a call
    first, last = code_span(m.ptx.__code__)
    assert lines[last - 1] == '    """'  # the end of a multi-line string constant
    first, last = code_span(m.pad.__code__)
    assert lines[first - 1] == "def pad(n):" and lines[last - 1].strip().startswith("return math.ceil")


@pytest.mark.parametrize(
    ("function", "old", "new"),
    [
        ("pad", "* 64", "* 128"),  # an edit in the body
        ("banner", "        + kind\n    )", "        + kind\n    ) + '!'"),  # on the last line, after the call's bracket
        ("ptx", "%r0, 1;\n", "%r0, 2;\n"),  # inside a multi-line string: a different constant
        ("pad", '"""Round up to a tile."""', '"""Round up."""'),  # the docstring (the function's __doc__)
    ],
)
def test_an_edit_to_what_a_function_runs_changes_its_digest(helper, function, old, new):
    assert old in HELPER
    before = _digest(getattr(helper(), function))
    after = _digest(getattr(helper(HELPER.replace(old, new)), function))
    assert before and after and before != after


def test_lines_outside_the_function_do_not_change_its_digest(helper):
    m = helper()
    before = {f: _digest(getattr(m, f)) for f in ("pad", "banner", "ptx")}
    edited = HELPER.replace("# a comment after the last function", "# another comment\n\n").replace("X = 1", "X = 2")
    m = helper("# a header line moves every function down\n" + edited)
    assert {f: _digest(getattr(m, f)) for f in ("pad", "banner", "ptx")} == before


def test_the_digest_is_the_same_in_a_fresh_process(helper, tmp_path):
    m = helper()
    here = [_digest(getattr(m, f)) for f in ("pad", "banner", "ptx")]
    code = textwrap.dedent(
        """
        import sys
        import cs_helper
        from tl_aot.call_keys.code_source import code_source_digest
        print(*(code_source_digest(f.__code__, f.__globals__) for f in (cs_helper.pad, cs_helper.banner, cs_helper.ptx)))
        """
    )
    env_path = [str(tmp_path), *sys.path]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONPATH": ":".join(env_path), "PATH": ""}
    )
    assert out.stdout.split() == here


def test_a_function_whose_source_cannot_be_read_has_no_digest():
    namespace: dict = {}
    exec(compile("def f(x):\n    return x + 1\n", "<generated>", "exec"), namespace)
    assert _digest(namespace["f"]) == ""


def test_before_python_3_11_the_span_is_inspects_block(helper):
    """Code objects carry end lines from 3.11; before, the block inspect finds by tokenizing gives the same spans here."""
    from tl_aot.call_keys.code_source import _block_span

    m = helper()
    assert [_block_span(getattr(m, f).__code__) for f in ("pad", "banner", "ptx")] == [
        code_span(getattr(m, f).__code__) for f in ("pad", "banner", "ptx")
    ]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="end positions from Python 3.11")
def test_a_span_read_off_the_function_alone_is_the_walk_over_every_code_object_defined_in_it():
    """The definitions inside a function (closures, prim_funcs, lambdas, classes, comprehensions) end within its span."""
    import types
    from operator import itemgetter
    from pathlib import Path

    def walk_span(code):
        ends = [end for c in nested(code) for end in map(itemgetter(1), c.co_positions()) if end is not None]
        return (code.co_firstlineno, max(ends))

    def nested(code):
        yield code
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                yield from nested(const)

    here = Path(__file__).parents[1]
    files = [*sorted((here.parent / "tl_aot").rglob("*.py")), *sorted((here / "kernels").glob("*.py"))]
    seen = with_nested = 0
    for path in files:
        module = compile(path.read_text(), str(path), "exec")
        for code in nested(module):
            if code is not module:
                assert code_span(code) == walk_span(code), (path, code.co_qualname)
                seen += 1
                with_nested += any(isinstance(c, types.CodeType) for c in code.co_consts)
    assert seen > 2000 and with_nested > 200  # every function of the package, hundreds holding definitions of their own


@pytest.mark.skipif(sys.version_info < (3, 11), reason="debug ranges from Python 3.11")
def test_without_debug_ranges_a_function_has_no_span_and_no_digest(tmp_path):
    """``-X no_debug_ranges`` leaves end lines equal to first lines: a multi-line string's tail would be unseen, so no key."""
    (tmp_path / "cs_nodebug.py").write_text(HELPER)
    code = (
        "import cs_nodebug\nfrom tl_aot.call_keys.code_source import code_source_digest, code_span\n"
        "f = cs_nodebug.ptx\nprint(code_span(f.__code__), repr(code_source_digest(f.__code__, f.__globals__)))"
    )
    env = {"PYTHONPATH": ":".join([str(tmp_path), *sys.path]), "PATH": ""}
    out = subprocess.run([sys.executable, "-X", "no_debug_ranges", "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["None", "''"]


def test_each_source_file_is_read_from_disk_once_and_read_again_after_an_edit(helper):
    """What a served process's report counts: a kernel file read in the first lookup of a function of it, not per function."""
    import linecache

    from tl_aot.call_keys.code_source import source_reads

    m = helper(name="cs_reads")
    linecache.cache.pop(m.__file__, None)
    files = source_reads.files
    assert _digest(m.pad) and _digest(m.banner) and _digest(m.ptx)
    assert source_reads.files == files + 1  # three functions, one file read
    edited = helper(HELPER.replace("* 64", "* 128") + "\n# longer: another size, so the edit shows whatever the clock\n", name="cs_reads")
    assert _digest(edited.pad) != _digest(m.pad) and source_reads.files == files + 2  # the edited file read again
