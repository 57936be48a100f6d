"""tlops' operators: each picks its kernel and config from the shapes, the dtype and the GPU, then
compiles it with TileLang's JIT on first use (``*_kernel_for``) and launches it."""

import torch

from .kernels.common import Problem, TileConfig
from .kernels.gemm import gemm_kernel
from .kernels.multi import activation
from .kernels.norm import rms_norm as rms_norm_kernel
from .kernels.scale import relu6_scale


def _sms(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def gemm_kernel_for(m, n, k, dtype, device=None):
    """Small M or a small GPU: 64-row tiles; otherwise 128 rows and a deeper pipeline."""
    big = m > 128 and _sms(device) >= 100
    return gemm_kernel(m, n, k, dtype)(block_m=128 if big else 64, num_stages=3 if big else 2)


def gemm(a, b):
    return gemm_kernel_for(a.shape[0], b.shape[1], a.shape[1], a.dtype, a.device)(a, b)


def rms_norm_kernel_for(rows, cols, dtype, device=None):
    threads = 128 if cols >= 256 else 64
    return rms_norm_kernel(rows, cols, dtype, config=TileConfig(block=64, threads=threads))


def rms_norm(x):
    return rms_norm_kernel_for(x.shape[0], x.shape[1], x.dtype, x.device)(x)


def relu6_scale_kernel_for(n, factor, device=None):
    return relu6_scale(n, float(factor))


def relu6(x, factor=1.0):
    return relu6_scale_kernel_for(x.shape[0], factor, x.device)(x)


def relu_kernel_for(rows, cols, dtype, device=None):
    return activation(Problem(rows, cols), dtype)["fwd"]()


def relu(x):
    return relu_kernel_for(x.shape[0], x.shape[1], x.dtype, x.device)(x)
