"""sm_120 / sm_120a (consumer Blackwell) in every arch table: spelling, CUDA floor, shared memory, device, wheel tag."""

from __future__ import annotations

import pytest

from tl_aot.common.arch import Arch, parse_arch
from tl_aot.common.errors import LoweringError, SpecError
from tl_aot.common.metadata import DeviceKernel
from tl_aot.cuda.compiler_choice import _why_not
from tl_aot.gpu.cuda_compat import COMPUTE_CAPABILITIES, min_cuda_for_arch
from tl_aot.gpu.device import PROFILES, default_profile, emulate, find_profile
from tl_aot.gpu.launch_limits import check_launch_limits, max_shared_bytes
from tl_aot.pipeline.image_packs import pack_label, wheel_tag


@pytest.mark.parametrize(
    "spelled,arch",
    [
        ("120", Arch(12, 0)),
        ("sm_120a", Arch(12, 0, "a")),
        ("12.0a", Arch(12, 0, "a")),
        ("120f", Arch(12, 0, "f")),
        ("120+PTX", Arch(12, 0, "", True)),
        ("sm_121a", Arch(12, 1, "a")),
    ],
)
def test_sm120_spellings_parse(spelled, arch):
    assert parse_arch(spelled) == arch


def test_sm120a_with_a_ptx_fallback_is_refused_naming_the_portable_form():
    with pytest.raises(SpecError, match="Use '120\\+PTX' instead"):
        parse_arch("120a+PTX")


def test_sm120_needs_cuda_12_8_and_sm121_cuda_12_9():
    assert {120, 121} <= COMPUTE_CAPABILITIES
    assert min_cuda_for_arch(parse_arch("120a").number) == (12, 8)
    assert min_cuda_for_arch(parse_arch("121").number) == (12, 9)
    assert _why_not(parse_arch("120a"), "12.6.85", "system") == "sm_120a needs CUDA 12.8 or newer"


@pytest.mark.parametrize("arch", ["120", "120a", "121"])
def test_a_block_on_sm120_may_opt_in_to_99_kib_of_shared_memory(arch):
    assert max_shared_bytes(parse_arch(arch)) == 99 * 1024 == default_profile(parse_arch(arch)).smem_per_block_optin


def test_a_hopper_sized_tile_is_a_build_error_on_sm120_naming_the_limit():
    kernel = DeviceKernel(name="gemm_kernel", grid=("4", "4", "1"), block=("256", "1", "1"), dynamic_smem=str(160 * 1024))
    check_launch_limits([kernel], {}, parse_arch("90a"), "gemm")  # fits Hopper's 227 KiB
    with pytest.raises(
        LoweringError, match=r"163840 bytes of shared memory per block, more than the limit of 101376 \(99 KiB\) on sm_120a"
    ):
        check_launch_limits([kernel], {}, parse_arch("120a"), "gemm")


@pytest.mark.parametrize("arch", ["120", "120a", "121"])
def test_an_sm120_build_emulates_a_consumer_blackwell_gpu_not_b200(arch):
    p = default_profile(parse_arch(arch))
    assert (p.name, p.cc, p.sm_count, p.smem_per_sm, p.threads_per_sm) == ("RTX-5090", "120", 170, 102400, 1536)
    with pytest.raises(SpecError, match="B200 is sm_100; it cannot be the GPU of an sm_120a build"):
        find_profile("B200", parse_arch("120a"))
    assert find_profile("rtx_5090", parse_arch("120a")) is PROFILES["RTX-5090"]


def test_the_emulated_sm120_gpu_answers_as_one():
    torch = pytest.importorskip("torch")
    with emulate(PROFILES["RTX-5090"]):
        props = torch.cuda.get_device_properties(0)
        assert torch.cuda.get_device_capability() == (12, 0)
        assert (props.shared_memory_per_block_optin, props.max_threads_per_multi_processor) == (101376, 1536)


@pytest.mark.parametrize(
    "arch,label,tag", [("120", "sm_120", "sm120"), ("120a", "sm_120a", "sm120a"), ("120+PTX", "sm_120_ptx", "sm120ptx")]
)
def test_sm120_images_pack_and_ship_as_their_own_wheel(arch, label, tag):
    assert pack_label(parse_arch(arch)) == label and wheel_tag(label) == tag


