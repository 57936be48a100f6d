"""Hostile inputs at every door (spec files, setup.py, the CLI, the file system, kernel files, the loader).

Each case asserts the error class and a message fragment a user would act on: the key, the path,
the expected type or the fix. None may end in a Python traceback, a crash or a silent success.
"""

from __future__ import annotations

import errno
import shutil
import struct
import sys
from pathlib import Path

import pytest
from support.helpers import tl_aot_cli

from tl_aot.common import destinations
from tl_aot.common.destinations import StagedFiles, check_file_destination, ensure_folder
from tl_aot.common.errors import FilesystemError, LibraryError, LoweringError, SpecError, TlAotError
from tl_aot.common.keycheck import check_keys, did_you_mean
from tl_aot.frontends import cli
from tl_aot.frontends.cli_library import library_of
from tl_aot.frontends.cli_parser import build_parser
from tl_aot.runtime.elf import check_library_file
from tl_aot.spec import load_spec_file

ENTRY = '[[entry]]\nname = "add"\nsource = "k.py"\nfunction = "add"\n'
LIB = '[library]\narchs = ["90a"]\n'

# --------------------------------------------------------------------------------------------
# Spec files: (file text, fragment of the error)
# --------------------------------------------------------------------------------------------

TOML_CASES = {
    "args_int": (LIB + ENTRY + "args = 7\n", "args must be a table"),
    "library_archs_int": ("[library]\narchs = 90\n" + ENTRY, "archs must be a list of archs"),
    "entry_archs_int": (ENTRY + "archs = 90\n", "entry #1 (add): archs must be a list of archs"),
    "entry_archs_bool": (ENTRY + "archs = true\n", "got bool True"),
    "library_is_string": ('library = "x"\n' + ENTRY, "[library] must be a table"),
    "source_int": (LIB + '[[entry]]\nname = "add"\nsource = 5\nfunction = "add"\n', "source must be a string"),
    "source_list": (LIB + '[[entry]]\nname = "add"\nsource = ["k.py"]\nfunction = "add"\n', "source must be a string"),
    "pass_configs_list": (LIB + ENTRY + 'pass_configs = ["x"]\n', "pass_configs must be a table"),
    "pass_configs_string": (LIB + ENTRY + 'pass_configs = "tl.x=1"\n', "pass_configs must be a table"),
    "compile_flags_int": (LIB + ENTRY + "compile_flags = 1\n", "compile_flags must be a list of strings"),
    "compile_flags_mixed": (LIB + ENTRY + 'compile_flags = ["-O3", 2]\n', "compile_flags must be a list of strings"),
    "library_key_typo": ('[library]\narchs = ["90a"]\nnmae = "x"\n' + ENTRY, "unknown key 'nmae' (did you mean 'name'?)"),
    "library_arch_singular": ('[library]\narch = ["90a"]\n' + ENTRY, "unknown key 'arch' (did you mean 'archs'?)"),
    "unknown_table": (LIB + '[libary]\nname = "x"\n' + ENTRY, "unknown key 'libary' (did you mean 'library'?)"),
    "unknown_top_key": ('name = "x"\n' + LIB + ENTRY, "unknown key 'name'"),
    "entry_key_typo": (LIB + ENTRY + "arg = {N = 1}\n", "unknown key 'arg' (did you mean 'args'?)"),
    "entry_source_typo": (LIB + '[[entry]]\nname = "add"\nsorce = "k.py"\nfunction = "add"\n', "did you mean 'source'?"),
    "entry_is_string": ('entry = ["x"]\n' + LIB, "entry #1: each entry must be a table"),
    "entry_is_number": ("entry = [3]\n" + LIB, "got int 3"),
    "entries_is_string": ('entry = "add"\n' + LIB, "must be a list of tables"),
    "library_name_int": ('[library]\nname = 3\narchs = ["90a"]\n' + ENTRY, "[library]: name must be a string"),
    "library_device_int": ('[library]\ndevice = 3\narchs = ["90a"]\n' + ENTRY, "device must be a string"),
    "library_capture_int": ('[library]\ncapture = 3\narchs = ["90a"]\n' + ENTRY, "capture must be a list of strings"),
    "entry_name_int": (LIB + '[[entry]]\nname = 3\nsource = "k.py"\nfunction = "add"\n', "entry name 3 is not a valid identifier"),
    "entry_without_name": (LIB + '[[entry]]\nsource = "k.py"\nfunction = "add"\n', "missing key(s) name"),
    "entry_without_function": (LIB + '[[entry]]\nname = "add"\nsource = "k.py"\n', "missing key(s) function"),
    "no_archs": (ENTRY, "no archs"),
    "empty_archs": ("[library]\narchs = []\n" + ENTRY, "no architecture given"),
    "arch_unknown": ('[library]\narchs = ["9z"]\n' + ENTRY, "9z"),
    "tune_string": (LIB + ENTRY + 'tune = "x"\n', "tune must be a non-empty list of configs"),
    "select_float": (LIB + ENTRY + "select = 1.5\n", "select must be a kernel's key or index"),
    "imports_string_list": (LIB + ENTRY + "imports = [1]\n", "imports must be a list of module names"),
    "specialisations_table": (LIB + ENTRY + "[entry.specialisations]\nargs = {}\n", "specialisations must be a non-empty list"),
    "not_toml": ("[library\n", "not valid TOML"),
}

