"""Entries that return their outputs, on the GPU: like the JIT, as torch ops, under torch.compile and CUDA graphs."""

from __future__ import annotations

import uuid

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu


def scale_add_ref(x, b):
    return (x.float() * 2 + b.float()).half()


@pytest.mark.parametrize("rows", [1, 3, 4096])
def test_returned_output_equals_the_explicit_output_path(outputs_lib, rows):
    x = torch.randn(rows, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, device="cuda", dtype=torch.float16)
    y = outputs_lib.scale_add(x, b)
    assert isinstance(y, torch.Tensor) and y.shape == (rows, 1024) and y.dtype == torch.float16 and y.device == x.device
    explicit = torch.full_like(x, float("nan"))
    assert outputs_lib.scale_add(x, b, explicit) is None
    torch.testing.assert_close(y, explicit, rtol=0, atol=0)
    torch.testing.assert_close(y, scale_add_ref(x, b), rtol=1e-3, atol=1e-3)
    inplace = torch.full_like(x, float("nan"))
    outputs_lib.scale_add_inplace(x, b, inplace)  # out_idx = [] in the spec: the same kernel, outputs passed
    torch.testing.assert_close(inplace, y, rtol=0, atol=0)


def test_several_outputs_come_back_as_a_tuple(outputs_lib):
    x = torch.randn(64, 512, device="cuda")
    total, peak = outputs_lib.row_stats(x)
    torch.testing.assert_close(total, x.sum(1), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(peak, x.amax(1), rtol=0, atol=0)
    t2, p2 = torch.empty(64, device="cuda"), torch.empty(64, device="cuda")
    assert outputs_lib.row_stats(x, t2, p2) is None
    torch.testing.assert_close((t2, p2), (total, peak), rtol=0, atol=0)


def test_output_first_and_a_stream_argument(outputs_lib):
    a, c = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = outputs_lib.axpy_first(a, 3.0, c)  # the current (side) stream: allocated and run there
    s.synchronize()
    torch.testing.assert_close(out, a * 3 + c)
    out2 = outputs_lib.axpy_first(a, 3.0, c, torch.cuda.current_stream().cuda_stream)  # inputs + explicit stream
    explicit = torch.empty_like(a)
    outputs_lib.axpy_first(explicit, a, 3.0, c)  # every parameter: same count as inputs + stream
    torch.cuda.synchronize()
    torch.testing.assert_close(out2, out, rtol=0, atol=0)
    torch.testing.assert_close(explicit, out, rtol=0, atol=0)


def test_wrong_explicit_output_is_refused_and_nothing_runs(outputs_lib):
    x = torch.randn(8, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, device="cuda", dtype=torch.float16)
    y = torch.zeros(9, 1024, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match=r"scale_add: argument 'y' expected shape \[m, 1024\]"):
        outputs_lib.scale_add(x, b, y)
    torch.cuda.synchronize()
    assert not y.any()
    with pytest.raises(TypeError, match="takes its inputs"):
        outputs_lib.scale_add(x)
    torch.testing.assert_close(outputs_lib.scale_add(x, b), scale_add_ref(x, b), rtol=1e-3, atol=1e-3)


def test_cuda_graph_captures_calls_that_allocate(outputs_lib):
    x = torch.randn(16, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, device="cuda", dtype=torch.float16)
    big = torch.randn(64, 512, device="cuda")
    outputs_lib.prepare(0)  # load the kernels before capture
    outputs_lib.scale_add(x, b)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = outputs_lib.scale_add(x, b)
        total, peak = outputs_lib.row_stats(big)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        big.copy_(torch.randn_like(big))
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, scale_add_ref(x, b), rtol=1e-3, atol=1e-3)
        torch.testing.assert_close(peak, big.amax(1), rtol=0, atol=0)


def test_torch_compile_fullgraph_of_a_model_using_two_entries(outputs_lib):
    ops = outputs_lib.register_torch_ops("tlo_" + uuid.uuid4().hex[:8])

    def model(x, b, z):
        y = ops.scale_add(x, b)
        total, peak = ops.row_stats(z)
        return torch.relu(y) + 1, total - peak

    x = torch.randn(256, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, device="cuda", dtype=torch.float16)
    z = torch.randn(64, 512, device="cuda")
    eager = model(x, b, z)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True)
    for rows in (256, 100):  # a second row count: the fake implementation shapes the new output
        xs = x[:rows].contiguous()
        got, want = compiled(xs, b, z), model(xs, b, z)
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(compiled(x, b, z), eager, rtol=1e-3, atol=1e-3)
    cg = torch.compile(model, fullgraph=True, mode="reduce-overhead")  # CUDA graphs through torch.compile
    for _ in range(3):
        torch.testing.assert_close(cg(x, b, z), eager, rtol=1e-3, atol=1e-3)
