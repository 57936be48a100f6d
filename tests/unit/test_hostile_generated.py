"""Hostile strings and names in generated code, and launches past an arch's limits (CPU only).

Every user string reaching generated Python, C++, depfiles or JSON either reads back exactly
(the generated text parses or compiles) or is refused with a SpecError naming it; any name
TileLang accepts builds; a launch no GPU of the arch can make fails the build, naming the limit.
"""

import ast
import dataclasses
import io
import json
import os
import re
import shutil
import subprocess
import time
import tokenize
from pathlib import Path

import pytest
from support.golden import golden_manifest

from tl_aot.codegen.render import render_header, render_launcher, render_loader
from tl_aot.common.cpp_spelling import cpp_macros, cpp_name, cpp_reserved
from tl_aot.common.errors import LoweringError, SpecError
from tl_aot.common.escaping import c_string_body, depfile_path, json_text, py_comment, py_doc_line, py_str
from tl_aot.common.metadata import Manifest
from tl_aot.common.metadata_json import from_json, to_json
from tl_aot.gpu.launch_limits import max_shared_bytes, static_int
from tl_aot.lower.cuda_source import rename_reserved_names, shadowed_names, static_shared_bytes
from tl_aot.spec import RESERVED_ENTRY_NAMES, KernelSpec, LibrarySpec

KERNELS = Path(__file__).parents[1] / "kernels"
HOSTILE = {
    "newline": "k.py\nimport os; os.system('echo PWNED')",
    "carriage_return": "k.py\rimport os",
    "triple_quotes": "k\"\"\"x'''.py",
    "backslashes": "k\\N{x}\\.py\\",
    "hash": "k#x.py",
    "comment_end": "k*/x/*.py",
    "nul": "k\x00.py",
    "non_utf8": os.fsdecode(b"k\xff\xfe.py"),
    "dollar_space": "my $dir/k (1).py",
    "line_separator": "k\u2028x\u0085.py",
    "trigraph": "k??/x.py",
    "form_feed": "k\x0cimport os.py",
}
MACRO_PAIRS = [("NULL", "EOF"), ("SIZE_MAX", "INT32_MAX"), ("errno", "assert"), ("CHAR_BIT", "INFINITY"), ("NAN", "HUGE_VAL")]


def with_source(source: str) -> Manifest:
    m = golden_manifest()
    return dataclasses.replace(m, entries=tuple(dataclasses.replace(e, source=source) for e in m.entries))


def with_param_names(pairs) -> Manifest:
    """The golden manifest plus one copy of its first entry (X, Y renamed) per pair of names."""
    m = golden_manifest()
    e = m.entries[0]
    copies = []
    for i, pair in enumerate(pairs):
        names = dict(zip(("X", "Y"), pair))
        params = tuple(dataclasses.replace(p, name=names.get(p.name, p.name)) for p in e.params)
        symbols = tuple(dataclasses.replace(s, param=names.get(s.param, s.param)) for s in e.symbols)
        variants = tuple(dataclasses.replace(v, kernels=tuple(_renamed_args(k, names) for k in v.kernels)) for v in e.variants)
        copies.append(dataclasses.replace(e, name=f"copy{i}", params=params, symbols=symbols, variants=variants))
    return dataclasses.replace(m, entries=(*m.entries, *copies))


def _renamed_args(kernel, names: dict):
    """``kernel`` passing the renamed parameters (the launcher's ``p_<name>`` values)."""
    args = tuple(
        dataclasses.replace(a, name=names.get(a.name, a.name), value=f"p_{names[a.name]}" if a.name in names else a.value)
        for a in kernel.args
    )
    return dataclasses.replace(kernel, args=args)


