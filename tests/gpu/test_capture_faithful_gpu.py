"""On the GPU: capture a swizzled GEMM, flash attention forward and backward, a persistent FP8 batched GEMM and a
persistent causal attention for real, build the record, serve it strictly, and get the JIT's results bit for bit from
kernels whose device code digests are the JIT's; the @tilelang.jit calls are served before TileLang traces them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.helpers import run_ok, tl_aot_argv

pytestmark = pytest.mark.gpu

KERNELS = Path(__file__).parents[1] / "kernels"
SCRIPT = f"""
import sys
sys.path.insert(0, {str(KERNELS)!r})
import torch
import tilelang
import faithful

torch.manual_seed(0)
dev = "cuda"
A, B = (torch.randn(512, 512, device=dev, dtype=torch.float16) for _ in range(2))
out = {{"gemm": tilelang.compile(faithful.gemm_swizzled(), out_idx=[-1])(A, B)}}
q, k, v, do = (torch.randn(1, 256, 2, 64, device=dev, dtype=torch.float16) for _ in range(4))
out["fwd"] = faithful.flashattn_fwd(1, 2, 256, 64)(q, k, v)
lse = torch.randn(1, 2, 256, device=dev, dtype=torch.float32)
delta = torch.randn(1, 2, 256, device=dev, dtype=torch.float32)
dq = torch.zeros(1, 256, 2, 64, device=dev, dtype=torch.float32)
dk, dv = (torch.empty(1, 256, 2, 64, device=dev, dtype=torch.float16) for _ in range(2))
faithful.flashattn_bwd(1, 2, 256, 64)(q, k, v, do, lse, delta, dq, dk, dv)
out.update(dq=dq, dk=dk, dv=dv)
a8, b8 = (torch.randn(4, 256, 256, device=dev).to(torch.float8_e4m3fn) for _ in range(2))
out["bmm_fp8_persistent"] = faithful.bmm_fp8_persistent(4, 256, 256, 256)(a8, b8, torch.rand(4, device=dev))
q2, k2, v2 = (torch.randn(1, 256, 2, 128, device=dev, dtype=torch.float16) for _ in range(3))
out["attn_persistent"] = faithful.attn_fwd_persistent_causal(1, 2, 256, 128)(q2, k2, v2)
torch.cuda.synchronize()
torch.save({{n: t.cpu() for n, t in out.items()}}, sys.argv[1])
"""


def test_captured_kernels_serve_the_jits_results_bit_for_bit(tmp_path, cache_dir, monkeypatch):
    import torch

    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}{minor}{'a' if major >= 9 else ''}"
    (tmp_path / "script.py").write_text(SCRIPT)
    record = tmp_path / "gpu.capture.json"
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "tlcache"))  # a fresh JIT cache: the capture sees real compiles
    tl_aot = tl_aot_argv()
    run_ok([*tl_aot, "capture", "-o", record, "--", sys.executable, "script.py", tmp_path / "jit.pt"], tmp_path)
    kernels = json.loads(record.read_text())["kernels"]
    assert len(kernels) == 5 and not any("unfaithful" in k for k in kernels.values())
    assert sum(1 for k in kernels.values() if k.get("calls")) == 4  # every @tilelang.jit call (not tilelang.compile) is keyed
    assert all(f"sm_{arch}" in item.get("device_code", {}) for item in kernels.values()), [k.get("device_code") for k in kernels.values()]
    recorded = {key: item["device_code"][f"sm_{arch}"] for key, item in kernels.items()}
    assert all(c["from"] == "JIT" for c in recorded.values())

    lib_dir = tmp_path / "lib"
    run_ok(
        [*tl_aot, "build", "--capture", record, "--arch", arch, "--name", "faithful_gpu", "-o", lib_dir, "--cache-dir", cache_dir], tmp_path
    )
    man = json.loads(run_ok([*tl_aot, "inspect", "--json", lib_dir / "libfaithful_gpu.so"], tmp_path).stdout)
    built = {e["capture_key"]: e["variants"][0]["device_code"] for e in man["entries"]}
    assert built == {key: c["sha256"] for key, c in recorded.items()}  # the build's device code is the JIT's

    run = run_ok([*tl_aot, "run", "--serve", lib_dir, "--strict", "--", sys.executable, "script.py", tmp_path / "served.pt"], tmp_path)
    assert "5 served, 0 compiled by the JIT, 0 refused" in run.stderr
    assert "; 4 kernels served before TileLang traced them)" in run.stderr
    jit, served = torch.load(tmp_path / "jit.pt"), torch.load(tmp_path / "served.pt")
    # every output that differs, by how much (a one-off mismatch names its kernel); dq is summed by atomics, whose order
    # varies per run (JIT against JIT too: 6e-5 to 1.2e-4 over twelve runs on an H200), so it is compared within 1e-3
    exact = ("gemm", "fwd", "dk", "dv", "bmm_fp8_persistent", "attn_persistent")
    differ = {n: (jit[n].float() - served[n].float()).abs().max().item() for n in exact if not torch.equal(jit[n], served[n])}
    assert not differ, f"served outputs differ from the JIT's (max abs difference): {differ}"
    torch.testing.assert_close(jit["dq"], served["dq"], rtol=1e-3, atol=1e-3)
