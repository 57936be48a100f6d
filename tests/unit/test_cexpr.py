"""TIR host expressions spelled as launcher C++ (tl_aot.lower.cexpr), and what that C++ computes."""

import subprocess

import pytest

pytest.importorskip("tilelang")

import tilelang.language as T  # noqa: E402
from tilelang import tvm  # noqa: E402

from tl_aot.common.errors import LoweringError  # noqa: E402
from tl_aot.lower.cexpr import CppExprPrinter  # noqa: E402

tirx = tvm.tirx
n, k, u, f = tirx.Var("n", "int32"), tirx.Var("k", "int32"), tirx.Var("u", "uint32"), tirx.Var("f", "float32")
NAMES = {"n": "s_n", "k": "a_k", "u": "a_u", "f": "a_f"}


def spell(expr) -> str:
    return CppExprPrinter(NAMES, {}, "entry 'e'")(expr)


def test_bit_operations_are_done_in_their_dtypes_width():
    assert spell(T.shift_left(k, 2)) == "rt::shl<int32_t>(a_k, 2)"
    assert spell(T.shift_right(n + 255, 8)) == "rt::shr<int32_t>((s_n + 255), 8)"
    assert spell(T.shift_right(u, tirx.IntImm("uint32", 1))) == "rt::shr<uint32_t>(a_u, 1)"  # logical: unsigned
    assert spell(T.bitwise_and(n, 7) | T.shift_left(k, 2)) == "rt::bit_or<int32_t>(rt::bit_and<int32_t>(s_n, 7), rt::shl<int32_t>(a_k, 2))"
    assert spell(n ^ 5) == "rt::bit_xor<int32_t>(s_n, 5)"
    assert spell(~k) == "rt::bit_not<int32_t>(a_k)"
    assert spell(T.clz(n)) == "rt::clz<int32_t>(s_n)" and spell(T.popcount(u)) == "rt::popcount<uint32_t>(a_u)"
    wide = tirx.Var("w", "int64")
    assert CppExprPrinter({"w": "s_w"})(T.shift_left(wide, tirx.IntImm("int64", 40))) == "rt::shl<int64_t>(s_w, 40)"


def test_integer_division_truncates_or_floors_as_the_tir_node_says():
    assert spell(tirx.truncdiv(n, 3)) == "(s_n / 3)" and spell(tirx.truncmod(n, 3)) == "(s_n % 3)"
    assert spell(tirx.floordiv(n, 3)) == "rt::floordiv(s_n, 3)" and spell(tirx.floormod(n, 3)) == "rt::floormod(s_n, 3)"


def test_floats_conditions_and_math():
    assert spell(T.max(f, 1.0)) == "rt::max<double>(a_f, 1.0)"  # not truncated to an integer
    assert spell(T.min(n, 3)) == "rt::min<int64_t>(s_n, 3)"
    assert spell(T.Cast("int32", f * 2.0)) == "static_cast<int64_t>((a_f * 2.0))"
    assert spell(T.exp2(f)) == "std::exp2(static_cast<float>(a_f))"
    assert spell(T.likely(n > 1)) == "(s_n > 1)"
    assert spell(T.if_then_else(n > 1, n, 1)) == "((s_n > 1) ? s_n : 1)"


def test_what_has_no_launcher_spelling_is_a_build_error():
    with pytest.raises(LoweringError, match="entry 'e': cannot express the call to tirx.call_extern"):
        spell(T.call_extern("int32", "my_host_fn", n))


def test_printed_expressions_compute_what_tilelang_host_code_computes(tmp_path):
    """The spelled C++ compiled against the launcher runtime header, for values where int32 wraps or signs matter."""
    from tl_aot.cuda.toolchain import RUNTIME_INCLUDE, cuda_include_dir, find_cxx, tvm_ffi_paths

    cases = {
        T.shift_left(k, 29): -(2**31),  # 4 << 29 wraps in int32, as the host's int32_t does
        T.shift_right(n + 255, 8): 4,  # ceildiv(1000, 256)
        T.shift_right(k - 12, 1): -4,  # arithmetic shift of a negative int32
        T.shift_right(u, tirx.IntImm("uint32", 28)): 15,  # logical shift of 0xFFFFFFFF
        T.bitwise_and(n, 7) | T.shift_left(k, 2): 16,  # (1000 & 7) | (4 << 2)
        ~k: -5,
        T.clz(k): 29,
        tirx.truncdiv(k - 11, 2): -3,  # C++'s truncation, where floordiv gives -4
        tirx.floordiv(k - 11, 2): -4,
    }
    lines = "\n".join(f'  std::printf("%lld\\n", static_cast<long long>({spell(e)}));' for e in cases)
    src = tmp_path / "eval.cc"
    src.write_text(
        "#include <tl_aot/launcher_runtime.h>\n#include <cstdio>\nnamespace rt = ::tl_aot::rt;\n"
        "int main() {\n  const int64_t s_n = 1000; const int32_t a_k = 4; const uint32_t a_u = 0xFFFFFFFFu; const float a_f = 0.5f;\n"
        f"  (void)a_f;\n{lines}\n}}\n"
    )
    p = tvm_ffi_paths()
    exe = tmp_path / "eval"
    cmd = [find_cxx(), "-std=c++17", "-Wall", "-Werror", "-I", str(RUNTIME_INCLUDE), "-I", p["include"], "-I", p["dlpack"]]
    cmd += ["-I", cuda_include_dir(), str(src), "-L" + p["libdir"], "-ltvm_ffi", "-Wl,-rpath," + p["libdir"], "-o", str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert [int(x) for x in out] == list(cases.values())