def compile_cxx(tmp_path: Path, files: dict, main: str, prelude: str = "") -> None:
    """``g++ -fsyntax-only`` of ``main`` among ``files`` (written as generated: UTF-8, path bytes kept)."""
    tvm_ffi = pytest.importorskip("tvm_ffi")  # noqa: F841
    from tl_aot.cuda.toolchain import RUNTIME_INCLUDE, cuda_include_dir, find_cxx, tvm_ffi_paths

    for name, text in files.items():
        (tmp_path / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    (tmp_path / "tu.cc").write_text(prelude + f'#include "{main}"\n')
    p = tvm_ffi_paths()
    inc = ["-I", str(RUNTIME_INCLUDE), "-I", p["include"], "-I", p["dlpack"], "-I", cuda_include_dir(), "-I", str(tmp_path)]
    proc = subprocess.run([find_cxx(), "-std=c++17", "-fsyntax-only", *inc, str(tmp_path / "tu.cc")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]


# --------------------------------------------------------------------------------------------
# One spelling per language: each reads back exactly
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_python_literal_reads_back(text):
    assert ast.literal_eval(py_str(text)) == text


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_docstring_line_cannot_close_the_docstring(text):
    spelled = py_doc_line(text)
    assert "\n" not in spelled and "\r" not in spelled
    assert ast.literal_eval(f'"""{spelled}"""') == text


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_python_comment_stays_one_comment(text):
    line = f"# {py_comment(text)}\nx = 1\n"
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(line).readline) if t.type not in (tokenize.NL, tokenize.NEWLINE)]
    assert tokens[0].type == tokenize.COMMENT
    assert [t.string for t in tokens[1:4]] == ["x", "=", "1"]


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_json_is_ascii_and_reads_back(text):
    spelled = json_text({"source": text})
    assert spelled.isascii()
    assert json.loads(spelled) == {"source": text}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_c_string_body_is_printable_ascii_without_bare_quotes(text):
    body = c_string_body(text)
    assert body.isascii() and body.isprintable()
    assert '"' not in body.replace('\\"', "")


DEPFILE_NAMES = {
    "space": "a b.py",
    "hash": "a#b.py",
    "dollar": "a$b.py",
    "backslash": "a\\b.py",
    "backslash_space": "a\\ b.py",
    "colon": "a:b.py",
    "percent": "a%b.py",
    "non_utf8": os.fsdecode(b"a\xffb.py"),
    "trailing_backslash": "ab\\",
}


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
@pytest.mark.parametrize("name", DEPFILE_NAMES.values(), ids=DEPFILE_NAMES.keys())
def test_depfile_names_each_file_make_reads_back(tmp_path, name):
    """Touching the dependency (and only it) makes the library out of date for make."""
    from tl_aot.pipeline.stamp import depfile_text

    dep, target = tmp_path / name, tmp_path / "libk.so"
    dep.write_text("x")
    target.write_text("t")
    (tmp_path / "k.d").write_bytes(depfile_text(target, (dep,)))
    (tmp_path / "Makefile").write_bytes(b"all: " + bytes(target) + b"\n" + bytes(target) + b":\n\t@echo REBUILD\ninclude k.d\n")

    def rebuilds() -> bool:
        proc = subprocess.run(["make", "-C", str(tmp_path)], capture_output=True)  # bytes: make names the files
        assert proc.returncode == 0, proc.stderr
        return b"REBUILD" in proc.stdout

    now = time.time()
    for f in tmp_path.iterdir():
        os.utime(f, (now - 100, now - 100))
    os.utime(target, (now, now))  # newer than the dependency and than tl_aot's own files (a checkout just edited too)
    assert not rebuilds()
    os.utime(dep, (now + 100, now + 100))
    assert rebuilds()


@pytest.mark.parametrize("name", ["a\nb.py", "a\rb.py", "a\x00b.py"], ids=["newline", "carriage_return", "nul"])
def test_depfile_refuses_what_it_cannot_spell(name):
    with pytest.raises(SpecError, match="cannot be written to a Makefile depfile"):
        depfile_path(f"/src/{name}")


# --------------------------------------------------------------------------------------------
# The generated files with hostile kernel source paths
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", HOSTILE.values(), ids=HOSTILE.keys())
def test_wheel_loader_with_hostile_source_path_is_inert(source):
    """The path sits in the loader's first comment: nothing of it may become a statement."""
    text = render_loader(with_source(source), module="pkg._kernels", library_file="lib_kernels.so")
    text.encode("utf-8")  # the file is written as UTF-8
    plain = render_loader(with_source("kernels/k.py"), module="pkg._kernels", library_file="lib_kernels.so")
    assert ast.dump(ast.parse(text)) == ast.dump(ast.parse(plain))  # the same module, only a comment differs
    first = text.splitlines()[0]
    assert first.startswith("# Generated by tl_aot") and first.endswith("Do not edit.")


