"""tl_gemm: fp16 / bf16 GEMMs and a row softmax, compiled ahead of time by tl_aot into the wheel.

Build the wheel with ``pip wheel --no-build-isolation .`` where tl_aot[build] and nvcc are; for
development, ``python setup.py build_ext --inplace`` writes tl_gemm/lib_kernels.so and _kernels.py.
"""

from setuptools import setup

from tl_aot.setuptools import TileLangExtension, bdist_wheel, build_ext

GEMMS = [
    {
        "name": f"gemm_{tag}_{n}",
        "source": "kernels/gemm.py",
        "function": "matmul",
        "args": {"M": n, "N": n, "K": n, "dtype": dtype},
        "out_idx": [-1],  # C is returned: c = gemm(a, b), as @tilelang.jit(out_idx=[-1]) would
    }
    for tag, dtype in (("fp16", "float16"), ("bf16", "bfloat16"))
    for n in (4096, 8192)
]
SOFTMAX = {"name": "softmax_fp16", "source": "kernels/softmax.py", "function": "softmax", "args": {"N": 1024}, "out_idx": [-1]}

setup(
    # H100 (sm_90a: TMA + wgmma) and A100 / every later GPU (sm_80). TL_AOT_ARCHS="80" overrides.
    ext_modules=[TileLangExtension("tl_gemm._kernels", entries=[*GEMMS, SOFTMAX], archs=["90a", "80"])],
    cmdclass={"build_ext": build_ext, "bdist_wheel": bdist_wheel},
)
