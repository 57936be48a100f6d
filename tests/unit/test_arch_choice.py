"""One arch precedence for every front end: explicit > environment > declared > default, errors naming the source."""

from __future__ import annotations

import pytest

from tl_aot.common.arch import parse_arch_list
from tl_aot.common.errors import SpecError
from tl_aot.config.arch_choice import Given, cmake_spelling, env_archs, resolve_archs
from tl_aot.frontends.cmake_configure import configure


def _sm(choice) -> list[str]:
    return [str(a) for a in choice.archs]


def test_each_level_wins_over_the_ones_below():
    explicit, env, declared = Given("--arch", ["90a"]), Given("TL_AOT_ARCHS", "86"), Given("spec.toml: [library] archs", ["80"])
    calls = []

    def default():
        calls.append(1)
        return parse_arch_list(["89"])

    assert _sm(resolve_archs(explicit, env, declared, default)) == ["sm_90a"]
    assert _sm(resolve_archs(Given("--arch", []), env, declared, default)) == ["sm_86"]
    assert _sm(resolve_archs(None, Given("TL_AOT_ARCHS", "  "), declared, default)) == ["sm_80"]
    assert not calls, "the default (it asks nvcc) is called only when nothing is given"
    choice = resolve_archs(None, None, None, default)
    assert (_sm(choice), choice.origin, calls) == (["sm_89"], "", [1])
    assert resolve_archs(None, None, None).archs == ()  # no default: the caller says what to set


def test_within_a_level_the_first_source_given_wins_and_the_origin_is_kept():
    declared = (Given("entry 'gemm'", None), Given("TileLangExtension('pkg._k')", "80;90a"))
    choice = resolve_archs(declared=declared)
    assert (choice.display, choice.origin) == ("sm_80, sm_90a", "TileLangExtension('pkg._k')")
    first = (Given("TL_AOT_ARCHS (CMake variable)", "86"), Given("TL_AOT_ARCHS", "80"))
    assert _sm(resolve_archs(env=first)) == ["sm_86"]


def test_arch_objects_pass_through_without_being_parsed_again():
    archs = parse_arch_list(["90a", "80+PTX"])
    assert resolve_archs(Given("--arch", archs)).archs == archs


@pytest.mark.parametrize(
    "level,origin,value,fragment",
    [
        ("explicit", "--arch", ["9z"], "--arch: unsupported arch name '9z'"),
        ("env", "TL_AOT_ARCHS", "80;sm_70", "TL_AOT_ARCHS: unsupported arch 'sm_70'"),
        ("declared", "spec.toml: entry #1 (gemm)", 90, "spec.toml: entry #1 (gemm): archs must be a list of archs"),
        ("declared", "TileLangExtension('p._k')", ["90a+PTX"], "TileLangExtension('p._k'): arch '90a+PTX'"),
    ],
)
def test_a_bad_value_names_where_it_came_from(level, origin, value, fragment):
    with pytest.raises(SpecError) as info:
        resolve_archs(**{level: Given(origin, value)})
    assert fragment in str(info.value)
    bad = {"9z", "sm_70", "90a+PTX"} & set(value if isinstance(value, list) else str(value).split(";"))
    assert info.value.arch == (bad.pop() if bad else None)  # the field callers read names the arch refused


def test_a_bad_value_below_the_winner_is_not_read_here():
    assert _sm(resolve_archs(Given("--arch", ["80"]), Given("TL_AOT_ARCHS", "bogus"))) == ["sm_80"]


def test_the_environment_is_read_and_logged_when_it_decides(monkeypatch):
    monkeypatch.setenv("TL_AOT_ARCHS", "80 90a")
    lines = []
    choice = resolve_archs(Given("--arch", None), env_archs(), log=lines.append)
    assert _sm(choice) == ["sm_80", "sm_90a"] and choice.origin == "TL_AOT_ARCHS"
    assert lines == ["archs sm_80, sm_90a from TL_AOT_ARCHS (no --arch given)"]
    resolve_archs(Given("--arch", ["86"]), env_archs(), log=lines.append)
    assert len(lines) == 1, "an explicit arch is not worth a note"
    monkeypatch.delenv("TL_AOT_ARCHS")
    assert not env_archs().given


