"""Eager ``@tilelang.jit`` kernels (``T.const`` dims, ``T.empty`` outputs, called with tensors) served on the GPU by call key.

The factories take the target as a parameter, one closes over a macro that brings its own device
code (``T.import_source``, ``T.call_extern``), and one is called with a single row. Served, every
call is answered before TileLang traces (the tensors spelled by dtype, shape and strides); a
shape the capture never saw is refused strictly, never compiled.
"""

from __future__ import annotations

import re
import textwrap

import pytest
from support.served_project import ServedProject, serve_line

pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

KERNELS = '''
import tilelang
import tilelang.language as T

TILE = 32

DOUBLE_SRC = r"""
__device__ __forceinline__ void twice2(const void* src, void* dst) {
  const float* s = (const float*)src; float* d = (float*)dst;
  d[0] = s[0] * 2.0f; d[1] = s[1] * 2.0f;
}
"""


def make_gemm_bias(target):
    @tilelang.jit(target=target, pass_configs={tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
    def gemm_bias(A, B, Bias, block_M, block_N, threads):
        threads = 128 if block_M >= 32 else threads
        M, N, K = T.const("M, N, K")
        A: T.Tensor((M, K), "bfloat16")
        B: T.Tensor((N, K), "bfloat16")
        Bias: T.Tensor((N,), "float32")
        C = T.empty((M, N), "float32")
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, TILE), "bfloat16")
            B_s = T.alloc_shared((block_N, TILE), "bfloat16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(K // TILE, num_stages=2):
                T.copy(A[by * block_M, k * TILE], A_s)
                T.copy(B[bx * block_N, k * TILE], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                C_l[i, j] += Bias[bx * block_N + j]
            T.copy(C_l, C[by * block_M, bx * block_N])
        return C

    return gemm_bias


def _twice(n):
    @T.macro
    def twice(S, D):
        T.import_source(DOUBLE_SRC)
        for i in T.serial(n // 2):
            T.call_extern("twice2", T.access_ptr(S[2 * i], "r"), T.access_ptr(D[2 * i], "w"), dtype="void")

    return twice


def make_double(target):
    @tilelang.jit(target=target)
    def double(X, block):
        N = T.const("N")
        X: T.Tensor((N,), "float32")
        Y = T.empty((N,), "float32")
        with T.Kernel(T.ceildiv(N, block), threads=32) as bx:
            S = T.alloc_local((8,), "float32")
            D = T.alloc_local((8,), "float32")
            for t in T.serial(8):
                S[t] = X[bx * block + t]
            _twice(8)(S, D)
            for t in T.serial(8):
                Y[bx * block + t] = D[t]
        return Y

    return double
'''

#: Each call checked against torch; ``ROWS`` (the environment) adds a shape of its own.
WORKLOAD = """
import os

import torch

import kernels

gemm = kernels.make_gemm_bias("cuda")
rows = [256, 16, 1] + [int(r) for r in os.environ.get("ROWS", "").split(",") if r]
for m in rows:
    block_m, threads = (64, 128) if m >= 64 else (16, 64)
    a = torch.randn(m, 128, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(192, 128, dtype=torch.bfloat16, device="cuda")
    bias = torch.randn(192, device="cuda")
    for _ in range(2):  # the second call is TileLang's own cache of the jit object
        torch.testing.assert_close(gemm(a, b, bias, block_m, 64, threads), a.float() @ b.float().T + bias, rtol=1e-2, atol=1e-1)
x = torch.randn(1024, device="cuda")
torch.testing.assert_close(kernels.make_double("cuda")(x, 8), 2 * x)
"""


def test_eager_kernels_are_served_by_call_key_and_a_new_shape_is_refused(tmp_path, cache_dir):
    pytest.importorskip("tilelang")
    (tmp_path / "kernels.py").write_text(KERNELS)
    (tmp_path / "workload.py").write_text(textwrap.dedent(WORKLOAD))
    project = ServedProject(tmp_path, "eager", cache_dir)
    record = tmp_path / "rec.json"
    out = project.capture(record)
    assert "4 kernels" in out.stdout, out.stdout + out.stderr
    project.build(record)
    served = project.serve()
    assert served.returncode == 0, served.stderr[-3000:]
    line = serve_line(served)
    assert "4 served, 0 compiled by the JIT, 0 refused" in line, line
    assert re.search(r"\b4 kernels served before TileLang traced them", line), line
    assert re.search(r"4 lookups in [\d.]+ ms \(4 in", line), line  # all four by call key

    refused = project.serve(env={"ROWS": "200"})
    assert refused.returncode != 0 and "KernelNotServed" in refused.stderr, refused.stderr[-2000:]
