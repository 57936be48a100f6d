"""Small records the unit tests build by hand: one factory each, with the defaults a test does not care about."""

from __future__ import annotations

from tl_aot.common.arch import parse_arch
from tl_aot.common.metadata import DeviceKernel, LoweredVariant

__all__ = ["device_kernel", "lowered_variant"]


def device_kernel(name: str = "main_kernel", **fields) -> DeviceKernel:
    """A kernel of no arguments, one block of 128 threads, no shared memory; ``fields`` override."""
    return DeviceKernel(**{"name": name, "args": (), "grid": ("1", "1", "1"), "block": ("128", "1", "1"), "dynamic_smem": "0", **fields})


def lowered_variant(entry: str = "k", arch: str = "sm_90a", **fields) -> LoweredVariant:
    """What lowering ``entry`` for ``arch`` (spelled as a user does: ``sm_90a``, ``80+PTX``) yields, ``fields`` set."""
    return LoweredVariant(entry=entry, arch=parse_arch(arch), **fields)
