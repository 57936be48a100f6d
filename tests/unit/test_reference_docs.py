"""docs/reference/ is what tools/gen_reference.py makes from the code now: no flag, key, keyword or variable drifts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "tools" / "gen_reference.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


gen = _generator()


@pytest.mark.parametrize("name", ["cli.md", "entry-keys.md", "cmake.md", "environment.md"])
def test_reference_page_is_generated_from_the_code_as_it_is(name):
    assert (ROOT / "docs" / "reference" / name).read_text() == gen.pages()[name], f"run python tools/gen_reference.py ({name} is stale)"


def test_every_variable_the_code_reads_is_documented():
    assert gen.check_environment() == []
    assert {"TL_AOT_ARCHS", "TL_AOT_PYTHON", "TL_AOT_TESTING_DRIVER_VERSION", "TL_AOT_SERVE"} <= gen.variables_read()


def test_an_undocumented_variable_stops_the_generator(tmp_path):
    for sub in ("tl_aot", "cmake"):
        (tmp_path / sub).mkdir()
    (tmp_path / "cmake" / "TileLangAOT.cmake").write_text((ROOT / "cmake" / "TileLangAOT.cmake").read_text())
    (tmp_path / "tl_aot" / "knob.py").write_text('import os\nos.environ.get("TL_AOT_NEW_KNOB")\n')
    problems = gen.check_environment(tmp_path)
    assert any("TL_AOT_NEW_KNOB is read by the code but not documented" in p for p in problems)
    with pytest.raises(SystemExit, match="TL_AOT_NEW_KNOB"):
        gen.environment_page(tmp_path)


def test_every_cli_flag_and_cmake_keyword_is_on_its_page():
    from tl_aot.config.entry_keys import ENTRY_TABLE
    from tl_aot.frontends.cli_parser import build_parser

    cli = gen.pages()["cli.md"]
    for name, sub in build_parser()._subparsers._group_actions[0].choices.items():
        assert f"## `{name}`" in cli
        for action in sub._actions:
            assert all(f"`{opt}" in cli for opt in action.option_strings if opt not in ("-h", "--help")), action
    cmake = gen.pages()["cmake.md"]
    for command, groups in gen._cmake_calls(ROOT):
        for kws in groups.values():
            for kw in kws:
                assert f"| `{kw}` |" in cmake, (command, kw)
    keys = gen.pages()["entry-keys.md"]
    assert all(f"| `{k.key}` |" in keys for k in ENTRY_TABLE)
