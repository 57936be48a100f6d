from pathlib import Path

import pytest

from tl_aot.common.errors import SpecError
from tl_aot.spec import (
    KernelSpec,
    LibrarySpec,
    archs_from_env,
    check_identifier,
    cpp_name,
    load_spec_file,
    parse_arg,
    parse_target,
)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("M=4096", ("M", 4096)),
        ("dtype='float16'", ("dtype", "float16")),
        ("dtype=float16", ("dtype", "float16")),
        ("scale=0.5", ("scale", 0.5)),
        ("M=None", ("M", None)),
        ("shape=(1, 2)", ("shape", (1, 2))),
    ],
)
def test_args_are_python_literals(text, expected):
    assert parse_arg(text) == expected


@pytest.mark.parametrize("bad", ["M", "1x=3", "M=os.system('x') + 1"])
def test_bad_args_are_explained(bad):
    with pytest.raises(SpecError, match="--arg"):
        parse_arg(bad)


def test_target_split():
    assert parse_target("dir/kernels.py:matmul") == (Path("dir/kernels.py"), "matmul")
    with pytest.raises(SpecError, match="FILE.py:FUNCTION"):
        parse_target("kernels.py")


@pytest.mark.parametrize("name", ["a-b", "x;system()", "class", "__x", "1abc", ""])
def test_names_reaching_cpp_must_be_identifiers(name):
    with pytest.raises(SpecError):
        check_identifier(name, "entry name")


@pytest.mark.parametrize("name", ["new", "this", "delete", "default", "register", "int", "x", "stream", "has_stream"])
def test_cpp_keywords_name_entries_but_not_libraries(name, tmp_path):
    """Entries are never spelled bare in C++; a library name is the C++ API's namespace."""
    assert check_identifier(name, "entry name") == name
    e = KernelSpec.create(name=name, source=tmp_path / "k.py", function="f", archs=["80"])
    LibrarySpec("lib", (e,))
    if name in ("new", "this", "delete", "default", "register", "int"):
        with pytest.raises(SpecError, match="reserved in C\\+\\+"):
            LibrarySpec(name, (e,))


def test_cpp_name_suffixes_keywords_and_taken_names():
    assert cpp_name("x") == "x"
    assert cpp_name("new") == "new_"
    assert cpp_name("stream", {"stream"}) == "stream_"
    assert cpp_name("new", {"new_"}) == "new_2"
    assert cpp_name("NULL") == "NULL_" and cpp_name("EOF", {"EOF_", "EOF_2"}) == "EOF_3"


def test_library_rejects_duplicate_and_reserved_entries(tmp_path):
    e = KernelSpec.create(name="k", source=tmp_path / "k.py", function="f", archs=["80"])
    with pytest.raises(SpecError, match="listed twice"):
        LibrarySpec("lib", (e, e))
    r = KernelSpec.create(name="cleanup_module", source=tmp_path / "k.py", function="f", archs=["80"])
    with pytest.raises(SpecError, match="reserved"):
        LibrarySpec("lib", (r,))


def test_spec_file_paths_are_relative_to_it_and_env_overrides_archs(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    f = tmp_path / "sub" / "lib.toml"
    f.write_text('[library]\nname = "mylib"\narchs = ["80"]\n[[entry]]\nname = "a"\nsource = "k.py"\nfunction = "f"\nargs = { N = 4 }\n')
    lib = load_spec_file(f)
    assert lib.name == "mylib"
    (e,) = lib.entries
    assert e.source == tmp_path / "sub" / "k.py" and e.kwargs == {"N": 4} and [a.sm for a in e.archs] == ["sm_80"]
    monkeypatch.setenv("TL_AOT_ARCHS", "90a;89")
    assert [a.sm for a in load_spec_file(f).entries[0].archs] == ["sm_90a", "sm_89"]
    assert [a.sm for a in archs_from_env(None)] == ["sm_90a", "sm_89"]


def test_spec_file_errors_name_the_entry(tmp_path):
    f = tmp_path / "lib.toml"
    f.write_text('[[entry]]\nname = "a"\nsource = "k.py"\n')
    with pytest.raises(SpecError, match="entry #1: missing key\\(s\\) function"):
        load_spec_file(f, archs=["80"])
    f.write_text('[[entry]]\nname = "a"\nsource = "k.py"\nfunction = "f"\nflavour = 1\n')
    with pytest.raises(SpecError, match="unknown key 'flavour'"):
        load_spec_file(f, archs=["80"])


def test_specialisations_share_one_exported_name(tmp_path):
    from tl_aot.spec import load_spec_file

    (tmp_path / "k.py").write_text("")
    (tmp_path / "s.toml").write_text(
        '[library]\nname = "ops"\narchs = ["90a"]\n'
        '[[entry]]\nname = "gemm"\nsource = "k.py"\nfunction = "f"\nargs = { K = 64 }\nout_idx = [-1]\n'
        'specialisations = [{ args = { dtype = "float16" }, when = { m = [1, 64] } }, { args = { K = 128 }, fallback = true }]\n'
    )
    lib = load_spec_file(tmp_path / "s.toml")
    a, b = lib.entries
    assert (a.name, a.export, a.exported, b.name) == ("gemm__s0", "gemm", "gemm", "gemm__s1")
    assert a.kwargs == {"K": 64, "dtype": "float16"} and b.kwargs == {"K": 128}  # own args update the shared ones
    assert a.when == (("m", 1, 64),) and not a.fallback and b.fallback and b.out_idx == (-1,)


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ("[]", "specialisations must be a non-empty list"),
        ("[{ args = { N = 1 }, size = 3 }]", "specialisation #1: expected a table with args, factory_args, jit_args, backend, when"),
        ("[{ when = { m = 0 } }]", "when.m = 0: expected a positive int"),
        ('[{ fallback = "yes" }]', "fallback must be true or false"),
    ],
)
def test_bad_specialisations_are_refused_with_the_entry_named(tmp_path, items, message):
    from tl_aot.common.errors import SpecError
    from tl_aot.spec import load_spec_file

    (tmp_path / "s.toml").write_text(
        f'[[entry]]\nname = "gemm"\nsource = "k.py"\nfunction = "f"\narchs = ["90a"]\nspecialisations = {items}\n'
    )
    with pytest.raises(SpecError, match="gemm") as e:
        load_spec_file(tmp_path / "s.toml")
    assert message in str(e.value)


def test_an_entry_and_a_specialised_entry_of_the_same_name_clash(tmp_path):
    from tl_aot.common.errors import SpecError
    from tl_aot.spec import load_spec_file

    entry = '[[entry]]\nname = "gemm"\nsource = "k.py"\nfunction = "f"\narchs = ["90a"]\n'
    (tmp_path / "s.toml").write_text(entry + entry + "specialisations = [{ args = {} }]\n")
    with pytest.raises(SpecError, match="entry 'gemm' is listed twice"):
        load_spec_file(tmp_path / "s.toml")


def test_pass_config_flags_take_dotted_keys_and_booleans():
    from tl_aot.spec import parse_pass_config

    assert parse_pass_config("tl.disable_tma_lower=true") == ("tl.disable_tma_lower", True)
    assert parse_pass_config("tl.enable_fast_math=False") == ("tl.enable_fast_math", False)
    assert parse_pass_config("tl.ptxas_register_usage_level=3") == ("tl.ptxas_register_usage_level", 3)
    for bad in ("tl.disable_tma_lower", "=1", "tl..x=1", "tl.x-y=1"):
        with pytest.raises(SpecError, match="expected KEY=VALUE with a TileLang pass config key"):
            parse_pass_config(bad)
