"""Native torch ops (the companion lib<name>_torch.so) on the GPU: bit-exact, on torch's stream, in CUDA graphs and torch.compile.

The companion is built on the CPU machine against torch 2.13's headers, targeting the stable ABI of
torch 2.10; here it is loaded by whatever torch the GPU machine has (2.11 when written).
"""

from __future__ import annotations

import uuid

import pytest

torch = pytest.importorskip("torch")

from support.builds import KERNELS, prebuilt_or_build  # noqa: E402 (after the importorskip)

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def native_lib(tmp_path_factory, cache_dir):
    """``libtl_torch_native.so`` and its companion (tests/kernels/torch_native.toml sets torch_ops)."""
    import tl_aot

    return tl_aot.load(prebuilt_or_build(KERNELS / "torch_native.toml", "tl_torch_native", tmp_path_factory, cache_dir))


@pytest.fixture(scope="module")
def ops(native_lib):
    return native_lib.register_torch_ops("tln_" + uuid.uuid4().hex[:8])


def test_the_companion_built_with_newer_headers_serves_the_ops_under_this_torch(native_lib, ops):
    assert native_lib.torch_companion is not None
    assert ops.backend == "native", f"torch {torch.__version__} fell back to the Python registration"
    print(f"native torch ops served by {native_lib.torch_companion.name} under torch {torch.__version__}")


@pytest.mark.parametrize("rows", [1, 3, 4096])
def test_ops_equal_the_direct_call_bit_for_bit(native_lib, ops, rows):
    x = torch.randn(rows, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, device="cuda", dtype=torch.float16)
    y = ops.scale_add(x, b)
    assert y.shape == (rows, 1024) and y.dtype == torch.float16 and y.device == x.device
    assert torch.equal(y, native_lib.scale_add(x, b))
    inplace = torch.full_like(x, float("nan"))
    assert ops.scale_add_inplace(x, b, inplace) is None
    assert torch.equal(inplace, y)


def test_every_kind_of_entry_equals_the_direct_call(native_lib, ops):
    x = torch.randn(64, 512, device="cuda")
    assert all(torch.equal(a, b) for a, b in zip(ops.row_stats(x), native_lib.row_stats(x)))
    a, c = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    assert torch.equal(ops.axpy_first(a, 2.5, c), native_lib.axpy_first(a, 2.5, c))
    pairs = torch.randn(2 * 1000, device="cuda")
    got = ops.pair_sum(pairs)
    assert got.shape == (1000,) and torch.equal(got, native_lib.pair_sum(pairs))
    r = ops.arange(100, 7, 3)  # no input tensor: torch's current device
    assert r.device == torch.device("cuda", torch.cuda.current_device()) and torch.equal(r, native_lib.arange(100, 7, 3))
    for n in (2048, 4096):  # two specialisations, picked inside the native kernel as in the library
        xs, w = torch.randn(5, n, device="cuda", dtype=torch.float16), torch.randn(n, device="cuda", dtype=torch.float16)
        assert torch.equal(ops.rms_norm(xs, w), native_lib.rms_norm(xs, w))


def test_ops_run_on_torch_current_stream(native_lib, ops):
    x = torch.randn(4096, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, device="cuda", dtype=torch.float16)
    want = native_lib.scale_add(x, b)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = ops.scale_add(x, b)
        z = ops.scale_add(y, b)  # ordered after y on the side stream
    s.synchronize()
    assert torch.equal(y, want) and torch.equal(z, native_lib.scale_add(want, b))


def test_errors_carry_the_library_messages(native_lib, ops):
    x = torch.randn(4, 1024, device="cuda", dtype=torch.float16)
    bad = torch.randn(512, device="cuda", dtype=torch.float16)
    with pytest.raises(Exception) as direct:
        native_lib.scale_add(x, bad)
    with pytest.raises(RuntimeError) as native:
        ops.scale_add(x, bad)
    assert str(direct.value).splitlines()[0] in str(native.value)


def test_cuda_graph_capture_and_replay(native_lib, ops):
    x = torch.randn(8, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, device="cuda", dtype=torch.float16)
    w = torch.randn(2048, device="cuda", dtype=torch.float16)
    xs = torch.randn(8, 2048, device="cuda", dtype=torch.float16)
    native_lib.prepare(torch.cuda.current_device())
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up off the default stream, as torch asks before capture
        ops.scale_add(x, b)
        ops.rms_norm(xs, w)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = ops.scale_add(x, b)
        n = ops.rms_norm(xs, w)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        xs.copy_(torch.randn_like(xs))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, native_lib.scale_add(x, b)) and torch.equal(n, native_lib.rms_norm(xs, w))


def _model(ops):
    def model(x, b, xs, w):
        return ops.scale_add(ops.scale_add(x, b), b), ops.rms_norm(xs, w)

    return model


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_torch_compile_fullgraph_equals_eager(ops, mode):
    model = _model(ops)
    compiled = torch.compile(model, fullgraph=True, mode=mode)
    b = torch.randn(1024, device="cuda", dtype=torch.float16)
    w = torch.randn(2048, device="cuda", dtype=torch.float16)
    for _ in range(3):  # reduce-overhead records a CUDA graph on a later call, then replays it
        x = torch.randn(16, 1024, device="cuda", dtype=torch.float16)
        xs = torch.randn(16, 2048, device="cuda", dtype=torch.float16)
        got = [t.clone() for t in compiled(x, b, xs, w)]
        want = model(x, b, xs, w)
        assert all(torch.equal(g, e) for g, e in zip(got, want))


def test_the_python_registration_gives_the_same_results(native_lib, ops):
    py = native_lib.register_torch_ops("tlp_" + uuid.uuid4().hex[:8], backend="python")
    assert py.backend == "python"
    x = torch.randn(64, 512, device="cuda")
    assert all(torch.equal(a, b) for a, b in zip(py.row_stats(x), ops.row_stats(x)))
    assert str(py.row_stats.default._schema).split("::")[1] == str(ops.row_stats.default._schema).split("::")[1]
