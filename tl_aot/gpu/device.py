"""The GPU a kernel is built for, for kernels that ask the GPU while being built.

Persistent kernels size their grid with ``driver.get_num_sms()``; others read the shared memory
or L2 size. A build machine may have no GPU (CI) or a different one, so tl_aot answers those
questions from a named profile instead: ``--device H100-SXM`` (default per arch below). The
profile used is recorded in the manifest and shown by ``inspect``.
"""

from __future__ import annotations

import contextlib
import importlib
import types
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from ..common.arch import Arch, parse_arch
from ..common.errors import SpecError
from .cuda_driver import emulating as _emulating_gpu
from .cuda_driver import traits_text

__all__ = [
    "DeviceProfile",
    "PROFILES",
    "default_profile",
    "find_profile",
    "profile_reported_as",
    "emulate",
    "emulate_tilelang_nvcc",
    "traits_of",
]


@dataclass(frozen=True)
class DeviceProfile:
    """What TileLang's driver queries report for one GPU model."""

    name: str
    cc: str  # compute capability without suffix: "90", "80"
    sm_count: int
    smem_per_block_optin: int  # bytes a block may opt in to
    smem_per_sm: int
    l2_bytes: int
    l2_persisting_max: int
    regs_per_block: int = 65536
    max_threads_per_block: int = 1024
    threads_per_sm: int = 2048  # resident threads per SM: 1536 on compute capabilities 8.6, 8.9 and 12.0
    total_memory: int = 80 * 2**30
    device_name: str = ""  # what torch.cuda.get_device_name() reports on that GPU

    @property
    def reported_name(self) -> str:
        return self.device_name or f"NVIDIA {self.name}"


PROFILES = {
    p.name: p
    for p in (
        DeviceProfile(
            "A100-SXM", "80", 108, 166912, 167936, 40 * 2**20, 30 * 2**20, total_memory=80 * 2**30, device_name="NVIDIA A100-SXM4-80GB"
        ),
        DeviceProfile(
            "A100-PCIe", "80", 108, 166912, 167936, 40 * 2**20, 30 * 2**20, total_memory=40 * 2**30, device_name="NVIDIA A100-PCIE-40GB"
        ),
        DeviceProfile(
            "A10", "86", 72, 101376, 102400, 6 * 2**20, 4 * 2**20, threads_per_sm=1536, total_memory=24 * 2**30, device_name="NVIDIA A10"
        ),
        DeviceProfile(
            "RTX-4090",
            "89",
            128,
            101376,
            102400,
            72 * 2**20,
            54 * 2**20,
            threads_per_sm=1536,
            total_memory=24 * 2**30,
            device_name="NVIDIA GeForce RTX 4090",
        ),
        DeviceProfile(
            "L40S",
            "89",
            142,
            101376,
            102400,
            96 * 2**20,
            72 * 2**20,
            threads_per_sm=1536,
            total_memory=48 * 2**30,
            device_name="NVIDIA L40S",
        ),
        DeviceProfile(
            "H100-SXM", "90", 132, 232448, 233472, 50 * 2**20, 3932160 * 8, total_memory=80 * 2**30, device_name="NVIDIA H100 80GB HBM3"
        ),
        DeviceProfile(
            "H100-PCIe", "90", 114, 232448, 233472, 50 * 2**20, 3932160 * 8, total_memory=80 * 2**30, device_name="NVIDIA H100 PCIe"
        ),
        DeviceProfile("H200", "90", 132, 232448, 233472, 50 * 2**20, 3932160 * 8, total_memory=141 * 2**30, device_name="NVIDIA H200"),
        DeviceProfile("B200", "100", 148, 232448, 233472, 126 * 2**20, 94 * 2**20, total_memory=180 * 2**30, device_name="NVIDIA B200"),
        # sm_120 (consumer Blackwell): 99 KiB of shared memory a block may opt in to (CUTLASS's
        # sm120_smem_capacity_bytes), 100 KiB per SM, 1536 threads per SM, as sm_86 / sm_89
        DeviceProfile(
            "RTX-5090",
            "120",
            170,
            101376,
            102400,
            96 * 2**20,
            72 * 2**20,
            threads_per_sm=1536,
            total_memory=32 * 2**30,
            device_name="NVIDIA GeForce RTX 5090",
        ),
    )
}

