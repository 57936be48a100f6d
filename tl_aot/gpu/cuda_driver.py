"""The GPU this process sees, asked of the NVIDIA driver the way a tl_aot library's launcher asks it.

Serving decides whether a prebuilt image fits the GPU before any call: that must not depend on
torch being imported (or initialised), so the answer comes from ``libcuda.so.1`` itself, loaded
with ctypes exactly as the launcher runtime loads it (``dlopen("libcuda.so.1")`` then
``libcuda.so``): ``cuInit``, ``cuDeviceGetCount``, the compute capability attributes of the
current context's device (device 0 when no context is current). With no driver, a failing
``cuInit`` or no device, :func:`current_gpu` says why. The driver is loaded once per process;
device queries are a few ctypes calls. While :mod:`tl_aot.gpu.device` emulates a GPU profile, the
profile answers instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["Gpu", "current_gpu", "gpu_identity", "gpu_name", "current_gpu_identity", "traits_text", "emulating", "reset"]

#: The names the launcher runtime dlopens, in order (tl_aot/src/driver.cc).
DRIVER_NAMES = ("libcuda.so.1", "libcuda.so")
_CC_MAJOR, _CC_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
#: What a kernel factory may size its kernel by, besides the compute capability: SM count, opt-in shared memory per
#: block, shared memory per SM, L2 size (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ..._MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
#: ..._MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, ..._L2_CACHE_SIZE).
_TRAITS = (("sms", 16), ("smem_optin", 97), ("smem_sm", 81), ("l2", 38))
_CUDA_SUCCESS = 0


@dataclass(frozen=True)
class Gpu:
    """The current GPU's compute capability (``"90"``), or ``""`` with the reason none is visible."""

    cc: str = ""
    device: int = 0
    why_none: str = ""

    def __bool__(self) -> bool:
        return bool(self.cc)

    @property
    def sm(self) -> str:
        """``sm_90``, or ``no GPU`` when none is visible."""
        return f"sm_{self.cc}" if self.cc else "no GPU"


class _Driver:
    """``libcuda`` loaded once (or the reason it cannot be), with its device capabilities cached."""

    def __init__(self, names=DRIVER_NAMES) -> None:
        self.lib: Any = None  # the loaded ctypes.CDLL: its cu* functions are looked up by name
        self.error = ""
        self.count = 0
        self.ccs: dict[int, str] = {}
        self.trait_text: dict[int, str] = {}
        self.names: dict[int, str] = {}
        self.identities: dict[int, tuple[Gpu, str]] = {}  # device -> (its Gpu, its gpu_identity): neither changes
        self._get_device: Any = None  # cuCtxGetDevice, looked up once (None when the driver lacks it)
        self._load(names)

    def _load(self, names) -> None:
        why = ""
        for name in names:
            try:
                self.lib = ctypes.CDLL(name, mode=ctypes.RTLD_LOCAL)
                break
            except OSError as e:
                why = why or str(e)
        if self.lib is None:
            self.error = (
                f"cannot load the NVIDIA driver library libcuda.so.1 ({why or 'not found'}): "
                "this machine has no NVIDIA driver, or it is not on the loader path"
            )
            return
        try:
            init, get_count = self.lib.cuInit, self.lib.cuDeviceGetCount
        except AttributeError as e:
            self.error = f"the NVIDIA driver library lacks {e}"
            return
        r = init(0)
        if r != _CUDA_SUCCESS:
            self.error = f"cuInit failed with CUresult {r} (is a GPU visible to this process? check CUDA_VISIBLE_DEVICES and the driver)"
            return
        n = ctypes.c_int(0)
        r = get_count(ctypes.byref(n))
        if r != _CUDA_SUCCESS or n.value <= 0:
            self.error = "the NVIDIA driver reports no device (check CUDA_VISIBLE_DEVICES)"
            return
        self.count = n.value
        self._get_device = getattr(self.lib, "cuCtxGetDevice", None)

    def current_device(self) -> int:
        """The device of the calling thread's current context (torch's current device once it used CUDA), else 0.

        One driver call per lookup: ``cuCtxGetDevice`` fails (``CUDA_ERROR_INVALID_CONTEXT``) when
        no context is current, so asking ``cuCtxGetCurrent`` first would only say so twice.
        """
        get_device = self._get_device
        if get_device is None:
            return 0
        dev = ctypes.c_int(0)
        if get_device(ctypes.byref(dev)) == _CUDA_SUCCESS and 0 <= dev.value < self.count:
            return dev.value
        return 0

    def cc(self, device: int) -> str:
        have = self.ccs.get(device)
        if have is None:
            major, minor, handle = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
            ok = (
                self.lib.cuDeviceGet(ctypes.byref(handle), device) == _CUDA_SUCCESS
                and self.lib.cuDeviceGetAttribute(ctypes.byref(major), _CC_MAJOR, handle) == _CUDA_SUCCESS
                and self.lib.cuDeviceGetAttribute(ctypes.byref(minor), _CC_MINOR, handle) == _CUDA_SUCCESS
            )
            have = self.ccs[device] = f"{major.value}{minor.value}" if ok else ""
        return have

    def name(self, device: int) -> str:
        """``device``'s model as the driver names it (``NVIDIA H200``; '' when it does not say): ``cuDeviceGetName``."""
        have = self.names.get(device)
        if have is None:
            handle, buf = ctypes.c_int(0), ctypes.create_string_buffer(256)
            get_name = getattr(self.lib, "cuDeviceGetName", None)
            ok = (
                get_name is not None
                and self.lib.cuDeviceGet(ctypes.byref(handle), device) == _CUDA_SUCCESS
                and get_name(buf, len(buf), handle) == _CUDA_SUCCESS
            )
            have = self.names[device] = buf.value.decode("utf-8", "replace").strip() if ok else ""
        return have

    def traits(self, device: int) -> str:
        """``sms=132,smem_optin=232448,...`` of ``device`` ('' when the driver does not say)."""
        have = self.trait_text.get(device)
        if have is None:
            handle, value = ctypes.c_int(0), ctypes.c_int(0)
            parts: list[str] = []
            if self.lib.cuDeviceGet(ctypes.byref(handle), device) == _CUDA_SUCCESS:
                for name, attr in _TRAITS:
                    if self.lib.cuDeviceGetAttribute(ctypes.byref(value), attr, handle) != _CUDA_SUCCESS:
                        parts = []
                        break
                    parts.append(f"{name}={value.value}")
            have = self.trait_text[device] = ",".join(parts)
        return have