JSON_CASES = {
    "top_level_list": ("[1]", "the top level must be a table"),
    "top_level_string": ('"x"', "the top level must be a table"),
    "entry_as_string": ('{"library": {"archs": ["90a"]}, "entry": ["add"]}', "each entry must be a table"),
    "entry_without_name": ('{"library": {"archs": ["90a"]}, "entry": [{"source": "k.py", "function": "add"}]}', "missing key(s) name"),
    "library_list": ('{"library": [], "entry": []}', "[library] must be a table"),
    "args_list": (
        '{"library": {"archs": ["90a"]}, "entry": [{"name": "a", "source": "k.py", "function": "a", "args": [1]}]}',
        "args must be",
    ),
    "not_json": ("{", "not valid JSON"),
}


def _spec(tmp_path: Path, text: str, suffix: str) -> Path:
    (tmp_path / "k.py").write_text("def add():\n    pass\n")
    path = tmp_path / f"s.{suffix}"
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", sorted(TOML_CASES))
def test_toml_spec_values_are_checked_where_they_enter(case, tmp_path, monkeypatch):
    monkeypatch.delenv("TL_AOT_ARCHS", raising=False)
    text, fragment = TOML_CASES[case]
    with pytest.raises(SpecError) as info:
        load_spec_file(_spec(tmp_path, text, "toml"))
    assert fragment in str(info.value)
    assert "s.toml" in str(info.value)  # the message names the file


@pytest.mark.parametrize("case", sorted(JSON_CASES))
def test_json_spec_values_are_checked_where_they_enter(case, tmp_path, monkeypatch):
    monkeypatch.delenv("TL_AOT_ARCHS", raising=False)
    text, fragment = JSON_CASES[case]
    with pytest.raises(SpecError, match=None) as info:
        load_spec_file(_spec(tmp_path, text, "json"))
    assert fragment in str(info.value)


def test_explicit_archs_beat_the_environment_and_the_environment_beats_the_file(tmp_path, monkeypatch):
    path = _spec(tmp_path, '[library]\narchs = ["80"]\n' + ENTRY, "toml")
    monkeypatch.setenv("TL_AOT_ARCHS", "86")
    assert [str(a) for a in load_spec_file(path, archs=["90a"]).entries[0].archs] == ["sm_90a"]
    assert [str(a) for a in load_spec_file(path).entries[0].archs] == ["sm_86"]


# --------------------------------------------------------------------------------------------
# TileLangExtension (setup.py)
# --------------------------------------------------------------------------------------------

OK = {"name": "add", "source": "k.py", "function": "add"}
EXTENSION_CASES = {
    "archs_int": ({"entries": [OK], "archs": 90}, "archs must be a list of archs"),
    "entry_archs_int": ({"entries": [{**OK, "archs": 90}]}, "entry 'add': archs must be a list of archs"),
    "entry_without_name": ({"entries": [{"source": "k.py", "function": "add"}]}, "missing key(s) name"),
    "entry_as_string": ({"entries": ["add"]}, "each entry must be a dict"),
    "entry_as_int": ({"entries": [7]}, "got int"),
    "source_int": ({"entries": [{**OK, "source": 5}]}, "source must be a string"),
    "compile_flags_int": ({"entries": [{**OK, "compile_flags": 1}]}, "compile_flags must be a list of strings"),
    "pass_configs_list": ({"entries": [{**OK, "pass_configs": ["x"]}]}, "pass_configs must be a table"),
    "key_typo": ({"entries": [{**OK, "fuction": "add"}]}, "did you mean 'function'?"),
    "args_list": ({"entries": [{**OK, "args": [1, 2]}]}, "args must be a table"),
    "capture_int": ({"capture": 5}, "capture must be a list of strings"),
    "unknown_keyword": ({"entries": [OK], "sources": ["x.cu"]}, "unsupported argument(s) sources"),
}


