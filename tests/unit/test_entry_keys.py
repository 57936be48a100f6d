"""One table of entry keys: setup.py takes every key a spec file takes and means the same; CMake and the CLI follow it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tl_aot.config.entry_keys import ENTRY_KEYS, ENTRY_TABLE
from tl_aot.frontends.setuptools import TileLangExtension
from tl_aot.spec import load_spec_file

CMAKE = Path(__file__).resolve().parents[2] / "cmake" / "TileLangAOT.cmake"
REQUIRED = ("name", "source", "function")
#: One value of every optional key, spelled the same in a JSON spec file and in setup.py.
SAMPLES = {
    "args": {"N": 1024},
    "factory_args": {"N": 1024},
    "jit_args": {"block": 128},
    "select": "fwd",
    "imports": ["json"],
    "archs": ["90a"],
    "pass_configs": {"tl.disable_tma_lower": True},
    "compile_flags": ["-lineinfo"],
    "device": "A100-PCIe",
    "out_idx": [-1],
    "backend": "cutedsl",
    "tune": [{"block": 64}, {"block": 128}],
    "specialisations": [{"args": {"N": 1024}}, {"args": {"N": 2048}, "fallback": True}],
    "specializations": [{"args": {"N": 1024}}, {"args": {"N": 2048}, "fallback": True}],
}
#: add_tilelang_kernel() keywords about the library or the build, not an entry.
LIBRARY_KEYWORDS = {"SPEC", "CAPTURE", "TUNE_FILE", "OUTPUT_DIRECTORY", "HEADER_DIRECTORY", "CACHE_DIR", "JOBS", "JOB_POOL", "DEPENDS"}
LIBRARY_KEYWORDS |= {"CACHE_URL", "CLUSTER"}  # builds past one machine: a shared cache, a Dask cluster
LIBRARY_KEYWORDS |= {"EXCLUDE_FROM_ALL", "QUIET", "TORCH_OPS"}  # TORCH_OPS: the library gets a native torch companion
LIBRARY_KEYWORDS |= {"IMAGE_PACKS", "PACK_HINT"}  # the images in per-arch packs beside the library (docs/wheels.md)
LIBRARY_KEYWORDS |= {"KEEP_GOING"}  # a variant that fails is left out, named, and the rest ships (build --keep-going)


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TL_AOT_ARCHS", raising=False)
    (tmp_path / "k.py").write_text("def f(N, block=64):\n    pass\n")
    return tmp_path / "k.py"


def _both(kernel: Path, entry: dict) -> tuple:
    """The entry's specs as a JSON spec file gives them, and as a TileLangExtension entry dict does."""
    spec_file = kernel.parent / "lib.json"
    spec_file.write_text(json.dumps({"library": {"name": "_k", "archs": ["80"]}, "entry": [entry]}))
    from_file = load_spec_file(spec_file).entries
    ext = TileLangExtension("pkg._k", entries=[{**entry, "source": str(kernel)}], archs=["80"])
    return from_file, ext.library_spec().entries


@pytest.mark.parametrize("key", [k for k in ENTRY_KEYS if k not in REQUIRED])
def test_a_setup_py_entry_takes_each_spec_file_key_and_builds_the_same_spec(kernel, key):
    base = {"name": "f", "source": "k.py", "function": "f"}
    from_file, from_setup = _both(kernel, {**base, key: SAMPLES[key]})
    assert from_setup == from_file
    assert from_file != _both(kernel, base)[0], f"{key} changed nothing"


def test_a_setup_py_entry_with_a_tune_table_is_tuned_over_its_candidates(kernel):
    from tl_aot.tune.tuner import candidates_of

    ext = TileLangExtension("pkg._k", entries=[{"name": "f", "source": "k.py", "function": "f", "tune": SAMPLES["tune"]}], archs=["80"])
    (spec,) = ext.library_spec().entries
    assert candidates_of(spec) == (SAMPLES["tune"], {})


def _add_tilelang_kernel() -> tuple[str, set]:
    text = CMAKE.read_text()
    body = text[text.index("function(add_tilelang_kernel)") :]
    body = body[: body.index("endfunction()")]
    groups = re.search(r"cmake_parse_arguments\(PARSE_ARGV 1 ARG(.*?)\)", body, re.S).group(1)
    return body, {kw for group in re.findall(r'"([A-Z_;]+)"', groups) for kw in group.split(";")}


def test_cmake_takes_every_entry_key_a_command_line_carries_and_passes_it_to_the_cli():
    from tl_aot.frontends.cli_parser import build_parser

    body, keywords = _add_tilelang_kernel()
    build = next(a for a in build_parser()._subparsers._group_actions[0].choices.values() if a.prog.endswith(" build"))
    options = {o for action in build._actions for o in action.option_strings}
    for k in ENTRY_TABLE:
        if k.cmake:
            assert k.cmake in keywords, f"add_tilelang_kernel() has no {k.cmake} for {k.key}"
            assert f"ARG_{k.cmake}" in body
        if k.cmake and k.cli.startswith("--"):
            assert k.cli in options, f"python -m tl_aot build has no {k.cli} for {k.key}"
            assert re.search(rf'list\(APPEND cmd "?{k.cli}[ =]', body), f"{k.cmake} is not passed as {k.cli}"
    assert keywords - {k.cmake for k in ENTRY_TABLE} == LIBRARY_KEYWORDS, "an entry keyword CMake takes is missing from ENTRY_TABLE"


def test_cmake_refuses_with_spec_the_entry_keywords_a_spec_file_sets_per_entry():
    body, _ = _add_tilelang_kernel()
    refused = re.search(r"if\(ARG_SPEC OR ARG_CAPTURE\).*?foreach\(kw IN ITEMS (.*?)\)", body, re.S).group(1).split()
    assert set(refused) == {k.cmake for k in ENTRY_TABLE if k.cmake and not k.library_wide}


@pytest.mark.parametrize("option", ["--arg=N=1", "--pass-config=tl.disable_tma_lower=true", "--nvcc-flag=-O3", "--entry=g", "--out-idx=0"])
def test_the_cli_refuses_entry_options_with_a_spec_file_instead_of_ignoring_them(kernel, capsys, option):
    from tl_aot.frontends.cli import main

    entry = {"name": "f", "source": "k.py", "function": "f"}
    (kernel.parent / "lib.json").write_text(json.dumps({"library": {"archs": ["80"]}, "entry": [entry]}))
    assert main(["build", "--spec", str(kernel.parent / "lib.json"), option]) == 1
    flag = option.split("=")[0]
    assert f"{flag} apply to FILE.py:FUNCTION; in a spec file set them per entry" in capsys.readouterr().err
