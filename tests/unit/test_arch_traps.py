"""TileLang's run-time trap for a missing arch feature, found among an image's string constants."""

from __future__ import annotations

import pytest

from tl_aot.cuda.arch_traps import ArchTrap, arch_trap

# What nvcc leaves in a plain-sm_120 cubin of a kernel using TileLang's SM120 block-scaled MMA: assert's
# copy of the message, then the one printf prints, each a NUL-terminated constant among binary bytes.
_PLAIN_SM120 = (
    b"\x7fELF\x02\x01\x00\x00\x13\x00"
    b'0 && "tl::sm120_mma_sync_blockscaled requires sm_120a and CUDA 12.8 or " "later"\x00'
    b"\x00\x00\x10tl::sm120_mma_sync_blockscaled requires sm_120a and CUDA 12.8 or later\x00\xff\x03"
)


def test_the_printed_message_and_the_target_it_names_are_found():
    assert arch_trap(_PLAIN_SM120) == ArchTrap("tl::sm120_mma_sync_blockscaled requires sm_120a and CUDA 12.8 or later", "sm_120a")


def test_an_image_without_a_trap_has_none():
    assert arch_trap(b"\x7fELF\x02\x01main_kernel\x00tl::gemm\x00") is None
    assert arch_trap(b"requires sm_ but names no target\x00") is None


@pytest.mark.parametrize(
    "arch,fix",
    [
        ("120", "Build --arch 120a (what TileLang's JIT compiles on that GPU)"),
        ("120f", "Build --arch 120a (what TileLang's JIT compiles on that GPU)"),
        ("121a", "An sm_120a image runs on compute capability 12.0 only: TileLang has no path for this kernel on a 12.1 GPU"),
    ],
)
def test_the_refusal_names_the_target_or_that_this_gpu_has_none(tmp_path, arch, fix):
    """Plain sm_120 and sm_120f: build sm_120a. sm_121a (DGX Spark): TileLang enables the MMA on sm_120a only."""
    from tl_aot.common.arch import parse_arch
    from tl_aot.common.metadata import LoweredVariant
    from tl_aot.pipeline.images import _trap_error

    target = parse_arch(arch)
    error = _trap_error(_PLAIN_SM120, LoweredVariant(entry="gemm", arch=target), target, tmp_path, "gemm.py:6 (gemm)", "gemm__sm")
    assert error is not None and error.arch == target.sm
    assert str(error).startswith(f"entry 'gemm' ({target.sm}): the kernel TileLang generated from gemm.py:6 (gemm) needs sm_120a")
    assert fix in str(error)
    assert _trap_error(b"\x7fELF main_kernel\x00", LoweredVariant(entry="gemm", arch=target), target, tmp_path, "g", "g") is None
