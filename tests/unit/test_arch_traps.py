"""TileLang's run-time trap for a missing arch feature, found among an image's string constants."""

from __future__ import annotations

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