_DEFAULTS = {"80": "A100-SXM", "86": "A10", "87": "A10", "89": "L40S", "90": "H100-SXM", "100": "B200", "120": "RTX-5090"}


def _cc(arch: Arch) -> str:
    return f"{arch.major}{arch.minor}"


def default_profile(arch: Arch) -> DeviceProfile:
    """The GPU assumed for ``arch`` when none is named: the common data-centre part of that arch."""
    name = _DEFAULTS.get(_cc(arch))
    if name is None:  # a newer arch: the closest older one we know, of the same major first (sm_121: the sm_120 part)
        older = [cc for cc in _DEFAULTS if int(cc) <= int(_cc(arch))]
        family = [cc for cc in older if int(cc[:-1]) == arch.major]
        name = _DEFAULTS[max(family or older, key=int)] if older else "A100-SXM"
    return PROFILES[name]


def find_profile(name: str, arch: Arch | None = None) -> DeviceProfile:
    """The profile called ``name`` (case and ``_``/``-``/space insensitive); it must fit ``arch`` if given."""
    norm = name.replace("_", "-").replace(" ", "-").lower()
    for p in PROFILES.values():
        if p.name.lower() == norm:
            if arch is not None and p.cc != _cc(arch):
                msg = f"device {p.name} is sm_{p.cc}; it cannot be the GPU of an {arch.sm} build"
                raise SpecError(msg)
            return p
    msg = f"unknown device {name!r}; known: {', '.join(PROFILES)}"
    raise SpecError(msg)


def profile_reported_as(names: Collection[str], archs: Collection[Arch | str] | None) -> str:
    """The profile of the GPU model the driver reported as ``names``, when it answers for one of ``archs``; else ''.

    '' when the name is no profile's, or when several models were reported. A kernel captured on an
    H100 and built for sm_80 too is lowered for sm_80 as an A100 would answer (''), its recorded
    device code (sm_90a) proving only the sm_90a variant. Archs not known yet (None, empty): the
    profile as it is, the spec checks it against them later.
    """
    found = {p.name for p in PROFILES.values() for n in set(names) if p.reported_name == n}
    if len(found) != 1 or len(set(names)) != 1:
        return ""
    name = found.pop()
    if not archs:
        return name
    for arch in archs:
        with contextlib.suppress(SpecError):  # an arch spelled wrong is reported where the spec is made
            find_profile(name, parse_arch(arch) if isinstance(arch, str) else arch)
            return name
    return ""


def traits_of(p: DeviceProfile) -> str:
    """The GPU traits (:func:`tl_aot.gpu.cuda_driver.gpu_identity`) the driver reports on a GPU of this profile."""
    return traits_text(p.sm_count, p.smem_per_block_optin, p.smem_per_sm, p.l2_bytes)


def _properties(p: DeviceProfile):
    """An object shaped like ``torch.cuda.get_device_properties()``, as TileLang's driver reads it."""
    return types.SimpleNamespace(
        name=p.reported_name,
        major=int(p.cc[:-1]),
        minor=int(p.cc[-1]),
        multi_processor_count=p.sm_count,
        shared_memory_per_block=48 * 1024,
        shared_memory_per_block_optin=p.smem_per_block_optin,
        shared_memory_per_multiprocessor=p.smem_per_sm,
        L2_cache_size=p.l2_bytes,
        total_memory=p.total_memory,
        regs_per_multiprocessor=65536,
        max_threads_per_multi_processor=p.threads_per_sm,
        warp_size=32,
    )