def test_wheel_loader_docstring_reads_signatures_back():
    m = golden_manifest()
    text = render_loader(m, module="pkg._kernels", library_file="lib_kernels.so")
    doc = ast.get_docstring(ast.parse(text))
    assert all(e.signature() in doc for e in m.entries)


def test_header_with_hostile_source_paths_compiles(tmp_path):
    """Every hostile path at once, one per entry's doc comment (one compile keeps the test fast)."""
    m = golden_manifest()
    paths = list(HOSTILE.values())
    m = dataclasses.replace(m, entries=tuple(dataclasses.replace(e, source=paths[i % len(paths)]) for i, e in enumerate(m.entries)))
    header = render_header(m)
    assert all(c not in header for c in "\r\x00\x0c\u2028")
    compile_cxx(tmp_path, {"golden.h": header}, "golden.h")


def test_launcher_with_hostile_source_path_compiles(tmp_path):
    m = with_source("".join(HOSTILE.values()))
    compile_cxx(tmp_path, {"golden.h": render_header(m), "launcher.cc": render_launcher(m, header_name="golden.h")}, "launcher.cc")


@pytest.mark.parametrize("source", HOSTILE.values(), ids=HOSTILE.keys())
def test_manifest_json_reads_back(source):
    m = with_source(source)
    assert from_json(Manifest, to_json(m)) == m
    assert to_json(m).isascii()


# --------------------------------------------------------------------------------------------
# Names: C/C++ keywords and the macros of the headers generated code includes
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["NULL", "EOF", "SIZE_MAX", "INT32_MAX", "errno", "assert", "stdout", "INFINITY", "CUDA_VERSION", "NAN"])
def test_macro_names_are_listed_and_renamed(name):
    assert name in cpp_macros() or name in ("errno", "assert")
    assert cpp_reserved(name)
    spelled = cpp_name(name)
    assert spelled != name and not cpp_reserved(spelled)


def test_renamed_names_never_clash():
    assert cpp_name("NULL", {"NULL_"}) == "NULL_2"
    assert cpp_name("x", {"x"}) == "x_"
    assert cpp_name("count") == "count"


def test_header_and_launcher_with_macro_named_params_compile(tmp_path):
    """A user's program may include <cstdio>, <climits>, ... before the header: it still compiles."""
    m = with_param_names(MACRO_PAIRS)
    prelude = "".join(f"#include <{h}>\n" for h in ("cstdio", "climits", "cmath", "cassert", "cstdlib", "cerrno", "cstdint", "cfloat"))
    compile_cxx(tmp_path, {"golden.h": render_header(m)}, "golden.h", prelude)
    compile_cxx(tmp_path, {"launcher.cc": render_launcher(m, header_name="golden.h")}, "launcher.cc")


CUDA = """extern "C" __global__ void __launch_bounds__(128, 1) main_kernel(const float* __restrict__ NULL, int EOF, float x);
extern "C" __global__ void __launch_bounds__(128, 1) main_kernel(const float* __restrict__ NULL, int EOF, float x) {
  float INFINITY[4];
  __shared__ float SIZE_MAX[256];
  if (x < EOF) { INFINITY[0] = NULL[0] * x * NAN; }
}
"""


def test_cuda_source_renames_macro_params_and_locals_only():
    out = rename_reserved_names(CUDA)
    assert "const float* __restrict__ NULL_, int EOF_, float x" in out
    assert "float INFINITY_[4];" in out and "float SIZE_MAX_[256];" in out
    assert "NULL_[0] * x * NAN" in out  # a macro the kernel uses is left alone
    assert rename_reserved_names(out) == out


SHADOWING = """extern "C" __global__ void k(const half_t* __restrict__ half_t, half_t* __restrict__ Y, int blockIdx);
extern "C" __global__ void k(const half_t* __restrict__ half_t, half_t* __restrict__ Y, int blockIdx) {
  Y[((int)blockIdx.x)] = (half_t[((int)blockIdx.x)] + ((half_t)blockIdx));
}
"""
#: What TileLang writes that only looks like a name hiding a type or built-in (from real kernels' CUDA).
NOT_SHADOWING = """extern "C" __global__ void __launch_bounds__(128, 1) k(float* __restrict__ X, float alpha, int m, signed char b) {
  const dim3 blockIdx = tl::rasterization2DRow<10>();
  float mx[4];
  uint4 condval;
  float4 condval_1;
  for (int i_1 = 0; i_1 < 4; ++i_1) {
    mx[i_1] = (alpha * X[i_1]);
    condval_1 = make_float4(0.f, 0.f, 0.f, 0.f);
    if (b) return;
    X[((int)blockIdx.x)] = ((float)((signed char)(m)) + mx[i_1]);
  }
}
"""


