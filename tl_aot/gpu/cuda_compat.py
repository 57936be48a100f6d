"""What loads where: the oldest driver a library needs, and the oldest CUDA that builds an arch.

NVIDIA's rules (CUDA Compatibility guide, "Minor Version Compatibility"; the toolkit release notes'
driver table):

* A **cubin** (SASS) made by CUDA X.Y loads on any driver of major X: 12.x cubins on drivers
  >= 525.60.13 (CUDA 12.0), 13.x cubins on >= 580.65.06 (CUDA 13.0). Newer majors' drivers load
  older majors' cubins (backward compatibility), never the reverse.
* **PTX** made by CUDA X.Y is JIT-compiled by the driver, which must know that PTX ISA: it needs the
  driver of CUDA X.Y itself (else ``CUDA_ERROR_UNSUPPORTED_PTX_VERSION``). An ``80+PTX`` image
  therefore raises the floor to the compiler's own minor release.
* tl_aot's launcher runtime asks the driver for CUDA 12.0 entry points (``cuGetProcAddress``);
  CuTeDSL images are matched to kernels by enumerating a module's functions, which needs 12.4.

A library's floor is the highest floor of its images; the manifest records it (``driver``) and the
launcher refuses an older driver with one message naming both ways out.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DriverFloor",
    "DRIVER_FOR_CUDA",
    "ARCH_MIN_CUDA",
    "image_floor",
    "library_floor",
    "min_cuda_for_arch",
    "COMPUTE_CAPABILITIES",
    "cuda_int",
    "cuda_str",
]

#: CUDA release → the oldest Linux x86-64 driver that ships with it (release notes, Table 3).
DRIVER_FOR_CUDA = {
    (12, 0): "525.60.13",
    (12, 1): "530.30.02",
    (12, 2): "535.54.03",
    (12, 3): "545.23.06",
    (12, 4): "550.54.14",
    (12, 5): "555.42.02",
    (12, 6): "560.28.03",
    (12, 8): "570.26",
    (12, 9): "575.51.03",
    (13, 0): "580.65.06",
}

#: Compute capability → the oldest CUDA whose compiler builds it (arch-specific ``a`` forms
#: included: sm_90a came with 12.0, sm_100a / sm_120a with 12.8, sm_103a / sm_121a with 12.9;
#: sm_88 and sm_110 (Thor, sm_101 before 13.0) need 13.0). Older archs all build with 12.0.
ARCH_MIN_CUDA = {
    90: (12, 0),
    100: (12, 8),
    101: (12, 8),
    103: (12, 9),
    120: (12, 8),
    121: (12, 9),
    88: (13, 0),
    110: (13, 0),
}

#: Every compute capability NVIDIA has shipped a GPU or a compiler target for (sm_99 is none: a typo, not a newer CUDA's).
COMPUTE_CAPABILITIES = frozenset({50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121})

#: The launcher runtime's own floor (its driver entry points), and CuTeDSL images'.
RUNTIME_MIN_CUDA = (12, 0)
CUTEDSL_MIN_CUDA = (12, 4)


@dataclass(frozen=True)
class DriverFloor:
    """The oldest driver that loads a library: as a CUDA version and as a Linux driver version."""

    min_cuda: str  # "12.0"
    min_version: str  # "525.60.13" (or "" when NVIDIA's table has no entry for it here)

    @property
    def as_int(self) -> int:
        """``cuDriverGetVersion``'s spelling: 12000 for 12.0."""
        return cuda_int(self.min_cuda)


def _pair(version: str) -> tuple[int, int]:
    parts = [int(p) for p in version.split(".")[:2] if p.isdigit()]
    return (parts + [0, 0])[0], (parts + [0, 0])[1]


def cuda_int(version: str) -> int:
    """``"12.4.131"`` → 12040, as ``cuDriverGetVersion`` reports versions."""
    major, minor = _pair(version)
    return major * 1000 + minor * 10


def cuda_str(value: int) -> str:
    """12040 → ``"12.4"``."""
    return f"{value // 1000}.{(value % 1000) // 10}"


def image_floor(compiler_version: str, *, ptx: bool, backend: str = "cuda") -> tuple[int, int]:
    """The oldest driver (as a CUDA (major, minor)) that loads one image made by ``compiler_version``."""
    major, minor = _pair(compiler_version)
    floor = (major, minor) if ptx else (major, 0)
    if backend == "cutedsl":
        floor = max(floor, CUTEDSL_MIN_CUDA)
    return max(floor, RUNTIME_MIN_CUDA)


def library_floor(floors) -> DriverFloor:
    """The floor of a library from its images' floors ((major, minor) pairs)."""
    top = max(floors, default=RUNTIME_MIN_CUDA)
    return DriverFloor(f"{top[0]}.{top[1]}", DRIVER_FOR_CUDA.get(top, ""))


def min_cuda_for_arch(number: int) -> tuple[int, int]:
    """The oldest CUDA whose compiler builds compute capability ``number`` (90 for sm_90a)."""
    return ARCH_MIN_CUDA.get(number, (12, 0))