@contextlib.contextmanager
def emulate(profile: DeviceProfile):
    """Answer device queries from ``profile`` meanwhile: TileLang's driver, tl_aot's own and, if torch is loaded, ``torch.cuda``'s.

    Kernel factories pick tiles from ``torch.cuda.get_device_capability()``, the SM count or
    the shared memory a block may opt in to; on the build machine (no GPU, or another one) those
    answer as the GPU being built for: one device, index 0, of this profile.
    """
    with (
        _emulate_torch(profile),
        _emulate_tilelang(profile),
        emulate_tilelang_nvcc(profile),
        _emulating_gpu(profile.cc, traits_of(profile), profile.reported_name),
    ):
        yield


@contextlib.contextmanager
def _emulate_torch(profile: DeviceProfile):
    """``torch.cuda``'s device queries (not its allocations or launches) answered from ``profile``."""
    import sys

    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is None:
        yield
        return
    props = _properties(profile)
    cap = (props.major, props.minor)
    answers = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "get_device_capability": lambda device=None: cap,
        "get_device_name": lambda device=None: props.name,
        "get_device_properties": lambda device=None: props,
    }
    saved = {n: getattr(cuda, n) for n in answers if hasattr(cuda, n)}
    for n, f in answers.items():
        setattr(cuda, n, f)
    try:
        yield
    finally:
        for n, f in saved.items():
            setattr(cuda, n, f)


@contextlib.contextmanager
def _emulate_tilelang(profile: DeviceProfile):
    """TileLang's own driver queries (``tilelang.carver.arch.driver``) answered from ``profile``."""
    try:
        from tilelang.carver.arch.driver import cuda_driver
    except ImportError:  # another TileLang layout: nothing to answer
        yield
        return
    attrs = {
        cuda_driver.cudaDeviceAttrNames.cudaDevAttrMaxThreadsPerBlock: profile.max_threads_per_block,
        cuda_driver.cudaDeviceAttrNames.cudaDevAttrMaxRegistersPerBlock: profile.regs_per_block,
        cuda_driver.cudaDeviceAttrNames.cudaDevAttrMaxSharedMemoryPerMultiprocessor: profile.smem_per_sm,
        cuda_driver.cudaDeviceAttrNames.cudaDevAttrMaxPersistingL2CacheSize: profile.l2_persisting_max,
    }
    props = _properties(profile)
    saved = {n: getattr(cuda_driver, n) for n in ("get_cuda_device_properties", "get_device_attribute")}
    cuda_driver.get_cuda_device_properties = lambda device_id=0: props
    cuda_driver.get_device_attribute = lambda attr, device_id=0: attrs.get(attr)
    try:
        yield
    finally:
        for n, f in saved.items():
            setattr(cuda_driver, n, f)


@contextlib.contextmanager
def emulate_tilelang_nvcc(profile: DeviceProfile, nvcc: types.ModuleType | None = None):
    """``tilelang.contrib.nvcc.get_target_compute_version()`` with no arch to go by answered from ``profile``.

    Given no target (and none current with an arch), TileLang asks the GPU itself (``tvm.cuda(0)``);
    examples call it before anything else (``assert float(arch) >= 9.0``: the GQA backward with TMA
    reduction) and without a GPU it raises "No CUDA architecture was specified or GPU detected". A
    target with an arch is still answered by TileLang. ``nvcc``: the module, when it is being imported.
    """
    module: Any = nvcc
    if module is None:
        try:
            module = importlib.import_module("tilelang.contrib.nvcc")
        except ImportError:  # another TileLang layout: nothing to answer
            yield
            return
    Target, original = module.Target, module.get_target_compute_version
    version = f"{profile.cc[:-1]}.{profile.cc[-1]}"

    def get_target_compute_version(target=None):
        current = target or Target.current(allow_none=True)
        if current is None or (isinstance(current, Target) and "arch" not in current.attrs):
            return version
        return original(target)

    module.get_target_compute_version = get_target_compute_version
    try:
        yield
    finally:
        module.get_target_compute_version = original
