"""The documentation's blocks are all accounted for (tests/support/doc_blocks.py), and the README stays a front page.

Cheap checks of every page; the ``run`` blocks themselves run in tests/integration/test_docs_cpu.py
(and tests/gpu/test_docs_gpu.py).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from support.doc_blocks import ROOT, SEEDS, Marker, MarkerError, all_blocks, blocks_of, parse_marker, scenario_blocks

BLOCKS = all_blocks()
CI_FILES = (ROOT / ".ci" / "run", ROOT / ".github" / "workflows" / "release.yml")


def test_every_block_of_the_docs_says_how_it_is_tested():
    unmarked = [
        f"{b.where} ({b.lang or 'text'}): {b.text.splitlines()[0][:60] if b.text.strip() else ''}" for b in BLOCKS if b.marker is None
    ]
    assert not unmarked, "blocks with no <!-- docs-test: ... --> marker above them:\n" + "\n".join(unmarked)


def test_the_readme_is_a_front_page():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


def test_every_scenario_runs_something_and_every_seed_is_used():
    scenarios = scenario_blocks()
    idle = [name for name, blocks in scenarios.items() if not any(b.marker.kind == "run" for b in blocks)]
    assert not idle, f"scenarios that only write files: {idle}"
    assert set(SEEDS) <= set(scenarios), f"seeds of no scenario: {set(SEEDS) - set(scenarios)}"


def test_a_repeated_block_equals_the_block_it_repeats():
    files = {(b.marker.get("scenario"), b.marker.get("path")): b for b in BLOCKS if b.marker and b.marker.kind == "file"}
    for b in BLOCKS:
        if b.marker and b.marker.kind == "same":
            scenario, _, path = b.marker.get("as").partition(":")
            original = files.get((scenario, path))
            assert original is not None, f"{b.where}: no file block {path} in scenario {scenario}"
            assert b.text == original.text, f"{b.where} differs from {original.where}, which it repeats"


def test_covering_tests_exist():
    for b in BLOCKS:
        if b.marker and b.marker.kind == "covered-by":
            path, _, name = b.marker.get("test").partition("::")
            f = ROOT / path
            assert f.is_file(), f"{b.where}: covered by {path}, which does not exist"
            if name:
                assert re.search(rf"^def {re.escape(name)}\(", f.read_text(), re.M), f"{b.where}: {path} has no test {name}"


def _words(text: str) -> list:
    try:
        return shlex.split(text)
    except ValueError:  # a line of a larger shell construct (a quote closed on a later line)
        return text.split()


def _commands(text: str) -> list:
    """A block's commands, one per line or ``&&`` part, comments and ``-q`` left out."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            out += [" ".join(w for w in _words(part) if w != "-q") for part in line.split("&&")]
    return [c for c in out if c]


def test_install_commands_are_the_ones_ci_runs():
    ran = [c for f in CI_FILES if f.is_file() for c in _commands(f.read_text())]
    for b in BLOCKS:
        if b.marker and b.marker.kind == "ci":
            for cmd in _commands(b.text):
                assert any(r.startswith(cmd) for r in ran), f"{b.where}: `{cmd}` is run by neither .ci/run nor the release workflow"


def test_markers_are_strict(tmp_path):
    assert parse_marker('run scenario=a expect="two words" gpu', "x") == Marker(
        "run", (("scenario", "a"), ("expect", "two words")), frozenset({"gpu"})
    )
    for bad, why in (
        ("walk scenario=a", "kind"),
        ("run", "needs scenario"),
        ("show", "needs reason"),
        ("run scenario=a path=x", "takes no 'path'"),
    ):
        with pytest.raises(MarkerError, match=why):
            parse_marker(bad, "x")
    page = Path("page.md")
    (tmp_path / page).write_text("<!-- docs-test: show reason=x -->\n\ntext\n```bash\nls\n```\n")
    with pytest.raises(MarkerError, match="right above"):
        blocks_of(page, tmp_path)
    (tmp_path / page).write_text("```bash\nls\n```\n<!-- docs-test: show reason=x -->\n")
    with pytest.raises(MarkerError, match="no code block"):
        blocks_of(page, tmp_path)
    (tmp_path / page).write_text("<!-- docs-test: run scenario=s -->\n```bash\nls\n```\n```python\nx = 1\n```\n")
    first, second = blocks_of(page, tmp_path)
    assert first.marker.kind == "run" and first.text == "ls\n" and second.marker is None
