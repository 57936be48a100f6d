"""Sub-byte tensor parameters (int4, uint4, float4_e2m1fn, float6): the packed binding, as TileLang 0.1.15's host code does it.

TileLang's binder (``MakePackedAPI``, read from ``tilelang.lower(...).host_mod``) takes an int4
``[M, N]`` as any 8-bit DLPack storage ``[M, N / 2]``; these tests pin tl_aot's table of that
(:mod:`tl_aot.common.subbyte`) and what the launcher tables, signatures, torch fakes and
specialisation picking make of it. ``tests/integration/test_subbyte_cpu.py`` checks the table
against TileLang's own host code and builds a library; ``tests/gpu/test_subbyte_gpu.py`` calls it.
"""

from __future__ import annotations

import re

import pytest

from tl_aot.codegen.dispatch import plan
from tl_aot.codegen.launcher_tables import check_tables
from tl_aot.common.errors import LoweringError
from tl_aot.common.metadata import LoweredEntry, Param, Symbol
from tl_aot.common.subbyte import SUBBYTE_DTYPES, packing_of, storage_spelled


def _int4(name: str, shape, strides, *, output: bool = False) -> Param:
    cpp = tuple(f"s_{d}" if isinstance(d, str) else str(d) for d in shape)
    k = packing_of("int4")
    assert k is not None
    return Param(
        name,
        "tensor",
        "int4",
        tuple(shape),
        tuple(strides),
        cpp,
        tuple(str(s) for s in strides),
        64,
        output,
        storage_spelled(k, tuple(shape)),
    )


def test_4_bit_types_are_two_per_byte_in_the_storage_tilelang_jit_allocates():
    table = {d: (k.bits, k.pack, k.storage_bits, k.storage, k.storage_dlpack) for d, k in SUBBYTE_DTYPES.items()}
    assert table["int4"] == (4, 2, 8, "int8", (0, 8, 1))
    assert table["uint4"] == (4, 2, 8, "uint8", (1, 8, 1))
    # torch.float4_e2m1fn_x2: DLPack float4_e2m1fn (code 17), 4 bits x 2 lanes
    assert table["float4_e2m1fn"] == (4, 2, 8, "float4_e2m1fn_x2", (17, 4, 2))
    # 8 // 6 == 1: TileLang binds fp6 unpacked, any 6-bit DLPack dtype; torch has none to allocate with
    assert table["float6_e2m3fn"][:4] == (6, 1, 6, "")
    assert packing_of("int8") is None and packing_of("float16") is None


def test_storage_is_spelled_with_the_last_dim_divided():
    k = packing_of("int4")
    assert k is not None
    assert storage_spelled(k, (256,)) == "int8[128]"
    assert storage_spelled(k, ("m", 128)) == "int8[m, 64]"
    assert storage_spelled(k, (64, "n")) == "int8[64, n / 2]"
    assert storage_spelled(k, (64, "n * 4")) == "int8[64, (n * 4) / 2]"
    assert storage_spelled(k, (64, "n * 2")) == "int8[64, n]"
    fp6 = packing_of("float6_e3m2fn")
    assert fp6 is not None and storage_spelled(fp6, (64, 128)) == "6-bit[64, 128]"


def test_signature_says_what_a_caller_passes():
    entry = LoweredEntry("copy", "k.py", "copy", params=(_int4("A", ("m", 128), ("m", 1)),))
    assert entry.signature() == "copy(A: int4[m, 128] packed in int8[m, 64])"


def test_launcher_row_checks_any_8_bit_storage_and_allocates_int8_with_half_the_last_dim():
    a = _int4("A", ("m", 128), (128, 1))
    b = _int4("B", ("m", 128), (128, 1), output=True)
    e = LoweredEntry("rows", "k.py", "rows", params=(a, b), symbols=(Symbol("m", "int32", "A", 0),))
    tables = {t.name: t for t in check_tables(e, [a, b], {}, "entry 'rows'").tables}
    row_a, row_b = tables["tensors"].rows
    # no (code, bits) pairs; trailing packed_bits 8, pack 2: any DLPack dtype of 8 bits, last dim x 2
    assert row_a.startswith('{"A", 2, "[m, 128] (packed in int8[m, 64])", "int4 packed 2 per 8-bit element')
    assert row_a.endswith('"(64, 1)", 64, {0, 8, 1}, nullptr, 0, 8, 2}')  # strides as the caller's storage has them
    alloc = re.search(r"values \+ (\d+), 2, 8, 2}$", row_b)
    assert alloc, row_b
    start = int(alloc.group(1))
    assert tables["values"].rows[start : start + 2] == ("{rt::kSymbol, 0}", "{rt::kConst, 64}")  # int8[m, 64]
    assert "{0, 8, 1}" in row_b  # allocated as torch.int8, as TileLang's JIT allocates it


