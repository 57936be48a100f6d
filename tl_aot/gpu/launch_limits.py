"""Launch limits of each arch, checked at build time: a launch no GPU of the arch can make is a build error.

Shared memory per block (static and dynamic, with the opt-in the launcher makes), threads per
block, grid dims (when they are constants) and thread-block clusters. Dynamic sizes are the
launcher's to check at call time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..common.arch import Arch
from ..common.errors import LoweringError

__all__ = ["max_shared_bytes", "check_launch_limits", "static_int"]

#: Shared memory a block may opt in to, by (major, minor) (CUDA programming guide, compute capabilities).
_SHARED_KIB = {
    **{(7, 5): 64, (8, 0): 163, (8, 6): 99, (8, 7): 163, (8, 9): 99, (9, 0): 227},
    **{(10, 0): 227, (10, 3): 227, (11, 0): 227, (12, 0): 99, (12, 1): 99},  # 12.x: consumer Blackwell, as sm_86 / sm_89
}
_SHARED_KIB_BY_MAJOR = {7: 64, 8: 99, 9: 227, 10: 227, 11: 227, 12: 99}
#: Static ``__shared__`` arrays are limited to 48 KiB without an opt-in (dynamic memory takes the rest).
STATIC_SHARED_BYTES = 48 * 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)
#: Thread-block cluster: sm_90+, at most 8 blocks portably, 16 with the non-portable opt-in.
MAX_CLUSTER, PORTABLE_CLUSTER = 16, 8

_INT = re.compile(r"\(?(?:\((?:u?int(?:32|64)_t|int|unsigned)\)|(?:u?int(?:32|64)_t|int)\()?\s*(\d+)\s*\)?\)?")


def max_shared_bytes(arch: Arch) -> int:
    """Shared memory one block of ``arch`` may use (bytes), with the opt-in."""
    kib = _SHARED_KIB.get((arch.major, arch.minor), _SHARED_KIB_BY_MAJOR.get(arch.major, 99))
    return kib * 1024


def static_int(expr) -> int | None:
    """The value of a launch dimension spelled in C++ when it is a constant (``4``, ``int64_t(4)``), else None."""
    m = _INT.fullmatch(str(expr).strip())
    return int(m.group(1)) if m else None


def check_launch_limits(kernels, static_shared: Mapping[str, int], target: Arch, where: str, **fields) -> None:
    """Raise :class:`LoweringError` for the first launch of ``kernels`` that exceeds ``target``'s limits.

    ``static_shared`` maps a kernel name to the bytes of its static ``__shared__`` arrays;
    ``fields`` (entry, arch, location) go on the error. Each message names the kernel, the arch,
    the value and the limit.
    """
    for k in kernels:
        problem = _problem(k, static_shared.get(k.name, 0), target)
        if problem:
            msg = f"{where}: kernel {k.name} cannot launch on {target.sm}: {problem}"
            raise LoweringError(msg, **fields)


def _problem(k, static_smem: int, arch: Arch) -> str:
    """What in kernel ``k``'s launch exceeds ``arch``'s limits, or ''."""
    block = [static_int(b) for b in k.block]
    for axis, v, limit in zip("xyz", block, MAX_BLOCK):
        if v is not None and v > limit:
            return f"block {axis} = {v} threads, more than the limit of {limit}"
    sizes = [v for v in block if v is not None]
    if len(sizes) == len(block) and sizes[0] * sizes[1] * sizes[2] > MAX_THREADS:
        return f"{sizes[0] * sizes[1] * sizes[2]} threads per block, more than the limit of {MAX_THREADS}: use fewer threads"
    grid = [static_int(g) for g in k.grid]
    for axis, v, limit in zip("xyz", grid, MAX_GRID):
        if v is not None and v > limit:
            return f"grid {axis} = {v} blocks, more than the limit of {limit}: split the work over more grid dims or a loop"
    if static_smem > STATIC_SHARED_BYTES:
        return f"{static_smem} bytes of static __shared__ arrays, more than the limit of {STATIC_SHARED_BYTES} (48 KiB)"
    dynamic = static_int(k.dynamic_smem) or 0
    if static_smem + dynamic > max_shared_bytes(arch):
        return (
            f"{static_smem + dynamic} bytes of shared memory per block, more than the limit of "
            f"{max_shared_bytes(arch)} ({max_shared_bytes(arch) // 1024} KiB) on {arch.sm}: use smaller tiles or fewer stages"
        )
    return _cluster_problem(tuple(k.cluster_dims), grid, arch)


def _cluster_problem(cluster: tuple[int, ...], grid: list[int | None], arch: Arch) -> str:
    """What is wrong with a thread-block cluster launch on ``arch``, or ''."""
    if not cluster or all(int(c) == 1 for c in cluster):
        return ""
    dims = [int(c) for c in cluster]
    if arch.major < 9:
        return f"thread-block clusters {tuple(dims)} need sm_90 or newer"
    size = dims[0] * dims[1] * dims[2]
    if size > MAX_CLUSTER:
        return f"a cluster of {size} blocks {tuple(dims)}, more than the limit of {MAX_CLUSTER} ({PORTABLE_CLUSTER} portably)"
    for axis, g, c in zip("xyz", grid, dims):
        if g is not None and g % c:
            return f"grid {axis} = {g} is not a multiple of the cluster's {c}"
    return ""