@pytest.mark.parametrize("case", sorted(EXTENSION_CASES))
def test_extension_values_are_checked_where_they_enter(case):
    from tl_aot.frontends.setuptools import TileLangExtension

    kwargs, fragment = EXTENSION_CASES[case]
    with pytest.raises(SpecError) as info:
        TileLangExtension("pkg._kernels", **kwargs)
    assert fragment in str(info.value)
    assert "TileLangExtension('pkg._kernels')" in str(info.value)


# --------------------------------------------------------------------------------------------
# The command line and job counts
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("jobs", ["0", "-3", "two", "1.5"])
def test_jobs_below_one_or_not_a_number_are_usage_errors(jobs, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["build", "k.py:add", "--arch", "90a", "-j", jobs])
    assert info.value.code == 2
    assert "argument -j/--jobs" in capsys.readouterr().err


@pytest.mark.parametrize("jobs", [0, -1, 2.0, "4"])
def test_build_library_refuses_a_job_count_below_one(jobs, tmp_path):
    from tl_aot.pipeline.library import build_library
    from tl_aot.spec import KernelSpec, LibrarySpec

    lib = LibrarySpec("x", (KernelSpec.create(name="add", source=tmp_path / "k.py", function="add", archs=["90a"]),))
    with pytest.raises(SpecError, match="jobs must be a whole number of at least 1"):
        build_library(lib, out_dir=tmp_path / "out", jobs=jobs)


@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5"])
def test_an_invalid_max_jobs_is_a_clear_error(value, monkeypatch):
    from tl_aot.pipeline.scheduler import default_jobs

    monkeypatch.setenv("MAX_JOBS", value)
    with pytest.raises(SpecError, match="MAX_JOBS="):
        default_jobs()


def test_deps_of_a_missing_file_is_an_error(tmp_path, capsys):
    assert cli.main(["deps", str(tmp_path / "nope.py")]) == 1
    assert "no such kernel file" in capsys.readouterr().err


def test_arch_flag_beats_tl_aot_archs_and_the_environment_is_named_when_used(tmp_path, monkeypatch, capsys):
    (tmp_path / "k.py").write_text("def add():\n    pass\n")
    monkeypatch.setenv("TL_AOT_ARCHS", "80")
    args = build_parser().parse_args(["build", f"{tmp_path / 'k.py'}:add", "--arch", "90a"])
    assert [str(a) for a in library_of(args, "build").entries[0].archs] == ["sm_90a"]
    assert "TL_AOT_ARCHS" not in capsys.readouterr().out
    args = build_parser().parse_args(["build", f"{tmp_path / 'k.py'}:add"])
    assert [str(a) for a in library_of(args, "build").entries[0].archs] == ["sm_80"]
    assert "archs sm_80 from TL_AOT_ARCHS" in capsys.readouterr().out


def test_did_you_mean_suggests_the_nearest_key():
    assert did_you_mean("fucntion", ["name", "function"]) == " (did you mean 'function'?)"
    assert did_you_mean("zzz", ["name", "function"]) == ""
    with pytest.raises(SpecError, match="known keys: a, b"):
        check_keys({"c": 1}, ("a", "b"), "here")


# --------------------------------------------------------------------------------------------
# The file system: checks before any work, and the staged swap of library and header
# --------------------------------------------------------------------------------------------


def _lib_spec(tmp_path: Path):
    from tl_aot.spec import KernelSpec, LibrarySpec

    (tmp_path / "k.py").write_text("def add():\n    pass\n")
    return LibrarySpec("add", (KernelSpec.create(name="add", source=tmp_path / "k.py", function="add", archs=["90a"]),))


