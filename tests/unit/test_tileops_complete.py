"""bench/tileops_complete.py: which test files a capture stopped at its time limit finished, over several calls."""

from __future__ import annotations

from bench import tileops_complete

COLLECTED = "tests/a.py::test_one\ntests/a.py::test_two\ntests/b.py::test_x[1]\ntests/b.py::test_x[2]\ntests/c.py::test_c\n"


def _run(tmp_path, capsys, *logs: str, missing: bool = False) -> list[str]:
    (tmp_path / "collected.txt").write_text(COLLECTED)
    paths = []
    for i, text in enumerate(logs):
        paths.append(str(tmp_path / f"capture.{i}.log"))
        (tmp_path / f"capture.{i}.log").write_text(text)
    argv = ["tileops_complete", *(["--missing"] if missing else []), str(tmp_path / "collected.txt"), *paths]
    assert tileops_complete.main(argv) == 0
    return [line for line in capsys.readouterr().out.splitlines() if line]


def test_a_file_cut_short_is_not_complete(tmp_path, capsys):
    log = "PASSED tests/a.py::test_one\nPASSED tests/a.py::test_two\nPASSED tests/b.py::test_x[1]\n"
    assert _run(tmp_path, capsys, log) == ["tests/a.py"]


def test_skips_count_by_their_number(tmp_path, capsys):
    log = "SKIPPED [2] tests/b.py:10: needs sm_100\nFAILED tests/c.py::test_c - AssertionError\n"
    assert _run(tmp_path, capsys, log) == ["tests/b.py", "tests/c.py"]


def test_a_second_call_finishes_what_the_first_cut_short(tmp_path, capsys):
    first = "PASSED tests/a.py::test_one\nPASSED tests/a.py::test_two\nPASSED tests/b.py::test_x[1]\n"
    second = "PASSED tests/b.py::test_x[1]\nPASSED tests/b.py::test_x[2]\n"
    assert _run(tmp_path, capsys, first, second) == ["tests/a.py", "tests/b.py"]
    assert _run(tmp_path, capsys, first, second, missing=True) == ["tests/c.py"]


def test_partial_runs_of_one_file_are_not_added_up(tmp_path, capsys):
    """Two calls each cut tests/b.py short after its first test: it is still missing (its second test never ran)."""
    cut = "PASSED tests/b.py::test_x[1]\n"
    assert "tests/b.py" in _run(tmp_path, capsys, cut, cut, missing=True)
