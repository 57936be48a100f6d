"""Broken on purpose: hand-written CUDA that nvcc refuses (a missing ';' in SOURCE, line 8)."""

import tilelang.language as T

SOURCE = r"""
extern "C" __global__ void __launch_bounds__(128) broken_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x
  if (i < n) y[i] = 2.0f * x[i];
}
"""


def broken(block=128):
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        T.CUDASourceCodeKernel(T.ceildiv(n, block), threads=block, source_code_or_path=SOURCE, entry_name="broken_kernel")

    return main