_driver: _Driver | None = None
_lock = threading.Lock()
_emulated: list[tuple[str, str, str]] = []  # (compute capability, traits, model name) of the profiles emulated, innermost last
_emulated_gpus: dict[tuple[str, str], tuple[Gpu, str]] = {}  # (cc, traits) -> current_gpu_identity()'s answer


def _the_driver(names=DRIVER_NAMES) -> _Driver:
    global _driver
    if _driver is None:
        with _lock:
            if _driver is None:
                _driver = _Driver(names)
    return _driver


def current_gpu(*, names=DRIVER_NAMES) -> Gpu:
    """The GPU a kernel launched now would run on, from the driver (``names``: the libraries tried, for tests)."""
    if _emulated:
        return Gpu(_emulated[-1][0], 0)
    d = _the_driver(names)
    if d.error:
        return Gpu("", 0, d.error)
    dev = d.current_device()
    cc = d.cc(dev)
    if not cc:
        return Gpu("", dev, f"the NVIDIA driver did not report device {dev}'s compute capability")
    return Gpu(cc, dev)


def gpu_identity(gpu: Gpu | None = None) -> str:
    """``90:sms=132,smem_optin=232448,smem_sm=233472,l2=52428800``: what a kernel factory may read of the current GPU.

    '' with no GPU. A kernel keyed by its call (:mod:`tl_aot.call_keys.key`) is keyed by this, not by
    the compute capability alone: GPUs of one arch differ in SM count (H100 SXM and PCIe). ``gpu``:
    :func:`current_gpu`'s answer when the caller already asked the driver (serving's lookups do).
    """
    if _emulated:
        cc, traits, _ = _emulated[-1]
        return f"{cc}:{traits}"
    gpu = current_gpu() if gpu is None else gpu
    if not gpu:
        return ""
    return f"{gpu.cc}:{_the_driver().traits(gpu.device)}"


def gpu_name(gpu: Gpu | None = None) -> str:
    """The model of ``gpu`` (default: :func:`current_gpu`) as the driver names it, ``NVIDIA H200``; '' when unknown or none.

    What ``torch.cuda.get_device_name()`` answers on that GPU, and what a capture records of the
    GPU it ran on: a workload may pick its kernels by it (an H200-only kernel), so serving names it
    when a library captured on another model lacks a kernel. Asked only to say so, never per lookup.
    """
    if _emulated:
        return _emulated[-1][2]
    gpu = current_gpu() if gpu is None else gpu
    return _the_driver().name(gpu.device) if gpu else ""


def current_gpu_identity() -> tuple[Gpu, str]:
    """:func:`current_gpu` and :func:`gpu_identity` of it, from one question to the driver: what each served lookup asks.

    Which device is current may change from call to call (``torch.cuda.set_device``); what a
    device is does not: its ``Gpu`` and identity are kept per device, so a lookup asks the driver
    only which device is current (two ctypes calls), not its attributes or a new ``Gpu``.
    """
    if _emulated:
        cc, traits, _ = _emulated[-1]
        return _emulated_gpus.get((cc, traits)) or _emulated_gpus.setdefault((cc, traits), (Gpu(cc, 0), f"{cc}:{traits}"))
    d = _the_driver()
    if d.error:
        return Gpu("", 0, d.error), ""
    dev = d.current_device()
    have = d.identities.get(dev)
    if have is None:
        gpu = current_gpu()
        have = (gpu, gpu_identity(gpu) if gpu else "")
        if gpu and gpu.device == dev:  # the same device asked again (not another thread's switch between the two questions)
            d.identities[dev] = have
    return have


def traits_text(sms: int, smem_optin: int, smem_sm: int, l2: int) -> str:
    """The traits :func:`gpu_identity` reports, spelled from known values (a device profile's)."""
    return f"sms={sms},smem_optin={smem_optin},smem_sm={smem_sm},l2={l2}"


@contextlib.contextmanager
def emulating(cc: str, traits: str = "", name: str = ""):
    """Meanwhile :func:`current_gpu` answers a GPU of compute capability ``cc`` (a device profile's, with its ``traits``).

    ``name``: the model :func:`gpu_name` answers meanwhile (the profile's, as the driver names it).
    """
    _emulated.append((cc, traits, name))
    try:
        yield
    finally:
        _emulated.pop()


def reset() -> None:
    """Forget the loaded driver (tests load a fake one)."""
    global _driver
    with _lock:
        _driver = None
