"""Device memory this process holds, from NVML (the driver's ``libnvidia-ml.so.1``): not disturbed by other processes.

``cuMemGetInfo`` (``torch.cuda.mem_get_info``) reads the whole GPU's free memory, which moves
with every other process on it: the GPU tests run four pytest-xdist workers on one GPU, so a
growth read that way is another test's allocation as often as a leak. NVML lists each process's
own usage (its context, modules and allocations).
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["process_device_bytes"]


class _ProcessInfo(ctypes.Structure):
    """``nvmlProcessInfo_t`` as ``nvmlDeviceGetComputeRunningProcesses_v3`` fills it."""

    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


def process_device_bytes(pid: int | None = None) -> int | None:
    """Device memory process ``pid`` (this one by default) holds on every GPU, in bytes; None where NVML cannot say.

    None: no NVML, a call failed, or the process is not listed (a PID namespace NVML does not
    see into, or no CUDA context yet).
    """
    pid = os.getpid() if pid is None else pid
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    if nvml.nvmlInit_v2() != 0:
        return None
    try:
        count = ctypes.c_uint()
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return None
        total, seen = 0, False
        for index in range(count.value):
            handle = ctypes.c_void_p()
            if nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != 0:
                return None
            infos = (_ProcessInfo * 256)()
            n = ctypes.c_uint(len(infos))
            if nvml.nvmlDeviceGetComputeRunningProcesses_v3(handle, ctypes.byref(n), infos) != 0:
                return None
            for info in infos[: n.value]:
                if info.pid == pid:
                    seen = True
                    total += info.usedGpuMemory
        return total if seen else None
    finally:
        nvml.nvmlShutdown()