def test_cmake_spellings_become_tl_aot_spellings():
    given = cmake_spelling(["80-real", "90a-real", "80-virtual", "sm_80", ""], "ARCHS")
    assert _sm(resolve_archs(given)) == ["sm_80", "sm_90a", "sm_80+PTX"]
    with pytest.raises(SpecError, match="ARCHS: arch 'native' is not supported"):
        cmake_spelling(["native"], "ARCHS")


def test_cmake_configure_chooses_archs_and_checks_the_entry(tmp_path, monkeypatch):
    (tmp_path / "k.py").write_text("def f():\n    pass\n")
    entry = ["--", f"{tmp_path / 'k.py'}:f", "--name", "k"]
    monkeypatch.delenv("TL_AOT_ARCHS", raising=False)
    assert configure(["--target", "k", "--archs=80-real 90a 80-virtual", *entry]) == ["80 90a 80+PTX", "sm_80, sm_90a, sm_80+PTX", ""]
    assert configure(["--target", "k", "--cuda-architectures=86-real", *entry]) == ["86", "sm_86", ""]
    assert configure(["--target", "k", *entry]) == ["", "tl_aot's default archs", ""]
    monkeypatch.setenv("TL_AOT_ARCHS", "89")
    lines = configure(["--target", "k", "--archs-variable=90a", "--cuda-architectures=80", *entry])
    assert lines == ["90a", "sm_90a", "", "add_tilelang_kernel(k): archs sm_90a from TL_AOT_ARCHS (CMake variable) (no ARCHS given)"]
    assert configure(["--target", "k", "--cuda-architectures=80", *entry])[0] == "89"


def test_cmake_configure_names_the_pack_files_of_image_packs(tmp_path, monkeypatch):
    """IMAGE_PACKS: one pack file per arch, as the build names them (CMake declares and installs them)."""
    (tmp_path / "k.py").write_text("def f():\n    pass\n")
    entry = ["--", f"{tmp_path / 'k.py'}:f", "--name", "k", "--image-packs"]
    monkeypatch.delenv("TL_AOT_ARCHS", raising=False)
    lines = configure(["--target", "k", "--archs=90a 80-real 80-virtual sm_80", *entry])
    assert lines[2] == "libk.sm_80.tlpack libk.sm_80_ptx.tlpack libk.sm_90a.tlpack"
    with pytest.raises(SpecError, match="target k: IMAGE_PACKS needs the archs at configure time .*: give ARCHS, TL_AOT_ARCHS or"):
        configure(["--target", "k", *entry])


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["--archs=80 9z"], "target k: ARCHS: unsupported arch name '9z'"),
        (["--archs-variable=all"], "target k: TL_AOT_ARCHS (CMake variable): arch 'all' is not supported"),
        (["--", "K:f", "--name", "k", "--arg", "M4096"], "target k: ARGS item 'M4096': expected NAME=VALUE"),
        (["--", "K:f", "--name", "k", "--pass-config", "x"], "target k: PASS_CONFIGS item 'x': expected KEY=VALUE"),
        (["--", "K:f", "--name", "k", "--device", "H999"], "target k: entry 'k': unknown device 'H999'"),
        (["--", "K:f", "--name", "k", "--entry", "cleanup"], "entry name 'cleanup' is reserved by tl_aot"),
    ],
)
def test_cmake_configure_errors_name_the_target_the_keyword_and_the_value(tmp_path, monkeypatch, argv, fragment):
    monkeypatch.delenv("TL_AOT_ARCHS", raising=False)
    (tmp_path / "k.py").write_text("def f():\n    pass\n")
    argv = [str(tmp_path / "k.py") + ":f" if a == "K:f" else a for a in argv]
    with pytest.raises(SpecError) as info:
        configure(["--target", "k", *argv])
    assert fragment in str(info.value)


def test_cmake_configure_refuses_a_target_name_tl_aot_cannot_use():
    with pytest.raises(SpecError, match="target name 'tvm_ffi' would make libtvm_ffi.so"):
        configure(["--target", "tvm_ffi"])
