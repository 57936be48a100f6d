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
kernel needs.

A ``+PTX`` image (``sm_120+PTX``: the cubin and the PTX it was made from, which the driver
compiles for a GPU the cubin does not run on) traps on that path too: the trap is decided in the
front end (``__CUDA_ARCH__`` and the arch-specific feature macros, fixed when the CUDA became PTX),
so the driver's compile of that PTX, for any newer GPU, keeps the ``printf`` and ``__brkpt``. Its
PTX is checked before the fatbin is made (:func:`ptx_arch_trap`): in the fatbin nvcc compresses
the PTX (and with ``-Xfatbin -compress-all`` the cubin too), where no string can be seen. A PTX
keeps its string constants as byte lists (``.global .align 1 .b8 $str[90] = {69, 82, ...};``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..common.errors import CompileError

__all__ = ["ArchTrap", "ArchTrapped", "arch_trap", "ptx_arch_trap"]

# A printable string constant of the image saying an instruction needs another target.
_MESSAGE = re.compile(rb"[\x20-\x7e]{4,300}")
_NEEDS = re.compile(r"\brequires (sm_\d+[af]?)\b")
# A PTX string constant: ``.b8 $str[90] = {69, 82, ...}`` (global or const state, any name and alignment).
_PTX_BYTES = re.compile(r"\.b8\s+[^\s\[]+\[\d+\]\s*=\s*\{([\d,\s]+)\}")


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


def ptx_arch_trap(ptx: str) -> ArchTrap | None:
    """The first TileLang arch trap in ``ptx``'s string constants (byte lists), else None: what the driver's compile keeps."""
    for constant in _PTX_BYTES.finditer(ptx):
        try:
            data = bytes(int(b) for b in constant.group(1).split(",") if b.strip())
        except ValueError:  # a value past 255: not a string
            continue
        trap = arch_trap(data)
        if trap is not None:
            return trap
    return None


class ArchTrapped(CompileError):
    """A ``+PTX`` image refused before it was made: its PTX holds TileLang's arch trap (:func:`ptx_arch_trap`).

    The build's compile stage turns it into the variant's error, naming the entry and the target it needs.
    """

    def __init__(self, trap: ArchTrap, what: str) -> None:
        super().__init__(f"{what}: the PTX holds TileLang's run-time trap ({trap.message!r})")
        self.trap, self.what = trap, what

    def __reduce__(self) -> tuple[type[ArchTrapped], tuple[ArchTrap, str]]:
        return ArchTrapped, (self.trap, self.what)
