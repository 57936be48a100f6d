"""TileLang's run-time traps for a missing arch feature, found in a compiled image.

Most of TileLang's templates refuse an instruction the target lacks with a static assertion (nvcc
fails, the variant is left out, the error names the arch-specific target). A few compile the
instruction's absence into a trap instead: the SM120 block-scaled MMA
(``tl::sm120_mma_sync_blockscaled``, behind ``CUTLASS_ARCH_MMA_SM120A_ENABLED``) built for a plain
``sm_120`` becomes ``printf("... requires sm_120a ..."); __brkpt()``. That image builds, loads and
fails at its first launch, where TileLang's JIT would have compiled ``sm_120a`` on that GPU (it adds
the ``a`` for compute capability 9.0 and newer). ``sm_120f`` and ``sm_121a`` (DGX Spark) get the
same trap: TileLang enables the instruction for sm_120a alone. The trap's message is a string
constant of the image, so the build can see it and refuse the variant, naming the target the
kernel needs. (A ``+PTX`` image keeps its strings as byte lists: not looked into.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ArchTrap", "arch_trap"]

# A printable string constant of the image saying an instruction needs another target.
_MESSAGE = re.compile(rb"[\x20-\x7e]{4,300}")
_NEEDS = re.compile(r"\brequires (sm_\d+[af]?)\b")


@dataclass(frozen=True)
class ArchTrap:
    """A trap in an image: TileLang's message and the target it names (``sm_120a``)."""

    message: str
    target: str


def arch_trap(image: bytes) -> ArchTrap | None:
    """The first TileLang arch trap compiled into ``image`` (a cubin, or a fatbin's uncompressed PTX), else None.

    The message is the one the trap prints (``assert``'s copy, spelled ``0 && "..."``, is skipped).
    """
    if b" requires sm_" not in image:
        return None
    for run in _MESSAGE.finditer(image):
        text = run.group().decode("ascii")
        needs = _NEEDS.search(text)
        if needs and "&&" not in text:
            return ArchTrap(text.strip(), needs.group(1))
    return None
