"""Launcher coverage on the GPU, against torch: solved dims, bit operations in launch bounds, tensorless entries."""

from __future__ import annotations

import math
import uuid

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("n", [1, 1000, 65537])
def test_a_dim_solved_from_n_times_2(coverage_lib, n):
    x = torch.randn(2 * n, device="cuda")
    y = coverage_lib.pair_sum(x)
    assert y.shape == (n,) and y.device == x.device
    torch.testing.assert_close(y, x.view(n, 2).sum(1))
    explicit = torch.full((n,), float("nan"), device="cuda")
    coverage_lib.pair_sum(x, explicit)
    torch.testing.assert_close(explicit, y, rtol=0, atol=0)


def test_a_dim_solved_from_n_plus_2(coverage_lib):
    x = torch.randn(4098, device="cuda")
    torch.testing.assert_close(coverage_lib.stencil3(x), x[:-2] + x[1:-1] + x[2:])


def test_a_dim_that_does_not_solve_exactly_launches_nothing(coverage_lib):
    with pytest.raises(ValueError, match=r"pair_sum: argument 'X' expected shape \[n \* 2\] with dim 0 = n \* 2 for an integer n"):
        coverage_lib.pair_sum(torch.randn(9, device="cuda"))
    torch.cuda.synchronize()
    x = torch.randn(8, device="cuda")
    torch.testing.assert_close(coverage_lib.pair_sum(x), x.view(4, 2).sum(1))  # still usable


@pytest.mark.parametrize("num_pages,batch,max_pages", [(7, 1, 1), (64, 3, 9)])
def test_paged_kv_cache_gather(coverage_lib, num_pages, batch, max_pages):
    k = torch.randn(num_pages * 16, 4, 64, device="cuda", dtype=torch.float16)
    table = torch.randint(0, num_pages, (batch, max_pages), device="cuda", dtype=torch.int32)
    out = coverage_lib.paged_gather(k, table)
    ref = k.view(num_pages, 16, 4, 64)[table.long()].reshape(batch, max_pages * 16, 4, 64)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


def test_bit_operations_size_the_grid_and_shared_memory(coverage_lib):
    x = torch.randn(1000, device="cuda")
    y = torch.full_like(x, float("nan"))
    coverage_lib.tile_copy(x, y, 7)  # grid 1127 >> 7 = 8 blocks; 1 << 7 floats of shared memory
    torch.testing.assert_close(y, x * 2)
    with pytest.raises(ValueError, match="tile_copy: kernel main_kernel would need 4194304 bytes of dynamic shared memory"):
        coverage_lib.tile_copy(x, y, 20)  # (1 << 20) * 4 bytes: refused before launch


def test_alibi_slopes_and_sinusoidal_table_need_no_input(coverage_lib):
    slopes = coverage_lib.alibi_slopes()
    assert isinstance(slopes, torch.Tensor) and slopes.device == torch.device("cuda", torch.cuda.current_device())
    ref = torch.pow(2.0, -8.0 / 12 * torch.arange(1, 13, dtype=torch.float64, device="cuda")).float()
    torch.testing.assert_close(slopes, ref, rtol=1e-5, atol=0)
    table = coverage_lib.sinusoidal()
    pos = torch.arange(128, dtype=torch.float64, device="cuda")[:, None]
    angle = pos * torch.pow(10000.0, -torch.arange(32, dtype=torch.float64, device="cuda") / 32)
    torch.testing.assert_close(table, torch.cat([angle.sin(), angle.cos()], 1).float(), rtol=0, atol=2e-3)


def test_an_output_sized_by_a_scalar(coverage_lib):
    out = coverage_lib.arange(1000, 5, 3)
    assert out.dtype == torch.int32
    torch.testing.assert_close(out, torch.arange(5, 5 + 3 * 1000, 3, device="cuda", dtype=torch.int32), rtol=0, atol=0)
    given = torch.empty(10, device="cuda", dtype=torch.int32)
    assert coverage_lib.arange(given, 10, 0, 1) is None  # every parameter: the output's device and its checks
    torch.testing.assert_close(given.cpu(), torch.arange(10, dtype=torch.int32), rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"arange: argument 'out' expected shape \[n\] with dim 0 = n = 11, got \[10\]"):
        coverage_lib.arange(given, 11, 0, 1)
    with pytest.raises(ValueError, match=r"arange: output 'out' would have shape \[-4\]"):
        coverage_lib.arange(-4, 0, 1)


def test_tensorless_entries_follow_torchs_current_stream_and_device(coverage_lib):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        out = coverage_lib.arange(1 << 20, 0, 1)  # allocated and written on the side stream
    s.synchronize()
    assert int(out[-1]) == (1 << 20) - 1
    if torch.cuda.device_count() < 2:
        return
    with torch.cuda.device(1):
        assert coverage_lib.alibi_slopes().device == torch.device("cuda", 1)


def test_tensorless_op_under_torch_compile(coverage_lib):
    ops = coverage_lib.register_torch_ops("cov_" + uuid.uuid4().hex[:8])

    @torch.compile(fullgraph=True)
    def scaled(heads_bias):
        return ops.alibi_slopes() * heads_bias + ops.arange(12, 0, 1).float()

    got = scaled(torch.ones(12, device="cuda"))
    want = coverage_lib.alibi_slopes() + torch.arange(12, device="cuda").float()
    torch.testing.assert_close(got, want)
    assert math.isclose(float(got[0]), 2 ** (-8 / 12), rel_tol=1e-5)


def test_parameters_tilelang_named_alike_keep_their_own_values(coverage_lib):
    x = torch.randn(1000, device="cuda")
    lane = torch.arange(1000, device="cuda") % 128
    torch.testing.assert_close(coverage_lib.gated_scale(x, 2.0, -3.0), torch.where(lane < 64, x * 2.0, x * -3.0))


def test_two_symbols_of_one_name_take_two_lengths(coverage_lib):
    x, y = torch.randn(100, device="cuda"), torch.zeros(70, device="cuda")
    coverage_lib.two_lengths(x, y)
    torch.testing.assert_close(y, x[:70] * 2.0)