def _fs_case(tmp_path: Path, case: str) -> tuple[dict, str]:
    """Build keywords that put a file where a folder goes or the reverse, and the fragment of the error."""
    if case == "output_is_a_file":
        (tmp_path / "out").write_text("x")
        return {"out_dir": tmp_path / "out"}, "is a file, not a folder"
    if case == "output_parent_is_a_file":
        (tmp_path / "f").write_text("x")
        return {"out_dir": tmp_path / "f" / "out"}, "is a file, not a folder"
    if case == "library_is_a_folder":
        (tmp_path / "out" / "libadd.so").mkdir(parents=True)
        return {"out_dir": tmp_path / "out"}, "libadd.so is a folder"
    if case == "header_is_a_folder":
        (tmp_path / "out" / "add.h").mkdir(parents=True)
        return {"out_dir": tmp_path / "out"}, "add.h is a folder"
    if case == "header_dir_is_a_file":
        (tmp_path / "inc").write_text("x")
        return {"out_dir": tmp_path / "out", "header_dir": tmp_path / "inc"}, "header folder"
    (tmp_path / "cache").write_text("x")
    return {"out_dir": tmp_path / "out", "cache_dir": tmp_path / "cache"}, "cache folder"


@pytest.mark.parametrize(
    "case",
    ["output_is_a_file", "output_parent_is_a_file", "library_is_a_folder", "header_is_a_folder", "header_dir_is_a_file", "cache_is_a_file"],
)
def test_a_file_where_a_folder_goes_or_the_reverse_is_refused_before_any_work(case, tmp_path):
    from tl_aot.pipeline.library import build_library

    kwargs, fragment = _fs_case(tmp_path, case)
    with pytest.raises(FilesystemError) as info:
        build_library(_lib_spec(tmp_path), log=None, **kwargs)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def _previous(tmp_path: Path) -> tuple[Path, Path]:
    lib, header = tmp_path / "libx.so", tmp_path / "x.h"
    lib.write_bytes(b"old library")
    header.write_text("// old header\n")
    return lib, header