def test_names_hiding_a_type_or_built_in_tilelang_code_needs_are_found():
    """nvcc's error names neither (``expected a ")"``, ``expression must have class type``): the build's message does."""
    whats = dict(shadowed_names(SHADOWING))
    assert sorted(whats) == ["blockIdx", "half_t"]
    assert whats["half_t"] == "parameter 'half_t' hides the type half_t, which the kernel's code spells"
    assert whats["blockIdx"] == "parameter 'blockIdx' hides CUDA's built-in blockIdx, which the kernel's code reads (blockIdx.x)"
    assert shadowed_names(NOT_SHADOWING) == []
    assert shadowed_names(CUDA) == []


def test_an_nvcc_error_on_a_shadowing_name_says_to_rename_it(tmp_path):
    from tl_aot.common.arch import parse_arch
    from tl_aot.common.errors import FailedProcessError
    from tl_aot.common.metadata import LoweredVariant
    from tl_aot.pipeline.images import _nvcc_error

    arch = parse_arch("90a")
    failed = FailedProcessError("nvcc (k, sm_90a)", ["nvcc"], 1, "", 'k.cu(2): error: expected a ")"')
    error = str(_nvcc_error(failed, LoweredVariant(entry="k", arch=arch, cuda_source=SHADOWING), arch, tmp_path, "k.py:3 (k)", "k"))
    assert "\n  parameter 'half_t' hides the type half_t, which the kernel's code spells: rename it (TileLang's own JIT fails" in error
    assert "\n  parameter 'blockIdx' hides CUDA's built-in blockIdx" in error


def test_static_shared_arrays_are_counted():
    assert static_shared_bytes(CUDA) == {"main_kernel": 1024}


@pytest.mark.parametrize("name", sorted(RESERVED_ENTRY_NAMES))
def test_entries_may_not_take_the_loaders_names(name, tmp_path):
    e = KernelSpec.create(name=name, source=tmp_path / "k.py", function="f", archs=["80"])
    with pytest.raises(SpecError, match=f"entry name '{name}' is reserved by tl_aot"):
        LibrarySpec("lib", (e,))


def test_reserved_entry_names_cover_the_library_object_and_the_wheel_loader():
    from tl_aot.runtime.loader import Library

    public = {n for n in dir(Library) if not n.startswith("_")}
    loader = ast.parse(render_loader(golden_manifest(), module="pkg._kernels", library_file="lib_kernels.so"))
    defined = {t.id for n in loader.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    defined |= {n.name for n in loader.body if isinstance(n, ast.FunctionDef)}
    entries = {e.exported for e in golden_manifest().entries}
    assert public <= RESERVED_ENTRY_NAMES
    assert {n for n in defined - entries if not n.startswith("__")} - {"__all__"} <= RESERVED_ENTRY_NAMES
    assert "_tl_aot_torch" in RESERVED_ENTRY_NAMES


LIBRARY_NAMES = {
    "tvm_ffi": "the file name of a library",
    "cuda": "the file name of a library",
    "cudart": "the file name of a library",
    "c": "the file name of a library",
    "m": "the file name of a library",
    "dl": "the file name of a library",
    "pthread": "the file name of a library",
    "rt": "the file name of a library",
    "gcc_s": "the file name of a library",
    "python3": "the file name of a library",
    "NULL": "a C/C++ macro",
    "EOF": "a C/C++ macro",
    "SIZE_MAX": "a C/C++ macro",
    "new": "reserved in C++",
}


@pytest.mark.parametrize("name", LIBRARY_NAMES, ids=LIBRARY_NAMES.keys())
def test_library_names_that_would_shadow_or_not_compile_are_refused(name, tmp_path):
    e = KernelSpec.create(name="k", source=tmp_path / "k.py", function="f", archs=["80"])
    with pytest.raises(SpecError, match=f"library name '{name}' .*{re.escape(LIBRARY_NAMES[name])}"):
        LibrarySpec(name, (e,))


# --------------------------------------------------------------------------------------------
# Launch limits, per arch, at build time
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arch", "kib"),
    [("75", 64), ("80", 163), ("86", 99), ("87", 163), ("89", 99), ("90a", 227), ("100a", 227), ("120", 99)],
)
def test_shared_memory_limit_per_arch(arch, kib):
    from tl_aot.common.arch import parse_arch

    assert max_shared_bytes(parse_arch(arch)) == kib * 1024


