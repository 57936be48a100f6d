"""Each kind of kernel against a torch reference, on a real GPU (marker ``gpu``)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu


def _ref_gemm(a, b):
    return (a.float() @ b.float()).to(a.dtype)


@pytest.mark.parametrize(
    "entry,m,n,k,dtype", [("gemm_f16", 1024, 1024, 1024, torch.float16), ("gemm_bf16", 1024, 512, 768, torch.bfloat16)]
)
def test_gemm_matches_torch(testlib, entry, m, n, k, dtype):
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    c = torch.empty(m, n, device="cuda", dtype=dtype)
    getattr(testlib, entry)(a, b, c)
    torch.testing.assert_close(c, _ref_gemm(a, b), rtol=2e-2, atol=2e-1)


@pytest.mark.parametrize("m", [1, 100, 128, 1000, 4096])
def test_dynamic_gemm_several_sizes(testlib, m):
    a = torch.randn(m, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    c = torch.full((m, 512), float("nan"), device="cuda", dtype=torch.float16)
    testlib.gemm_dyn(a, b, c)
    torch.testing.assert_close(c, _ref_gemm(a, b), rtol=2e-2, atol=2e-1)


@pytest.mark.parametrize("n", [1, 255, 256, 1000, 1 << 20])
def test_elementwise_dynamic_length(testlib, n):
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    testlib.add_one(x, y)
    torch.testing.assert_close(y, x + 1)


def test_scalars(testlib):
    x = torch.randn(4096, device="cuda")
    y = torch.randn(4096, device="cuda")
    ref = 2.5 * x + y + 3
    testlib.axpy(x, y, 2.5, 3)
    torch.testing.assert_close(y, ref)


@pytest.mark.parametrize("rows", [1, 3, 4, 1000])
def test_softmax_dynamic_rows(testlib, rows):
    x = torch.randn(rows, 1024, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    testlib.softmax(x, y)
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), dim=1), rtol=1e-2, atol=1e-3)


def test_two_kernels_in_order(testlib):
    x = torch.randn(4096, device="cuda")
    y = torch.empty_like(x)
    z = torch.empty_like(x)
    testlib.two_kernels(x, y, z, 3.0)
    torch.testing.assert_close(y, 3 * x)
    torch.testing.assert_close(z, 3 * x + 2)


def test_cuda_source_kernel(testlib):
    x = torch.randn(3000, device="cuda")
    y = torch.empty_like(x)
    testlib.source_scale(x, y)
    torch.testing.assert_close(y, 3 * x + 1)


def test_runs_on_torch_current_stream(testlib):
    """The kernel must be ordered after earlier work on the side stream (it reads what that wrote)."""
    src = torch.randn(1 << 20, device="cuda")
    x = torch.zeros_like(src)
    y = torch.empty_like(src)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # keep the side stream busy: a kernel on any other stream runs first
        x.copy_(src)
        testlib.add_one(x, y)
    s.synchronize()
    torch.testing.assert_close(y, src + 1)


def test_explicit_stream_argument(testlib):
    src = torch.randn(1 << 20, device="cuda")
    x = torch.zeros_like(src)
    y = torch.empty_like(src)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)
        x.copy_(src)
    testlib.add_one(x, y, s.cuda_stream)  # called on the default stream, told to use s
    s.synchronize()
    torch.testing.assert_close(y, src + 1)


def test_bad_call_launches_nothing_and_library_stays_usable(testlib):
    x = torch.randn(1024, device="cuda")
    y = torch.full_like(x, 7.0)
    with pytest.raises(TypeError, match="add_one: argument 'Y' expected dtype float32, got float16"):
        testlib.add_one(x, y.half())
    with pytest.raises(ValueError, match="add_one: argument 'Y' expected shape"):
        testlib.add_one(x, y[:1000])
    torch.cuda.synchronize()
    assert torch.all(y == 7.0)
    testlib.add_one(x, y)
    torch.testing.assert_close(y, x + 1)


def test_tma_alignment_checked(testlib):
    a = torch.randn(129 * 512 + 1, device="cuda", dtype=torch.float16)[1:].view(129, 512)  # 2-byte misaligned
    b = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    c = torch.empty(129, 512, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match=r"gemm_dyn: argument 'A' expected .*aligned to \d+ bytes"):
        testlib.gemm_dyn(a, b, c)


def test_cleanup_then_call_again(testlib):
    x = torch.randn(1000, device="cuda")
    y = torch.empty_like(x)
    testlib.add_one(x, y)
    assert testlib.cleanup() == 0
    assert testlib.cleanup() == 0  # twice is harmless
    testlib.add_one(x, y)
    torch.testing.assert_close(y, x + 1)


def test_l2_persisting_window_kernel(testlib):
    x = torch.randn(65536, device="cuda")
    y = torch.empty_like(x)
    testlib.add_one_l2(x, y)
    torch.testing.assert_close(y, x + 1)


def test_conv2d_with_im2col_tma(testlib):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("conv_im2col is built for sm_90a only")
    n, c, h, w, f = 2, 64, 16, 16, 64
    data = torch.randn(n, h, w, c, device="cuda", dtype=torch.float16)
    weight = torch.randn(3, 3, c, f, device="cuda", dtype=torch.float16)
    out = torch.empty(n, h, w, f, device="cuda", dtype=torch.float16)
    testlib.conv_im2col(data, weight, out)
    ref = torch.nn.functional.conv2d(data.permute(0, 3, 1, 2).float(), weight.permute(3, 2, 0, 1).float(), padding=1)
    torch.testing.assert_close(out.float(), ref.permute(0, 2, 3, 1), rtol=2e-2, atol=2e-1)


def test_cluster_launch(testlib):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("cluster_rank is built for sm_90a only")
    y = torch.full((1024,), -1, device="cuda", dtype=torch.int32)
    testlib.cluster_rank(y)
    expected = (torch.arange(1024, device="cuda") // 128 % 2).int()
    torch.testing.assert_close(y, expected)


def test_no_image_for_this_gpu_is_a_clear_error(testlib):
    if torch.cuda.get_device_capability() == (9, 0):
        pytest.skip("this GPU has an sm_90a image")
    with pytest.raises(RuntimeError, match="cluster_rank: no kernel image fits cuda:0 .* built for sm_90a"):
        testlib.cluster_rank(torch.empty(1024, device="cuda", dtype=torch.int32))