def test_staged_files_swap_library_and_header_together(tmp_path):
    lib, header = _previous(tmp_path)
    staged = StagedFiles()
    staged.stage(lib, data=b"new library", role="library")
    staged.stage(header, data=b"// new header\n", role="header")
    staged.publish()
    assert (lib.read_bytes(), header.read_text()) == (b"new library", "// new header\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["libx.so", "x.h"]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EDQUOT])
def test_a_fault_while_staging_leaves_the_previous_files_and_no_part(code, tmp_path, monkeypatch):
    lib, header = _previous(tmp_path)
    staged = StagedFiles()
    staged.stage(lib, data=b"new library", role="library")

    def full(path, data):  # the disk fills up half way through the header
        Path(path).write_text("half")
        raise OSError(code, "injected", str(path))

    monkeypatch.setattr(destinations, "write_file", full)  # every staged write goes through it
    with pytest.raises(FilesystemError) as info:
        staged.stage(header, data=b"// new header\n", role="header")
    assert str(header) in str(info.value) and "cannot write the header" in str(info.value)
    assert (lib.read_bytes(), header.read_text()) == (b"old library", "// old header\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["libx.so", "x.h"]


def _refuse_replace(monkeypatch, path: Path, err: int) -> None:
    """Staging's ``os.replace`` onto ``path`` fails with ``err`` (every other replace goes through)."""
    import os

    real = os.replace

    def refuse(src, dst):
        if Path(dst) == path:
            raise OSError(err, "injected", str(dst))
        return real(src, dst)

    monkeypatch.setattr("tl_aot.common.destinations.os.replace", refuse)


def test_a_fault_swapping_the_header_puts_the_previous_library_back(tmp_path, monkeypatch):

    lib, header = _previous(tmp_path)
    staged = StagedFiles()
    staged.stage(lib, data=b"new library", role="library")
    staged.stage(header, data=b"// new header\n", role="header")
    _refuse_replace(monkeypatch, header, errno.EROFS)
    with pytest.raises(FilesystemError, match="read-only"):
        staged.publish()
    assert (lib.read_bytes(), header.read_text()) == (b"old library", "// old header\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["libx.so", "x.h"]


def test_staged_files_leave_an_unchanged_file_alone_and_make_a_missing_folder(tmp_path):
    """An unchanged header keeps its timestamp (make rebuilds nothing); a header folder removed since is made again."""
    lib, header = _previous(tmp_path)
    stamp = tmp_path / "gone" / "stamp.json"
    before = header.stat().st_mtime_ns
    staged = StagedFiles()
    assert staged.stage(lib, data=b"new library", role="library")
    assert not staged.stage(header, data=b"// old header\n", role="header", if_changed=True)
    assert staged.stage(stamp, data=b"{}", role="build stamp", if_changed=True)
    staged.publish()
    assert (lib.read_bytes(), header.stat().st_mtime_ns, stamp.read_bytes()) == (b"new library", before, b"{}")


def test_a_removal_is_undone_with_the_swap_it_belongs_to(tmp_path, monkeypatch):
    """A stamp removed in a swap that fails is back in place with the previous library: the pair stays consistent."""

    lib, header = _previous(tmp_path)
    stamp = tmp_path / "stamp.json"
    stamp.write_text("old stamp")
    staged = StagedFiles()
    staged.remove(stamp)
    staged.stage(lib, data=b"new library", role="library")
    _refuse_replace(monkeypatch, lib, errno.ENOSPC)
    with pytest.raises(FilesystemError, match="no space left"):
        staged.publish()
    assert (lib.read_bytes(), stamp.read_text()) == (b"old library", "old stamp")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["libx.so", "stamp.json", "x.h"]
    monkeypatch.undo()
    staged = StagedFiles()
    staged.remove(stamp)
    staged.stage(lib, data=b"new library", role="library")
    staged.publish()
    assert (lib.read_bytes(), stamp.exists()) == (b"new library", False)


def test_folder_checks_name_the_path_and_the_role(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(FilesystemError, match="cache folder .*f is a file"):
        ensure_folder(tmp_path / "f" / "sub", "cache folder")
    (tmp_path / "d").mkdir()
    with pytest.raises(FilesystemError, match="library .*d is a folder"):
        check_file_destination(tmp_path / "d", "library")


# --------------------------------------------------------------------------------------------
# Kernel files that exit or parse sys.argv when imported
# --------------------------------------------------------------------------------------------

EXIT_CASES = {
    "sys_exit_0": ("import sys\nsys.exit(0)\n", "called sys.exit(0)", 2),
    "sys_exit_3": ("import sys\n\nsys.exit(3)\n", "called sys.exit(3)", 3),
    "sys_exit_message": ("import sys\nsys.exit('bye')\n", "called sys.exit('bye')", 2),
    "raise_system_exit": ("raise SystemExit(5)\n", "called sys.exit(5)", 1),
    "os_exit": ("import os\nos._exit(4)\n", "called os._exit(4)", 2),
    "argparse_required": (
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--n', required=True)\np.parse_args()\n",
        "argparse",
        4,
    ),
    "exit_in_local_module": ("import helper_exit\n", "called sys.exit(7)", 2),
}


@pytest.mark.parametrize("case", sorted(EXIT_CASES))
def test_a_kernel_file_that_exits_at_import_is_an_error_naming_file_and_line(case, tmp_path, monkeypatch):
    import os

    from tl_aot.config.user_code import import_kernel_file

    body, fragment, line = EXIT_CASES[case]
    (tmp_path / "helper_exit.py").write_text("import sys\nsys.exit(7)\n")
    path = tmp_path / f"kexit_{case}.py"
    path.write_text(body)
    argv, hard_exit = list(sys.argv), os._exit
    with pytest.raises(LoweringError) as info:
        import_kernel_file(path, entry="add", arch="sm_90a")
    where = "helper_exit.py:2" if case == "exit_in_local_module" else f"{path.name}:{line}"
    assert fragment in str(info.value) and where in str(info.value)
    assert 'if __name__ == "__main__":' in str(info.value)
    assert (sys.argv, os._exit) == (argv, hard_exit)  # restored


def test_a_kernel_file_sees_its_own_path_as_argv(tmp_path):
    from tl_aot.config.user_code import import_kernel_file

    path = tmp_path / "kargv.py"
    path.write_text("import sys\nSEEN = list(sys.argv)\n")
    assert import_kernel_file(path, entry="add", arch="sm_90a").SEEN == [str(path.resolve())]


def test_a_lowering_worker_that_dies_names_the_kernel_file(tmp_path):
    from tl_aot.common.arch import parse_arch
    from tl_aot.lower.lower_worker import LoweringPool
    from tl_aot.spec import KernelSpec

    path = tmp_path / "kdie.py"
    # native code's last words on fd 2, then a segfault: no Python handler runs
    path.write_text("import ctypes, os\nos.write(2, b'Fatal: about to crash')\nctypes.string_at(0)\n")
    spec = KernelSpec.create(name="add", source=path, function="add", archs=["90a"])
    with LoweringPool(1) as pool, pytest.raises(LoweringError) as info:
        pool.lower(spec, parse_arch("90a"))
    assert "lowering worker died" in str(info.value) and str(path) in str(info.value)
    assert "its last output:\n    Fatal: about to crash" in str(info.value)  # captured, not lost


# --------------------------------------------------------------------------------------------
# The loader: files that are not a complete tl_aot library are refused before dlopen
# --------------------------------------------------------------------------------------------


def _libtvm_ffi() -> Path:
    tvm_ffi = pytest.importorskip("tvm_ffi")
    return next(Path(tvm_ffi.__file__).parent.rglob("libtvm_ffi.so"))


def _elf_case(tmp_path: Path, case: str) -> tuple[Path, str]:
    path = tmp_path / "libbad.so"
    real = _libtvm_ffi().read_bytes()
    if case == "empty":
        path.write_bytes(b"")
    elif case == "text":
        path.write_text("hello, not a library\n" * 10)
    elif case == "truncated_half":
        path.write_bytes(real[: len(real) // 2])
    elif case == "truncated_headers":
        path.write_bytes(real[:100])
    elif case == "elf32":
        path.write_bytes(real[:4] + b"\x01" + real[5:])
    elif case == "big_endian":
        path.write_bytes(real[:5] + b"\x02" + real[6:])
    elif case == "executable":
        path.write_bytes(real[:16] + struct.pack("<H", 2) + real[18:])
    elif case == "section_table_past_end":
        path.write_bytes(real[:40] + struct.pack("<Q", len(real) + 4096) + real[48:])
    elif case == "libtvm_ffi_copy":
        shutil.copyfile(_libtvm_ffi(), path)
    else:  # a shared library, but not one tl_aot built
        path = Path(struct.__file__) if str(struct.__file__).endswith(".so") else _system_library()
    return path, {
        "empty": "no ELF header",
        "text": "no ELF header",
        "truncated_half": "past the end of the file",
        "truncated_headers": "past the end of the file",
        "elf32": "not a 64-bit little-endian",
        "big_endian": "not a 64-bit little-endian",
        "executable": "not a shared object",
        "section_table_past_end": "section table lies past the end",
        "libtvm_ffi_copy": "tvm-ffi's own library (SONAME libtvm_ffi.so)",
        "foreign_library": "not a tl_aot library",
    }[case]


def _system_library() -> Path:
    import _ctypes

    return Path(_ctypes.__file__)


ELF_CASES = [
    "empty",
    "text",
    "truncated_half",
    "truncated_headers",
    "elf32",
    "big_endian",
    "executable",
    "section_table_past_end",
    "libtvm_ffi_copy",
    "foreign_library",
]


@pytest.mark.parametrize("case", ELF_CASES)
def test_check_library_file_refuses_what_dlopen_would_crash_on(case, tmp_path):
    path, fragment = _elf_case(tmp_path, case)
    with pytest.raises(LibraryError) as info:
        check_library_file(path)
    assert fragment in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize("case", ["truncated_half", "libtvm_ffi_copy", "text"])
def test_load_and_inspect_refuse_them_in_a_child_process_that_survives(case, tmp_path):
    import subprocess

    path, fragment = _elf_case(tmp_path, case)
    code = (
        "import sys, tl_aot\nfrom tl_aot.common.errors import LibraryError\n"
        f"try:\n    tl_aot.load({str(path)!r})\nexcept LibraryError as e:\n    print('refused:', e)\n"
        "print('torch imported:', 'torch' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "refused:" in proc.stdout and fragment in proc.stdout
    assert "torch imported: False" in proc.stdout  # refused from its headers, before tvm-ffi (which imports torch)
    proc = tl_aot_cli("inspect", path, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and fragment in proc.stderr


def test_filesystem_errors_are_caught_with_every_tl_aot_error():
    assert issubclass(FilesystemError, TlAotError)
