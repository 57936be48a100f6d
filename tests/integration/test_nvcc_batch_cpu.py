"""Variants compiled to PTX together (one nvcc front end) get the images they get alone, byte for byte."""

from __future__ import annotations

import shutil

import pytest

from tl_aot.common.arch import parse_arch
from tl_aot.cuda.device_image import Unit, batch_problem, compile_image, compile_images, kernel_names
from tl_aot.cuda.ptx_split import split_variant, split_variants

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")

_HEAD = "#include <tl_templates/cuda/reduce.h>\n#include <tl_templates/cuda/debug.h>\n\n"
ADD = _HEAD + (
    'extern "C" __global__ void __launch_bounds__(256, 1) main_kernel(const float* __restrict__ X, float* __restrict__ Y, int n) {\n'
    "  if (((int)blockIdx.x) * 256 + ((int)threadIdx.x) < n) {\n"
    "    Y[((int)blockIdx.x) * 256 + ((int)threadIdx.x)] = X[((int)blockIdx.x) * 256 + ((int)threadIdx.x)] + 1.0f;\n"
    "  }\n}\n"
)
SCALE = _HEAD + (
    'extern "C" __global__ void __launch_bounds__(128, 1) main_kernel(float* __restrict__ Y, float a) {\n'
    "  __shared__ float s[128];\n  s[threadIdx.x] = Y[threadIdx.x] * a;\n  __syncthreads();\n"
    "  #pragma unroll\n  for (int i = 0; i < 4; ++i) { Y[threadIdx.x] += s[(threadIdx.x + i) % 128]; }\n}\n"
)


@pytest.mark.parametrize("arch_text", ["90a", "80+PTX"])
def test_batched_images_are_the_images_each_variant_gets_alone(tmp_path, arch_text):
    arch = parse_arch(arch_text)
    units = [Unit("add__sm_90a", ADD, "nvcc (add)"), Unit("scale__sm_90a", SCALE, "nvcc (scale)")]
    seen = []
    batched = compile_images(arch, tmp_path / "batch" / "kernels", units, on_done=lambda stem, image: seen.append((stem, image)))
    assert dict(seen) == batched and len(seen) == 2  # each result passed on once, as it is made
    for u in units:
        alone = compile_image(arch, tmp_path / "alone" / u.stem, u.stem, u.source, what=u.what)
        assert batched[u.stem] == alone, u.stem
    assert batched["add__sm_90a"] != batched["scale__sm_90a"]


def test_a_source_with_its_own_macro_or_file_scope_code_is_compiled_alone(tmp_path):
    assert batch_problem(ADD) == "" and batch_problem(SCALE) == ""
    assert "macro" in batch_problem("#define N 4\n" + ADD)
    assert "file-scope definition" in batch_problem(ADD + "__device__ int counter;\n")
    clustered = 'extern "C" __global__ void __launch_bounds__(128, 1) __cluster_dims__(2, 1, 1) k2(float* Y) {\n}\n'
    assert kernel_names(ADD + clustered) == ["main_kernel", "k2"] and batch_problem(ADD + clustered) == ""
    assert "not recognised" in batch_problem(ADD + 'extern "C" __global__ void (*odd)(float*);\n')
    arch = parse_arch("90a")
    broken = Unit("bad__sm_90a", ADD.replace("1.0f;", "1.0f"), "nvcc (bad)")  # a syntax error: its own error, the other built
    got = compile_images(arch, tmp_path / "kernels", [Unit("add__sm_90a", ADD, "nvcc (add)"), broken])
    assert isinstance(got["add__sm_90a"], bytes) and "nvcc (bad)" in str(got["bad__sm_90a"])


def test_split_keeps_only_the_variants_own_kernels_and_what_they_use():
    ptx = (
        ".version 9.0\n.target sm_90a\n.address_size 64\n\n"
        ".extern .shared .align 16 .b8 buf[];\n.extern .shared .align 16 .b8 other[];\n\n"
        ".visible .entry tl_aot_b0_k(\n\t.param .u64 tl_aot_b0_k_param_0\n)\n{\n\tmov.u32 %r1, buf;\n$L__BB0_1:\n\tret;\n}\n\n"
        ".visible .entry tl_aot_b1_k(\n\t.param .u64 tl_aot_b1_k_param_0\n)\n{\n\tmov.u32 %r1, other;\n$L__BB1_1:\n\tret;\n}\n"
    )
    second = split_variant(ptx, "tl_aot_b1_")
    assert ".entry k(" in second.text and "k_param_0" in second.text and "$L__BB0_1" in second.text
    assert "other" in second.text and "buf[]" not in second.text and "tl_aot_b" not in second.text
    global_def = ptx.replace(".extern .shared .align 16 .b8 other[];", ".global .align 4 .u32 other = 1;")
    assert "module-scope other" in split_variant(global_def, "tl_aot_b1_").problem
    # a batch's module read once for all its variants: the same splits, text and problems alike
    for module in (ptx, global_def):
        prefixes = ["tl_aot_b0_", "tl_aot_b1_", "tl_aot_b2_"]
        assert split_variants(module, prefixes) == [split_variant(module, p) for p in prefixes]
