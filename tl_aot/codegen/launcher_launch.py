"""What the launcher does to launch one arch's kernels, as typed pieces: launch configs, arguments, TMA, workspaces.

Built from the metadata for :mod:`tl_aot.codegen.launcher_context`; ``launch_v<i>`` in ``launcher.cc.j2``
substitutes them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..common.cpp_spelling import c_string_body, cpp_bool, image_symbol
from ..common.errors import LoweringError
from ..common.metadata import ArchVariant, DeviceKernel, LoweredEntry, TmaDescriptor, Workspace

__all__ = ["VariantCode", "variant_code"]

#: rt::kMaxKernels (and Workspaces' capacity) in tl_aot/include/tl_aot/runtime/base.h (runtime/buffers.h).
_MAX_KERNELS = 16

#: A C++ integer literal: spelled as it is in a braced initialiser (a constant that fits is no narrowing).
_INT_LITERAL = re.compile(r"-?\d+")


@dataclass(frozen=True)
class KernelLocal:
    """A kernel argument computed into a local of its type before the launch (every one but a TMA descriptor)."""

    index: int
    ctype: str
    value: str


@dataclass(frozen=True)
class L2Code:
    """An L2 persisting-access window around a launch; ``hit_ratio`` is a C++ float literal."""

    tensor: str
    num_bytes: str
    hit_ratio: str


@dataclass(frozen=True)
class LaunchCode:
    """One ``__global__`` launch: its table row (name, static shared memory, cluster size) and its launch statement."""

    name: str
    static_smem: int  # bytes, or -1 when computed per call
    checks_smem: bool  # shared memory computed per call: checked against the device's limit before launching
    cluster_size: int
    grid: tuple[str, ...]
    block: tuple[str, ...]
    dynamic_smem: str
    locals: tuple[KernelLocal, ...]
    arg_refs: str  # the void* args[] initialiser ("nullptr" for none)
    cluster_dims: tuple[int, ...]
    cluster_arg: str  # "cluster" or "nullptr"
    l2_windows: tuple[L2Code, ...]
    cooperative: str  # C++ bool
    pdl: str  # C++ bool


@dataclass(frozen=True)
class WorkspaceCode:
    """A global buffer allocated per call: its pointer's identifier, name (a C string body) and size."""

    cpp: str
    name: str
    factors: tuple[str, ...]  # C++ factors of the element count
    elem_bytes: int


@dataclass(frozen=True)
class TmaCode:
    """A ``CUtensorMap`` encoded per call (tiled or im2col); every field is C++.

    The arrays' values are spelled for the template's arrays (:func:`_as`): ``global_dim`` as
    ``cuuint64_t``, ``strides`` as ``int64_t``, ``element_strides`` and ``box_dim`` as ``cuuint32_t``,
    the corners as ``int``.
    """

    tensor: str
    tiled: bool
    dtype: int
    rank: int
    global_address: str
    global_dim: tuple[str, ...]
    strides: tuple[str, ...]  # the rank - 1 byte strides, or ("0",) for rank 1
    element_strides: tuple[str, ...]
    box_dim: tuple[str, ...]
    lower_corner: tuple[str, ...]
    upper_corner: tuple[str, ...]
    channels_per_pixel: str
    pixels_per_column: str
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int


@dataclass(frozen=True)
class VariantCode:
    """One arch's image of an entry: its row in the image table and what ``launch_v<i>`` does."""

    arch: str
    image_symbol: str
    major: int
    minor: int
    arch_specific: str  # C++ bool: an sm_XXa image
    ptx: str  # C++ bool: a fatbin with a PTX fallback
    kernels: tuple[LaunchCode, ...]
    workspaces: tuple[WorkspaceCode, ...]
    tma: tuple[TmaCode, ...]