_SETMAXNREG = (
    'tl_templates/cuda/intrin.h(184): error: static assertion failed with "tl::warpgroup_reg_dealloc requires a target '
    'with CTA register reconfiguration, such as sm_90a"'
)


@pytest.mark.parametrize("arch", ["120", "90"])
def test_a_warp_specialized_kernel_on_a_plain_arch_names_the_arch_specific_target(tmp_path, arch):
    from tl_aot.common.errors import FailedProcessError
    from tl_aot.common.metadata import LoweredVariant
    from tl_aot.pipeline.images import _nvcc_error

    target = parse_arch(arch)
    failed = FailedProcessError("nvcc (gemm, sm_120)", ["nvcc"], 1, "", _SETMAXNREG)
    error = _nvcc_error(failed, LoweredVariant(entry="gemm", arch=target), target, tmp_path, "gemm.py:6 (matmul)", "gemm__sm")
    assert f"build --arch {arch}a (its images run on compute capability" in str(error) and error.arch == target.sm
    assert "--pass-config tl.disable_warp_specialized=true" in str(error)
    other = _nvcc_error(
        FailedProcessError("nvcc", ["nvcc"], 1, "", "error: identifier x is undefined"),
        LoweredVariant(entry="gemm", arch=target),
        target,
        tmp_path,
        "g",
        "g",
    )
    assert "setmaxnreg" not in str(other)  # only TileLang's own refusal is explained this way


def _keep_going_line(error, arch: str) -> str:
    """What a ``--keep-going`` build lists (and ``inspect`` shows) for a variant it left out with ``error``."""
    from tl_aot.pipeline.variant_run import first_error_line

    return first_error_line(str(error)).removeprefix(f"entry 'gemm' ({arch}): ")


def test_a_left_out_variant_says_what_nvcc_refused_not_only_that_it_did(tmp_path):
    """The listed reason carries the compiler's first error: TileLang's refusal of plain sm_120, a header the toolkit lacks."""
    from tl_aot.common.errors import FailedProcessError
    from tl_aot.common.metadata import LoweredVariant
    from tl_aot.pipeline.images import _nvcc_error

    target = parse_arch("120")
    source = "tileops.kernels.x._build(" + ", ".join(f"arg{i}=torch.float16" for i in range(20)) + ") at cp_fwd.py:276 (fwd)"
    failed = FailedProcessError("nvcc (gemm, sm_120)", ["nvcc"], 1, "", _SETMAXNREG + "\n2 errors detected")
    line = _keep_going_line(_nvcc_error(failed, LoweredVariant(entry="gemm", arch=target), target, tmp_path, source, "g"), "sm_120")
    assert line.startswith("nvcc failed on the CUDA code TileLang generated from tileops.kernels.x._build(")
    assert line.endswith(
        'error: static assertion failed with "tl::warpgroup_reg_dealloc requires a target with CTA register reconfiguration, '
        'such as sm_90a"'
    )
    assert len(line) <= 400  # the source's long argument list is shortened in the middle, never the diagnostic

    missing_header = "/w/k.cu:8:10: fatal error: curand_kernel.h: No such file or directory\ncompilation terminated."
    missing = FailedProcessError("nvcc", ["nvcc"], 1, "", missing_header)
    error = _nvcc_error(missing, LoweredVariant(entry="gemm", arch=target), target, tmp_path, "dropout.py:126 (forward)", "g")
    assert _keep_going_line(error, "sm_120") == (
        "nvcc failed on the CUDA code TileLang generated from dropout.py:126 (forward): "
        "fatal error: curand_kernel.h: No such file or directory"
    )
    assert "curand_kernel.h is cuRAND's header" in str(error) and "`pip install nvidia-curand`" in str(error)
    plain = FailedProcessError("nvcc", ["nvcc"], 1, "", "/w/k.cu:3:10: fatal error: mine.h: No such file or directory")
    error = _nvcc_error(plain, LoweredVariant(entry="gemm", arch=target), target, tmp_path, "k.py:1 (k)", "g")
    assert "mine.h was not found on nvcc's include path" in str(error)
