"""tl_gemm: GEMMs (fp16 / bf16, 4096³ and 8192³) and a row softmax, compiled ahead of time by tl_aot.

Called like TileLang's JIT: ``c = gemm_fp16_4096(a, b)`` returns C (a torch tensor when torch
calls); ``gemm_fp16_4096(a, b, c)`` writes a C you allocated. Every function takes DLPack tensors
on a CUDA device (torch, jax, cupy, ...) and an optional stream; ``tl_gemm._kernels`` documents
each signature. ``register_torch_ops()`` makes them ``torch.ops.tl_gemm.*`` (torch.compile traces
them). Needs only apache-tvm-ffi.
"""

from ._kernels import *  # noqa: F403  gemm_fp16_4096, gemm_fp16_8192, gemm_bf16_4096, gemm_bf16_8192, softmax_fp16
