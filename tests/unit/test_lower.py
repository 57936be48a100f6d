"""Launch metadata extracted from TileLang's lowered IR (CPU only: explicit targets, no GPU)."""

from pathlib import Path

import pytest

pytest.importorskip("tilelang")

from tl_aot.common.arch import parse_arch  # noqa: E402
from tl_aot.common.errors import LoweringError  # noqa: E402
from tl_aot.common.metadata import LoweredVariant  # noqa: E402
from tl_aot.common.metadata_json import from_json, to_json  # noqa: E402
from tl_aot.lower.lower import lower_variant  # noqa: E402
from tl_aot.spec import KernelSpec  # noqa: E402

KERNELS = Path(__file__).parents[1] / "kernels"


def lower(file, function, arch="90a", name=None, **args):
    spec = KernelSpec.create(name=name or function, source=KERNELS / file, function=function, args=args, archs=[arch])
    return lower_variant(spec, parse_arch(arch))


def test_tma_gemm_on_sm90a():
    v = lower("gemm.py", "matmul", M=1024, N=512, K=256)
    assert [p.name for p in v.params] == ["A", "B", "C"]
    assert all(p.dtype == "float16" and p.is_tensor for p in v.params)
    assert v.params[0].shape == (1024, 256)
    (k,) = v.kernels
    assert k.grid == ("4", "8", "1")  # ceildiv(512, 128), ceildiv(1024, 128)
    assert int(k.dynamic_smem) > 48 * 1024  # needs the cuFuncSetAttribute opt-in
    descs = {d.tensor: d for d in v.tma_descriptors}
    assert set(descs) == {"A", "B"}
    a = descs["A"]
    assert (a.mode, a.rank, a.global_dim, a.global_stride, a.box_dim) == ("tiled", 2, ("256", "1024"), ("512",), ("64", "128"))
    assert [arg.ctype for arg in k.args] == ["CUtensorMap", "CUtensorMap", "void*"]
    assert "__global__" in v.cuda_source


def test_same_gemm_on_sm80_uses_no_tma():
    v = lower("gemm.py", "matmul", arch="80", M=256, N=256, K=256)
    assert v.tma_descriptors == ()
    assert [a.ctype for a in v.kernels[0].args] == ["void*", "void*", "void*"]


def test_elementwise_dynamic_length():
    v = lower("elementwise.py", "add_one")
    assert [s.name for s in v.symbols] == ["n"]
    assert (v.symbols[0].param, v.symbols[0].dim) == ("X", 0)
    (k,) = v.kernels
    assert k.grid[0] == "rt::floordiv((s_n + 255), 256)"
    assert k.grid_display[0] == "(n + 255) // 256"
    assert k.args[-1].value == "s_n"


def test_dynamic_rows_tma_gemm_descriptor_depends_on_symbol():
    v = lower("gemm.py", "matmul_dynamic_m", N=512, K=512)
    a = next(d for d in v.tma_descriptors if d.tensor == "A")
    assert "s_m" in a.global_dim
    assert v.params[0].shape == ("m", 512)


def test_two_kernels_in_launch_order_with_scalar():
    v = lower("multi.py", "scale_then_shift", N=4096)
    assert [k.name for k in v.kernels] == ["main_kernel", "main_kernel_1"]
    assert [k.block[0] for k in v.kernels] == ["128", "256"]
    assert v.kernels[0].args[-1].ctype == "float" and v.kernels[0].args[-1].value == "a_alpha"
    assert [p.kind for p in v.params] == ["tensor", "tensor", "tensor", "scalar"]


def test_cuda_source_code_kernel():
    v = lower("source_kernel.py", "scale")
    (k,) = v.kernels
    assert k.name == "scale_kernel"
    assert [a.value for a in k.args] == ["p_X", "p_Y", "s_n"]
    assert "3.0f * x[i] + 1.0f" in v.cuda_source


def test_source_kernel_signature_mismatch_is_a_build_error(tmp_path):
    f = tmp_path / "bad_source.py"
    f.write_text(
        "import tilelang.language as T\n"
        "SRC = 'extern \"C\" __global__ void k(const float* x, float* y, float a, int n) {}'\n"
        "def f(N):\n"
        "    @T.prim_func\n"
        "    def main(X: T.Tensor((N,), 'float32'), Y: T.Tensor((N,), 'float32')):\n"
        "        T.CUDASourceCodeKernel(T.ceildiv(N, 128), threads=128, source_code_or_path=SRC, entry_name='k')\n"
        "    return main\n"
    )
    spec = KernelSpec.create(name="bad", source=f, function="f", args={"N": 256}, archs=["80"])
    with pytest.raises(LoweringError, match="declares 4 parameter\\(s\\).*passes 2"):
        lower_variant(spec, parse_arch("80"))


def test_metadata_round_trips_through_json():
    v = lower("multi.py", "scale_then_shift", arch="80", N=1024)
    assert from_json(LoweredVariant, to_json(v)) == v


def test_missing_function_lists_what_is_there():
    with pytest.raises(LoweringError, match="no function 'nope'.*add_one"):
        lower("elementwise.py", "nope")


def test_tilelang_jit_function_with_pass_configs():
    v = lower("jit_kernel.py", "scale", arch="80", N=1024, factor=3.0)
    assert [p.name for p in v.params] == ["X", "Y"]
    assert "--use_fast_math" in v.nvcc_options  # TileLang's own flag for TL_ENABLE_FAST_MATH
    assert "3.0" in v.cuda_source or "3.000000e+00f" in v.cuda_source


def test_user_error_points_at_the_users_line(tmp_path):
    f = tmp_path / "oops.py"
    f.write_text("import tilelang.language as T\n\ndef f(N):\n    raise ValueError('N must be even')\n")
    spec = KernelSpec.create(name="oops", source=f, function="f", args={"N": 3}, archs=["80"])
    with pytest.raises(LoweringError, match=r"(?s)entry 'oops' \(sm_80\).*oops.py:4: raise ValueError.*N must be even"):
        lower_variant(spec, parse_arch("80"))


def test_syntax_error_names_file_and_line(tmp_path):
    f = tmp_path / "broken.py"
    f.write_text("def f(:\n    pass\n")
    spec = KernelSpec.create(name="broken", source=f, function="f", archs=["90a"])
    with pytest.raises(LoweringError, match=r"(?s)entry 'broken' \(sm_90a\).*broken.py:1"):
        lower_variant(spec, parse_arch("90a"))


def test_l2_persisting_window():
    v = lower("l2.py", "add_one_l2", N=4096, hit_ratio=0.5)
    (w,) = v.kernels[0].l2_windows
    assert (w.tensor, w.hit_ratio, w.num_bytes) == ("X", 0.5, "16384")


def test_im2col_tma_descriptor():
    v = lower("conv.py", "conv2d", N=2, C=64, H=16, W=16, F=64)
    d = {x.tensor: x for x in v.tma_descriptors}
    im = d["data"]
    assert (im.mode, im.rank, im.global_dim) == ("im2col", 4, ("64", "16", "16", "2"))
    assert (im.lower_corner, im.upper_corner) == (("-1", "-1"), ("-1", "-1"))
    assert (im.channels_per_pixel, im.pixels_per_column) == ("32", "64")
    assert d["kernel"].mode == "tiled"


def test_cluster_launch():
    v = lower("cluster.py", "cluster_rank", N=1024)
    assert v.kernels[0].cluster_dims == (2, 1, 1)
