"""Consumer Blackwell on the CPU: a kernel that needs sm_120a is built for it, and refused for plain sm_120.

``tests/kernels/blackwell.toml`` (our one-tile NVFP4 block-scaled GEMM, the shape of TileLang's
``gemm_sm120`` example) asks for ``sm_120`` and ``sm_120a``. For plain sm_120 TileLang's template
compiles a trap where the ``kind::mxf4nvf4`` MMA should be; that image would build, load and fail at
its first launch on an RTX 5090, so the build leaves it out (``--keep-going``) naming sm_120a, and
the library holds the sm_120a image the GPU runs (TileLang's JIT compiles sm_120a there too).
A ``120+PTX`` image of such a kernel traps on its PTX path too, where the driver compiles the PTX for
a newer GPU: it is refused on its PTX, which the fatbin holds compressed.
"""

from __future__ import annotations

import json

import pytest
from support.helpers import KERNELS, ok, tl_aot_here

pytest.importorskip("tilelang")


def test_plain_sm120_is_left_out_naming_sm120a_and_sm120a_is_built(tmp_path, cache_dir):
    import tilelang.language as T

    if not hasattr(T, "mma_gemm_blockscaled"):
        pytest.skip("this TileLang has no SM120 block-scaled MMA")
    out = tmp_path / "out"
    built = ok(tl_aot_here("build", "--spec", KERNELS / "blackwell.toml", "-o", out, "--cache-dir", cache_dir, "--keep-going"))
    assert "left out 1 variant(s) that failed (--keep-going):" in built.stdout + built.stderr
    man = json.loads(ok(tl_aot_here("inspect", "--json", out / "libtl_blackwell.so")).stdout)
    assert [v["arch"] for e in man["entries"] for v in e["variants"]] == ["sm_120a"]
    (left,) = man["left_out"]
    assert (left["entry"], left["arch"]) == ("nvfp4_gemm", "sm_120")
    assert "needs sm_120a" in left["error"] and "Build --arch 120a" in left["error"]
    assert "tl::sm120_mma_sync_blockscaled requires sm_120a" in left["error"]


# TileLang's SM120 trap in the form its template takes (the instruction behind the arch-specific feature
# macro, a printf and a breakpoint without it), and a kernel without one: compiled by the real nvcc, in one batch.
_TRAPPING = r"""#include <cstdio>
extern "C" __global__ void __launch_bounds__(32) trapping_kernel(float* x) {
#if defined(__CUDA_ARCH_FEAT_SM120_ALL)
  x[threadIdx.x] = 1.0f;
#else
  printf("tl::sm120_mma_sync_blockscaled requires sm_120a and CUDA 12.8 or later\n");
  __brkpt();
#endif
}
"""
_CLEAN = r"""extern "C" __global__ void __launch_bounds__(32) clean_kernel(float* x) { x[threadIdx.x] = 2.0f; }
"""


def test_a_ptx_image_is_refused_on_its_ptx_even_where_nvcc_compresses_all_of_the_fatbin(tmp_path):
    from tl_aot.common.arch import parse_arch
    from tl_aot.cuda.arch_traps import ArchTrapped, arch_trap
    from tl_aot.cuda.device_image import Unit, compile_image, compile_images

    hidden = ["-Xfatbin", "-compress-all"]  # flags a kernel may carry: nothing of the fatbin can be read
    arch = parse_arch("120+PTX")
    units = [Unit("trapping", _TRAPPING, "nvcc (trapping)"), Unit("clean", _CLEAN, "nvcc (clean)")]
    got = compile_images(arch, tmp_path / "batch", units, hidden)
    assert isinstance(got["trapping"], ArchTrapped) and got["trapping"].trap.target == "sm_120a"
    assert isinstance(got["clean"], bytes) and arch_trap(got["clean"]) is None
    with pytest.raises(ArchTrapped):
        compile_image(arch, tmp_path / "alone", "trapping", _TRAPPING, hidden, what="nvcc (trapping)")
    cubin = compile_image(parse_arch("120"), tmp_path / "alone", "trapping", _TRAPPING, what="nvcc (trapping)")
    assert arch_trap(cubin).target == "sm_120a"  # a cubin's strings are plain: the image check sees them