@pytest.mark.parametrize(
    ("expr", "value"), [("4", 4), ("int64_t(1099511627776)", 2**40), ("(int64_t)7", 7), ("rt::floordiv((s_n + 255), 256)", None)]
)
def test_static_launch_dims(expr, value):
    assert static_int(expr) == value


LIMITS = [
    ("shared", "90a", {"nbytes": 4 << 20}, "4194304 bytes of shared memory per block, more than the limit of 232448"),
    ("shared", "86", {"nbytes": 100 * 1024}, "more than the limit of 101376 (99 KiB) on sm_86"),
    ("shared", "80", {"nbytes": 164 * 1024}, "more than the limit of 166912"),
    ("launch", "90a", {"gx": 2**40}, "grid x = 1099511627776 blocks, more than the limit of 2147483647"),
    ("launch", "90a", {"gz": 65536}, "grid z = 65536 blocks, more than the limit of 65535"),
    ("launch", "90a", {"threads": 4096}, "block x = 4096 threads, more than the limit of 1024"),
    ("launch", "80", {"threads": (32, 8, 8)}, "2048 threads per block, more than the limit of 1024"),
    ("launch", "80", {"gx": 4, "cluster": (2, 1, 1)}, "thread-block clusters (2, 1, 1) need sm_90 or newer"),
    ("launch", "90a", {"gx": 64, "cluster": (32, 1, 1)}, "a cluster of 32 blocks (32, 1, 1), more than the limit of 16"),
    ("launch", "90a", {"gx": 3, "cluster": (2, 1, 1)}, "grid x = 3 is not a multiple of the cluster's 2"),
]


def _lower(function, arch, args):
    pytest.importorskip("tilelang")
    from tl_aot.common.arch import parse_arch
    from tl_aot.lower.lower import lower_variant

    spec = KernelSpec.create(
        name=f"hostile_{function.replace('.', '_')}", source=KERNELS / "hostile.py", function=function, args=args, archs=[arch]
    )
    return lower_variant(spec, parse_arch(arch))


@pytest.mark.parametrize(("function", "arch", "args", "fragment"), LIMITS, ids=[f[3][:40] for f in LIMITS])
def test_impossible_launches_fail_the_build(function, arch, args, fragment):
    with pytest.raises(LoweringError) as info:
        _lower(function, arch, args)
    e = info.value
    assert fragment in str(e)
    assert f"entry 'hostile_{function}'" in str(e) and "kernel main_kernel" in str(e)
    assert (e.entry, e.arch) == (f"hostile_{function}", _lower_arch(arch))
    assert e.location and e.location.endswith(".py:" + str(_def_line(function)))
    assert str(e).endswith(f"\n  at {e.location}")  # every front end prints the message alone: the file:line is in it


def _lower_arch(arch: str) -> str:
    from tl_aot.common.arch import parse_arch

    return parse_arch(arch).sm


def _def_line(function: str) -> int:
    from tl_aot.config.user_code import function_line

    return function_line(KERNELS / "hostile.py", function)


@pytest.mark.parametrize(
    ("function", "arch", "args"),
    [
        ("shared", "80", {"nbytes": 48 * 1024}),
        ("shared", "90a", {"nbytes": 227 * 1024}),
        ("launch", "90a", {"gy": 65535}),
        ("launch", "80", {"threads": 1024}),
        ("launch", "90a", {"gx": 4, "cluster": (2, 1, 1)}),
        ("launch", "90a", {"gx": 32, "cluster": (16, 1, 1)}),
    ],
    ids=["48KiB-sm80", "227KiB-sm90a", "grid-65535", "threads-1024", "cluster-2", "cluster-16"],
)
def test_launches_at_the_limits_build(function, arch, args):
    assert _lower(function, arch, args).kernels


