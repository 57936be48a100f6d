"""One entry, many specialisations, on the GPU: each call picks the right one, results match torch."""

from __future__ import annotations

import uuid

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

# (dtype, m, n, k): every static (N, K) pair of tests/kernels/specialised.toml in both dtypes, both
# sides of the m <= 64 range, and fp16 sizes no static specialisation has (the dynamic fallback).
GEMMS = [
    *[(dt, m, n, k) for dt in (torch.float16, torch.bfloat16) for (n, k) in ((1024, 1024), (2048, 512), (512, 2048)) for m in (1, 200)],
    (torch.float16, 64, 1024, 1024),
    (torch.float16, 65, 1024, 1024),
    (torch.float16, 256, 768, 384),
    (torch.float16, 100, 384, 256),
]


@pytest.fixture(scope="module")
def special(special_lib):
    return special_lib


@pytest.mark.parametrize(("dtype", "m", "n", "k"), GEMMS, ids=[f"{str(g[0])[6:]}-{g[1]}x{g[2]}x{g[3]}" for g in GEMMS])
def test_gemm_picks_its_specialisation_and_matches_torch(special, dtype, m, n, k):
    torch.manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = (torch.randn(k, n, device="cuda") / k**0.5).to(dtype)
    c = special.gemm(a, b)
    assert c.shape == (m, n) and c.dtype == dtype
    torch.testing.assert_close(c, (a.float() @ b.float()).to(dtype), rtol=2e-2, atol=2e-2)
    explicit = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    special.gemm(a, b, explicit)
    torch.testing.assert_close(explicit, c, rtol=0, atol=0)


def test_a_call_no_specialisation_takes_launches_nothing(special):
    a = torch.randn(8, 100, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(100, 64, device="cuda", dtype=torch.bfloat16)
    c = torch.zeros(8, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"gemm: no specialisation takes A: bfloat16\[8, 100\], B: bfloat16\[100, 64\]; built: "):
        special.gemm(a, b, c)
    torch.cuda.synchronize()
    assert not c.any()


@pytest.mark.parametrize("hidden", [2048, 4096, 6144, 8192])
@pytest.mark.parametrize("rows", [1, 37])
def test_rms_norm_over_four_hidden_sizes(special, hidden, rows):
    x = torch.randn(rows, hidden, device="cuda", dtype=torch.float16)
    w = torch.randn(hidden, device="cuda", dtype=torch.float16)
    y = special.rms_norm(x, w)
    xf = x.float()
    want = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(y.float(), want, rtol=2e-2, atol=2e-2)


def test_one_torch_op_per_entry_traced_by_torch_compile(special):
    ops = special.register_torch_ops("tls_" + uuid.uuid4().hex[:8])

    def layer(x, w, b):
        return ops.gemm(ops.rms_norm(x, w), b)

    x = torch.randn(50, 2048, device="cuda", dtype=torch.float16)
    w = torch.randn(2048, device="cuda", dtype=torch.float16)
    b = (torch.randn(2048, 512, device="cuda") / 45).half()
    eager = layer(x, w, b)
    compiled = torch.compile(layer, fullgraph=True)
    torch.testing.assert_close(compiled(x, w, b), eager, rtol=0, atol=0)
    x2 = torch.randn(300, 2048, device="cuda", dtype=torch.float16)  # another m: same specialisations
    torch.testing.assert_close(compiled(x2, w, b), layer(x2, w, b), rtol=0, atol=0)
