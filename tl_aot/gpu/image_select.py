"""Which of a library's images a GPU runs: the launcher's ``select_image`` rule, for serving to ask before it answers.

An exact match; else SASS of the same major from an older minor (not arch-specific); else PTX no
newer than the GPU. Serving uses it so a served kernel is one the library can launch here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ..common.arch import Arch

__all__ = ["Image", "arch_digits", "image_of", "runs_on"]


def arch_digits(arch: str) -> str:
    """``sm_90a`` -> ``90``: the compute capability an arch names, as the driver spells it."""
    return "".join(ch for ch in arch.removeprefix("sm_") if ch.isdigit())


class Image(NamedTuple):
    """What the launcher's image selection reads of a variant: ``sm_90a`` is ``("90", 9, 0, True, False)``."""

    digits: str  # the compute capability, as the driver spells it
    major: int
    minor: int
    specific: bool  # arch-specific ("a"): runs on that exact compute capability only
    ptx: bool  # a PTX fallback rides along


def image_of(arch: Arch) -> Image:
    """``sm_90a`` -> ``Image("90", 9, 0, True, False)``."""
    return Image(str(arch.number), arch.major, arch.minor, arch.suffix == "a", arch.ptx)


def runs_on(images: Iterable[Image], cc: str) -> bool:
    """Whether the launcher finds an image for a GPU of compute capability ``cc`` (its ``select_image`` rule).

    An exact match; else SASS of the same major from an older minor (not arch-specific); else PTX no newer than the GPU.
    """
    if not cc:
        return False
    major, minor = int(cc[:-1]), int(cc[-1])
    for digits, maj, mnr, specific, ptx in images:
        if digits == cc or (maj == major and mnr <= minor and not specific) or (ptx and maj * 10 + mnr <= major * 10 + minor):
            return True
    return False
