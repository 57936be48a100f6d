"""A hand-written CUDA kernel launched from a TileLang prim_func (T.CUDASourceCodeKernel)."""

import tilelang.language as T

SOURCE = r"""
extern "C" __global__ void __launch_bounds__(128) scale_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 3.0f * x[i] + 1.0f;
}
"""


def scale(block=128):
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        T.CUDASourceCodeKernel(T.ceildiv(n, block), threads=block, source_code_or_path=SOURCE, entry_name="scale_kernel")

    return main
