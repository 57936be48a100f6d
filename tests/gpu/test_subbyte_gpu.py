"""Sub-byte (int4, fp4) tensor parameters on the GPU, called exactly as TileLang's JIT is called.

TileLang's JIT takes an int4 ``[N]`` as 8-bit storage ``[N / 2]`` (``torch.int8``; its host code
checks the storage's bits, not its dtype code) and returns an int4 output as ``torch.int8`` with
the last dim halved. ``tests/kernels/subbyte.toml``, built by tl_aot, must take the same tensors,
give the same results as the JIT on the same call, and refuse a wrong one with tl_aot's error
(entry, argument, expected, got).
"""

from __future__ import annotations

import importlib.util
import re

import pytest
from support.builds import prebuilt_or_build
from support.helpers import KERNELS
from support.tilelang_release import tilelang_at_least

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def lib(tmp_path_factory, cache_dir):
    """``libtl_subbyte.so``: int4_copy (int4[256]), int4_rows (int4[m, 128] -> returned), int4_cols (int4[16, n]), fp4_copy."""
    import tl_aot
    from tl_aot.common.tilelang_compat import installed_version

    if installed_version() and not tilelang_at_least("0.1.14"):
        pytest.skip("TileLang before 0.1.14 refuses int4_copy itself (int4x2 has no CUDA type): test_subbyte_cpu.py expects that")
    return tl_aot.load(prebuilt_or_build(KERNELS / "subbyte.toml", "tl_subbyte", tmp_path_factory, cache_dir))


@pytest.fixture(scope="module")
def kernels():
    """The kernel file itself, unchanged, for TileLang's JIT to compile (the GPU machine may have no TileLang)."""
    pytest.importorskip("tilelang")
    spec = importlib.util.spec_from_file_location("tl_aot_test_subbyte", KERNELS / "subbyte.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bytes(*shape, dtype=torch.int8):
    """Random packed storage: every byte two int4 (or fp4) values."""
    return torch.randint(-128, 128, shape, dtype=torch.int8, device="cuda").view(dtype)


def test_int4_copy_takes_int8_storage(lib):
    a = _bytes(128)  # int4[256]
    b = torch.zeros_like(a)
    assert lib.int4_copy(a, b) is None
    torch.cuda.synchronize()
    assert torch.equal(b, a)  # a copy: every nibble where it was


def test_any_8_bit_storage_is_taken_as_the_jit_takes_it(lib):
    a = _bytes(128).view(torch.uint8)  # TileLang checks bits x lanes x elements, not the dtype code
    b = torch.zeros_like(a)
    lib.int4_copy(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)


def test_wrong_calls_get_tl_aots_error_and_nothing_runs(lib):
    b = torch.zeros(128, dtype=torch.int8, device="cuda")
    expected = "int4_copy: argument 'A' expected shape [256] (packed in int8[128]) with dim 0 = 256, "
    with pytest.raises(ValueError, match=re.escape(expected + "got [200] (packed in int8[100])")):
        lib.int4_copy(_bytes(100), b)
    with pytest.raises(ValueError, match=re.escape(expected + "got [512] (packed in int8[256])")):
        lib.int4_copy(_bytes(256), b)  # one int4 a byte: unpacked, refused as TileLang refuses it
    with pytest.raises(TypeError, match=re.escape("int4_copy: argument 'A' expected dtype int4 packed 2 per 8-bit element")):
        lib.int4_copy(torch.zeros(128, dtype=torch.float16, device="cuda"), b)
    torch.cuda.synchronize()
    assert not b.any()


def test_returned_int4_output_is_int8_with_half_the_last_dim(lib):
    a = _bytes(37, 64)  # int4[37, 128]
    b = lib.int4_rows(a)
    torch.cuda.synchronize()
    assert (b.dtype, tuple(b.shape), b.device) == (torch.int8, (37, 64), a.device)
    assert torch.equal(b, a)
    explicit = torch.zeros_like(a)
    assert lib.int4_rows(a, explicit) is None
    torch.cuda.synchronize()
    assert torch.equal(explicit, a)
    wide = _bytes(37, 128)[:, :64]  # storage strides (128, 1): int4 strides (256, 1), not the kernel's (128, 1)
    with pytest.raises(ValueError, match=re.escape("int4_rows: argument 'A' expected a contiguous tensor with strides (64, 1)")):
        lib.int4_rows(wide)


def test_a_dynamic_packed_dim_binds_twice_the_storages(lib):
    a = _bytes(16, 50)  # int4[16, 100]: n = 100
    b = torch.zeros_like(a)
    lib.int4_cols(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a)  # every one of the 100 int4 of each row copied, none past
    with pytest.raises(
        ValueError, match=re.escape("int4_cols: argument 'B' expected shape [16, n] (packed in int8[16, n / 2]) with dim 1")
    ):
        lib.int4_cols(a, torch.zeros(16, 51, dtype=torch.int8, device="cuda"))


def test_fp4_takes_torchs_float4_e2m1fn_x2(lib):
    fp4x2 = getattr(torch, "float4_e2m1fn_x2", None)
    if fp4x2 is None:
        pytest.skip("this torch has no float4_e2m1fn_x2")
    a = _bytes(64, 64, dtype=fp4x2)  # float4_e2m1fn[64, 128]
    b = torch.zeros(64, 64, dtype=torch.uint8, device="cuda").view(fp4x2)
    lib.fp4_copy(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b.view(torch.uint8), a.view(torch.uint8))


def test_each_entry_matches_tilelangs_jit_on_the_same_call(lib, kernels):
    """The kernel file, unchanged, compiled by TileLang's JIT and called with the same tensors: the same results."""
    import tilelang

    a = _bytes(128)
    got, want = torch.zeros_like(a), torch.zeros_like(a)
    lib.int4_copy(a, got)
    tilelang.compile(kernels.int4_copy(), target="cuda")(a, want)
    rows = _bytes(37, 64)
    got_rows = lib.int4_rows(rows)
    want_rows = kernels.int4_rows()(rows)  # @tilelang.jit(out_idx=[-1]): the JIT allocates and returns B
    torch.cuda.synchronize()
    assert torch.equal(got, want)
    assert (got_rows.dtype, tuple(got_rows.shape)) == (want_rows.dtype, tuple(want_rows.shape))
    assert torch.equal(got_rows, want_rows)
    cols = _bytes(16, 50)
    got_cols, want_cols = torch.zeros_like(cols), torch.zeros_like(cols)
    lib.int4_cols(cols, got_cols)
    tilelang.compile(kernels.int4_cols(), target="cuda")(cols, want_cols)
    torch.cuda.synchronize()
    assert torch.equal(got_cols, want_cols)
    fp4x2 = getattr(torch, "float4_e2m1fn_x2", None)
    if fp4x2 is not None:
        x = _bytes(64, 64, dtype=fp4x2)
        got4 = torch.zeros(64, 64, dtype=torch.uint8, device="cuda").view(fp4x2)
        want4 = torch.zeros(64, 64, dtype=torch.uint8, device="cuda").view(fp4x2)
        lib.fp4_copy(x, got4)
        tilelang.compile(kernels.fp4_copy(), target="cuda")(x, want4)
        torch.cuda.synchronize()
        assert torch.equal(got4.view(torch.uint8), want4.view(torch.uint8))