def test_macro_named_params_and_dims_lower_with_renamed_cuda_names():
    v = _lower("macro_names", "80", {})
    assert [p.name for p in v.params] == ["NULL", "SIZE_MAX", "errno"]  # the user's names, as the launcher checks them
    decl = next(line for line in v.cuda_source.splitlines() if "__global__" in line)
    words = set(re.findall(r"\w+", decl))
    assert not words & {"NULL", "SIZE_MAX", "EOF", "errno"}
    assert {"NULL_", "SIZE_MAX_", "EOF_"} <= words
    assert "float INFINITY_[1];" in v.cuda_source and "stdout_[]" in v.cuda_source  # locals too


def test_entries_named_after_macros_get_distinct_cpp_names(tmp_path):
    """Entries ``EOF`` and ``EOF_`` (and ``new``) are separate C++ functions in one header that compiles."""
    m = golden_manifest()
    e = m.entries[0]
    m = dataclasses.replace(m, entries=(*(dataclasses.replace(e, name=n) for n in ("EOF", "EOF_", "new")), *m.entries[1:]))
    header = render_header(m)
    assert "void EOF_2(" in header and "void EOF_(" in header and "void new_(" in header
    files = {"golden.h": header, "launcher.cc": render_launcher(m, header_name="golden.h")}
    compile_cxx(tmp_path, files, "launcher.cc", "#include <cstdio>\n")


# --------------------------------------------------------------------------------------------
# Names the C++ standard reserves to the implementation, and what TileLang accepts beyond C++
# --------------------------------------------------------------------------------------------

#: Valid Python and TileLang names that g++ treats as builtins, keywords or predefined macros.
IMPLEMENTATION_NAMES = ["__LINE__", "__cplusplus", "_Pragma", "_Complex", "__int128", "__restrict", "__func__", "__thread",
                        "__attribute__", "__has_include", "__null", "__real__", "_Bool", "__x", "_Upper"]  # fmt: skip


def test_implementation_names_are_renamed_without_a_double_underscore():
    for name in IMPLEMENTATION_NAMES:
        spelled = [cpp_name(name)]
        for _ in range(3):
            spelled.append(cpp_name(name, set(spelled)))
        assert len(set(spelled)) == 4 and not any(cpp_reserved(s) or "__" in s for s in spelled), spelled
    assert [cpp_name("x_", {"x_"}), cpp_name("EOF", {"EOF_"}), cpp_name("__LINE__")] == ["x_2", "EOF_2", "u_LINE_"]


def test_header_and_launcher_with_implementation_named_params_and_entries_compile(tmp_path):
    """Entries and parameters named ``__LINE__``, ``_Pragma``, ``__int128``...: one header that compiles, names kept in the docs."""
    m = with_param_names(list(zip(IMPLEMENTATION_NAMES, reversed(IMPLEMENTATION_NAMES))))
    entries = [dataclasses.replace(e, name=n) for e, n in zip(m.entries[1:], IMPLEMENTATION_NAMES)]
    m = dataclasses.replace(m, entries=(m.entries[0], *entries))
    header = render_header(m)
    assert "void u_LINE_(" in header and "::tvm::ffi::TensorView u_Pragma" in header
    assert "(__LINE__: " in header and "_Pragma: " in header  # the doc comments show the user's names
    compile_cxx(tmp_path, {"golden.h": header, "launcher.cc": render_launcher(m, header_name="golden.h")}, "launcher.cc")


def test_non_ascii_parameter_names_are_refused_naming_entry_arch_file_line_and_the_fix():
    with pytest.raises(LoweringError) as info:
        _lower("unicode_names", "80", {})
    e = info.value
    assert "entry 'hostile_unicode_names' (sm_80): tensor parameter 'ядро' is not an identifier" in str(e)
    assert "rename it with ASCII letters" in str(e)
    assert e.location and str(e).endswith(f"hostile.py:{_def_line('unicode_names')}")


def test_a_bare_negative_out_idx_returns_the_last_parameter():
    """``@tilelang.jit(out_idx=-1)``, TileLang's usual spelling, builds (it raised "'int' object is not iterable")."""
    v = _lower("jit_last_out", "90a", {})
    assert [(p.name, p.output) for p in v.params] == [("X", False), ("Y", True)]
    assert json.loads(v.request)["options"]["out_idx"] == [-1]


