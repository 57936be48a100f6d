"""Sub-byte (int4, float4_e2m1fn) tensor parameters build, and say how a caller passes them.

TileLang's int4 GEMM example (``examples/gemm_int4``) and its fp4 GEMMs declare
``T.Tensor((M, K), T.int4)`` parameters; TileLang's JIT takes them packed (for 4-bit types any
8-bit storage with the last dim halved: ``torch.int8``). ``tests/kernels/subbyte.toml`` (an int4
copy, an int4 ``[m, 128]`` copy returning its output, an int4 ``[16, n]``
copy, an fp4 copy) is built once here, on the CPU:
lowered, compiled with nvcc, its launcher compiled against the runtime, and what ``inspect``, the
manifest and the C++ header say is checked. The packing table is checked against TileLang's own
host code too. The calls themselves are in ``tests/gpu/test_subbyte_gpu.py``.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from support.helpers import KERNELS, ok, tl_aot_here
from support.tilelang_release import tilelang_at_least

pytest.importorskip("tilelang")


#: TileLang 0.1.12 and 0.1.13 refuse ``int4_copy`` themselves: their vectoriser turns the 1-D copy into int4x2 loads
#: and their CUDA codegen stops at "Cannot convert type int4x2 to CUDA type!" (``tilelang.lower`` alone, no tl_aot).
#: 0.1.14 and 0.1.15 lower it; the other three kernels lower on every tested release.
INT4_COPY_LOWERS = tilelang_at_least("0.1.14")
ENTRIES = ["fp4_copy", "int4_cols", "int4_copy", "int4_rows"] if INT4_COPY_LOWERS else ["fp4_copy", "int4_cols", "int4_rows"]
INT4_COPY = "int4_copy(A: int4[256] packed in int8[128], B: int4[256] packed in int8[128])"


@pytest.fixture(scope="module")
def built(tmp_path_factory, cache_dir) -> Path:
    """The library; on a TileLang that refuses int4_copy, built --keep-going, its refusal named as TileLang words it."""
    out = tmp_path_factory.mktemp("subbyte")
    args = ["build", "--spec", KERNELS / "subbyte.toml", "-o", out, "--cache-dir", cache_dir, "--header-dir", out / "include"]
    proc = ok(tl_aot_here(*args, *([] if INT4_COPY_LOWERS else ["--keep-going"])))
    if not INT4_COPY_LOWERS:
        assert "int4_copy (sm_90a): InternalError: Cannot convert type int4x2 to CUDA type!" in proc.stdout + proc.stderr
    return out


def test_inspect_says_each_sub_byte_param_is_packed_as_tilelang_takes_it(built):
    text = ok(tl_aot_here("inspect", built / "libtl_subbyte.so")).stdout
    assert (INT4_COPY in text) == INT4_COPY_LOWERS
    assert "int4_rows(A: int4[m, 128] packed in int8[m, 64]) -> B: int4[m, 128] packed in int8[m, 64]" in text
    assert "param A: tensor float4_e2m1fn[64, 128] packed in float4_e2m1fn_x2[64, 64] (2 per element" in text
    assert "dynamic: m = A.shape[0]" in text
    assert "int4_cols(A: int4[16, n] packed in int8[16, n / 2], B: int4[16, n] packed in int8[16, n / 2])" in text
    assert "dynamic: n = A.shape[1] * 2" in text  # the packed dim: twice the storage's


def test_manifest_and_header_carry_the_storage(built):
    import tl_aot

    lib = tl_aot.load(built / "libtl_subbyte.so")
    assert sorted(lib.entries) == ENTRIES
    man = json.loads(ok(tl_aot_here("inspect", "--json", built / "libtl_subbyte.so")).stdout)
    params = {(e["name"], p["name"]): p for e in man["entries"] for p in e["params"]}
    assert params["int4_rows", "B"]["dtype"] == "int4" and params["int4_rows", "B"]["shape"] == ["m", 128]
    assert params["int4_rows", "B"]["storage"] == "int8[m, 64]" and params["int4_rows", "B"]["output"]
    header = (built / "include" / "tl_subbyte.h").read_text()
    assert (f"/// {INT4_COPY}" in header) == INT4_COPY_LOWERS


def _host_code(func) -> str:
    import tilelang
    from tvm.target import Target

    target = Target({"kind": "cuda", "arch": "sm_90a"})
    with target:
        return str(tilelang.lower(func, target=target).host_mod)


def test_the_packing_is_tilelangs_own(built):
    """TileLang's host code for an int4 [64, 128] (input, and returned output) binds what tl_aot's table says."""
    import tilelang.language as T

    from tl_aot.common.subbyte import packing_of

    @T.prim_func
    def main(A: T.Tensor((64, 128), "int4"), B: T.Tensor((64, 128), "int4")):
        with T.Kernel(1, threads=128) as _:
            for i, j in T.Parallel(64, 128):
                B[i, j] = A[i, j]

    k = packing_of("int4")
    assert k is not None and (k.pack, k.storage_bits) == (2, 8)
    host = _host_code(main)
    # no dtype-code check: total bits, then the last dim packed `pack` to a storage element, other strides scaled
    assert 'main_A_shape_1[1]) * 2 == 128, ("RuntimeError", ["kernel main input A shape[1] violates' in host
    assert "main_A_strides_1[0])) * 2 == 128" in host and "main_A_strides_1[1])) == 1" in host
    assert "== T.uint64(32768)" in host and "input A dtype mismatch" not in host
    try:  # TileLang 0.1.14 on allocates a returned output in its host code (0.1.12, 0.1.13: in Python, the same tensor)
        from tilelang.jit.abi import prepare_tvm_ffi_callee_allocated_outputs
    except ImportError:
        return
    # 0.1.15 asks the backend whether it allocates (the keyword); in 0.1.14 the tvm_ffi backend always does
    opt_in = "supports_callee_allocated_outputs" in inspect.signature(prepare_tvm_ffi_callee_allocated_outputs).parameters
    func, _ = prepare_tvm_ffi_callee_allocated_outputs(main, [1], **({"supports_callee_allocated_outputs": True} if opt_in else {}))
    host = _host_code(func)
    code, bits, lanes = k.storage_dlpack  # DLPack (0, 8, 1) [64, 64]: torch.int8 with the last dim halved
    assert f"prototype_storage, 0, 5, T.uint8({code}))" in host and f"prototype_storage, 0, 6, T.uint8({bits}))" in host
    assert f"prototype_storage, 0, 7, T.uint16({lanes}))" in host
    assert "callee_allocated_output_shape_storage, 1, 17, T.int64(64))" in host