def _launch_code(k: DeviceKernel) -> LaunchCode:
    """One launch; shared memory that is not a constant is computed per call and checked before launching."""
    try:
        static_smem = int(k.dynamic_smem)
    except ValueError:
        static_smem = -1
    refs = [f"&tma[{a.value}]" if a.ctype == "CUtensorMap" else f"&arg_{i}" for i, a in enumerate(k.args)]
    return LaunchCode(
        name=k.name,
        static_smem=static_smem,
        checks_smem=static_smem < 0,
        cluster_size=math.prod(k.cluster_dims or (1,)),
        grid=tuple(k.grid),
        block=tuple(k.block),
        dynamic_smem=k.dynamic_smem,
        locals=tuple(KernelLocal(i, a.ctype, a.value) for i, a in enumerate(k.args) if a.ctype != "CUtensorMap"),
        arg_refs=", ".join(refs) or "nullptr",
        cluster_dims=tuple(k.cluster_dims),
        cluster_arg="cluster" if k.cluster_dims else "nullptr",
        l2_windows=tuple(L2Code(w.tensor, w.num_bytes, f"{float(w.hit_ratio)!r}f") for w in k.l2_windows),
        cooperative=cpp_bool(k.cooperative),
        pdl=cpp_bool(k.pdl),
    )


def _workspace_code(w: Workspace) -> WorkspaceCode:
    """A workspace allocated per call, its pointer named as the kernels' arguments name it (``Workspace.cpp``)."""
    return WorkspaceCode(w.cpp, c_string_body(w.name), tuple(w.factors) or ("1",), max(1, (w.elem_bits + 7) // 8))


def _tma_code(d: TmaDescriptor) -> TmaCode:
    """A descriptor's encoding call; a rank-1 tensor has no stride to pass, so ``{0}``."""
    return TmaCode(
        tensor=d.tensor,
        tiled=d.mode == "tiled",
        dtype=d.dtype,
        rank=d.rank,
        global_address=d.global_address,
        global_dim=_as("cuuint64_t", d.global_dim),
        strides=_as("int64_t", d.global_stride) if d.rank > 1 else ("0",),
        element_strides=_as("cuuint32_t", d.element_strides),
        box_dim=_as("cuuint32_t", d.box_dim),
        lower_corner=_as("int", d.lower_corner),
        upper_corner=_as("int", d.upper_corner),
        channels_per_pixel=d.channels_per_pixel,
        pixels_per_column=d.pixels_per_column,
        interleave=d.interleave,
        swizzle=d.swizzle,
        l2_promotion=d.l2_promotion,
        oob_fill=d.oob_fill,
    )


def _as(ctype: str, values: Iterable[str]) -> tuple[str, ...]:
    """``values`` as elements of a braced ``ctype`` array: a literal as it is, an expression converted explicitly.

    A dynamic dim is an ``int64_t`` (or ``int32_t``) symbol such as ``s_m``; put as it is into
    ``cuuint64_t dims[] = {...}`` it is a narrowing conversion, which compilers warn of
    (``-Wnarrowing``) and C++ forbids. ``static_cast<cuuint64_t>(s_m)`` is the same conversion, said
    to be meant: the same value reaches ``cuTensorMapEncode*``, which checks its range.
    """
    return tuple(str(v) if _INT_LITERAL.fullmatch(str(v).strip()) else f"static_cast<{ctype}>({v})" for v in values)


def variant_code(e: LoweredEntry, v: ArchVariant, where: str) -> VariantCode:
    """One arch's image, launches, TMA descriptors and workspaces; the runtime holds at most 16 kernels."""
    if len(v.kernels) > _MAX_KERNELS or len(v.workspaces) > _MAX_KERNELS:
        msg = (
            f"{where} ({v.arch}): launches {len(v.kernels)} kernels with {len(v.workspaces)} workspaces; "
            f"the launcher runtime holds at most {_MAX_KERNELS} of each per entry (rt::kMaxKernels)"
        )
        raise LoweringError(msg, entry=e.name, arch=v.arch.sm)
    a = v.arch
    return VariantCode(
        arch=a.sm,
        image_symbol=image_symbol(e.name, a),
        major=a.major,
        minor=a.minor,
        arch_specific=cpp_bool(a.suffix == "a"),
        ptx=cpp_bool(a.ptx),
        kernels=tuple(_launch_code(k) for k in v.kernels),
        workspaces=tuple(_workspace_code(w) for w in v.workspaces),
        tma=tuple(_tma_code(d) for d in v.tma_descriptors),
    )