# --------------------------------------------------------------------------------------------
# Kernels that are methods of a class: FILE.py:Class.method
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "factor"), [("doubled", "0x1p+1f"), ("scaled", "0x1.8p+1f")], ids=["staticmethod", "classmethod"])
def test_jit_methods_of_a_class_build_as_class_dot_method(method, factor):
    """``hostile.py:Ops.doubled`` (a ``@staticmethod``) and ``Ops.scaled`` (a ``@classmethod``, ``cls`` bound) lower."""
    v = _lower(f"Ops.{method}", "90a", {"n": 512})
    assert [(p.name, p.shape, p.output) for p in v.params] == [("X", (512,), False), ("Y", (512,), True)]
    assert f"* {factor}" in v.cuda_source  # 2.0, and the class's own scale = 3.0


def test_class_dot_method_targets_name_the_entry_after_the_method_and_point_at_its_line():
    from tl_aot.config.user_code import function_line
    from tl_aot.frontends.cli_library import library_of
    from tl_aot.frontends.cli_parser import build_parser

    args = build_parser().parse_args(["build", "k/hostile.py:Ops.scaled", "--arch", "sm_90a"])
    lib = library_of(args, "build")
    assert (lib.name, lib.entries[0].name, lib.entries[0].function) == ("scaled", "scaled", "Ops.scaled")
    source = (KERNELS / "hostile.py").read_text().splitlines()
    assert source[function_line(KERNELS / "hostile.py", "Ops.scaled") - 1].strip() == "def scaled(cls, n: int = 256, block: int = 128):"
    assert function_line(KERNELS / "hostile.py", "Ops.missing") is None and function_line(KERNELS / "hostile.py", "Nope.x") is None


@pytest.mark.parametrize("bad", ["Ops.", ".scaled", "Ops..scaled", "Ops.class", "Ops-x.y", "Ops.scaled()"])
def test_function_paths_that_are_not_dotted_names_are_refused(bad, tmp_path):
    from tl_aot.config.arg_text import parse_target

    with pytest.raises(SpecError, match="is not a Python function name"):
        parse_target(f"k.py:{bad}")
    with pytest.raises(SpecError, match="is not a Python function name"):
        KernelSpec.create(name="k", source=tmp_path / "k.py", function=bad, archs=["80"])


def test_a_missing_method_is_named_in_full():
    with pytest.raises(LoweringError, match="hostile.py has no function 'Ops.missing'"):
        _lower("Ops.missing", "90a", {})


# --------------------------------------------------------------------------------------------
# Entry names a spec file can spell but C, Python and file names cannot
# --------------------------------------------------------------------------------------------

SPEC_NAMES = [
    ("my.copy", "entry name 'my.copy' is not a valid identifier: .*, e.g. 'my_copy'"),
    ("my-copy", "entry name 'my-copy' is not a valid identifier: .*, e.g. 'my_copy'"),
    ("2d-copy", "entry name '2d-copy' is not a valid identifier: .*, e.g. 'k2d_copy'"),
    ("k" * 220, "is 220 characters long, more than the 120 a name may have"),
]


@pytest.mark.parametrize(("name", "message"), SPEC_NAMES, ids=["dot", "dash", "digit", "220-chars"])
def test_spec_entry_names_that_cannot_name_a_function_are_refused_with_a_spelling_that_can(name, message, tmp_path):
    from tl_aot.spec import load_spec_file

    spec = tmp_path / "lib.toml"
    spec.write_text(f'[library]\nname = "lib"\narchs = ["90a"]\n[[entry]]\nname = "{name}"\nsource = "k.py"\nfunction = "f"\n')
    with pytest.raises(SpecError, match=f"lib.toml: entry #1 .*{message}"):
        load_spec_file(spec)
    KernelSpec.create(name="k" * 120, source=tmp_path / "k.py", function="f", archs=["80"])  # the longest name builds


@pytest.mark.parametrize(("arch", "nbytes"), [("80", 48 * 1024), ("90a", 48 * 1024 + 4)], ids=["48KiB-sm80", "48KiB+4-sm90a"])
def test_shared_memory_at_and_past_48_kib_is_dynamic_and_asks_for_the_opt_in(arch, nbytes):
    """Past the default 48 KiB a launch needs CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: the launcher sets it
    from the variant's dynamic size (tests/unit/cpp/test_launcher_runtime.cc), so the size must be recorded exactly."""
    v = _lower("shared", arch, {"nbytes": nbytes})
    (k,) = v.kernels
    assert k.dynamic_smem == str(nbytes)
    assert not static_shared_bytes(v.cuda_source).get(k.name)  # none static, which no attribute could raise past 48 KiB