def test_a_dynamic_packed_last_dim_allocates_half_of_it():
    a = _int4("A", (64, "n"), ("n", 1))
    b = _int4("B", (64, "n"), ("n", 1), output=True)
    e = LoweredEntry("cols", "k.py", "cols", params=(a, b), symbols=(Symbol("n", "int32", "A", 1),))
    ct = check_tables(e, [a, b], {}, "entry 'cols'")
    tables = {t.name: t for t in ct.tables}
    assert "(s_n) / 2" in ct.exprs  # the storage's last dim, from n (bound as A.shape[1] * 2 by the runtime)
    assert '"(n / 2, 1)"' in tables["tensors"].rows[0]


def test_torch_fake_output_is_the_packed_storage():
    from tl_aot.runtime import torch_fakes

    entry = {
        "name": "rows",
        "params": [
            {"name": "A", "kind": "tensor", "dtype": "int4", "shape": [64, "n"]},
            {"name": "B", "kind": "tensor", "dtype": "int4", "shape": [64, "n"], "output": True},
        ],
        "symbols": [{"name": "n", "param": "A", "dim": 1, "cpp": "", "expr": ""}],
    }
    names, values = torch_fakes.shape_values(entry, "entry 'rows'")

    class Storage:  # what torch passes: int8[64, 100] for int4[64, 200]
        shape = (64, 100)

    vals = values([Storage()])
    assert vals["n"] == 200  # the symbol is the kernel's, as TileLang binds it (shape[-1] * 2)
    dims, dtype = torch_fakes.output_spec(entry["params"][1], names, "entry 'rows'")
    assert [f(vals) for f in dims] == [64, 100] and dtype == "int8"


def test_the_standalone_torch_glue_spells_the_same_table():
    """``torch_fakes`` ships inside packages (in ``_tl_aot_torch/``) importing no tl_aot: its copy of the table must agree."""
    from tl_aot.runtime import torch_fakes

    assert torch_fakes.PACKED_DTYPES == {d: (k.pack, k.storage) for d, k in SUBBYTE_DTYPES.items()}


def test_specialisations_are_not_picked_by_a_packed_tensor():
    def member(n: int, name: str) -> LoweredEntry:
        return LoweredEntry(name, "k.py", "copy", params=(_int4("A", (n,), (1,)),), export="copy")

    with pytest.raises(LoweringError, match="'copy'.*A: int4 is a sub-byte tensor passed packed"):
        plan([member(256, "copy__s0"), member(512, "copy__s1")])


def test_a_returned_fp6_output_is_refused_while_lowering():
    from tl_aot.lower.ir_signature import _check_tensor_dtype

    _check_tensor_dtype("float6_e2m3fn", "entry 'k': parameter 'A'", output=False)  # an input: any 6-bit dtype
    with pytest.raises(LoweringError, match="returned output of dtype float6_e2m3fn.*no torch dtype holds"):
        _check_tensor_dtype("float6_e2m3fn", "entry 'k': parameter 'B'", output=True)
    with pytest.raises(LoweringError, match="tensor dtype int2 is not supported.*int4 \\(packed\\)"):
        _check_tensor_dtype("int2", "entry 'k': parameter 'A'", output=False)


def test_the_cutedsl_backend_refuses_sub_byte_tensors_by_name():
    from tl_aot.lower.cutedsl import check_params

    check_params([Param("x", "tensor", "float16", (64,))], "entry 'k' (sm_90a)")
    with pytest.raises(LoweringError, match=r"entry 'k' \(sm_90a\): sub-byte tensor parameters \(A: int4\).*backend = \"cuda\""):
        check_params([_int4("A", (256,), (1,)), Param("x", "tensor", "float16", (64,))], "entry 'k' (sm_90a)")
