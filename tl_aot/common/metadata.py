"""Launch metadata of a lowered kernel library: the single source of truth.

Frozen dataclasses fed by :mod:`tl_aot.lower.lower` and consumed by the launcher template, the
manifest embedded in the library, ``inspect`` and :mod:`tl_aot.runtime.loader`; spelled as JSON and
read back by :mod:`tl_aot.common.metadata_json`, whose rules the field types here decide (a
``tuple[Param, ...]`` holds records, an ``arch: Arch`` is spelled ``arch`` + ``ptx``). This module
imports nothing heavy: the runtime reads it on machines without TileLang or torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Union

from .abi import ABI_VERSION
from .arch import Arch
from .subbyte import Packing, packing_of

__all__ = [
    "ABI_VERSION",
    "Param",
    "Symbol",
    "TmaDescriptor",
    "Workspace",
    "Tuning",
    "Call",
    "KernelArg",
    "L2Window",
    "DeviceKernel",
    "ArchVariant",
    "LoweredEntry",
    "LeftOut",
    "Manifest",
    "LoweredVariant",
]

#: A tensor dimension: an int when static, a symbol name (or an expression over symbols) when dynamic.
Dim = Union[int, str]
#: TVM's spelling of a dtype it knows by name only (``T.tfloat32`` is ``custom[tfloat32]``)
_CUSTOM_DTYPE = re.compile(r"custom\[(\w+)\]")
#: ``(name, Python repr)``: a specialisation argument or an autotune config's value, spelled.
NamedRepr = tuple[str, str]


@dataclass(frozen=True)
class Param:
    """One parameter of the entry, in the prim_func's order (tensors and scalars interleaved as written)."""

    name: str
    kind: str  # "tensor" or "scalar"
    dtype: str  # TileLang dtype name: float16, bfloat16, float32, int32, ...
    shape: tuple[Dim, ...] = ()  # ints for static dims, symbol names (or expressions) for dynamic ones
    strides: tuple[Dim, ...] = ()  # empty: dense row-major; otherwise ints / symbol names per dim
    shape_cpp: tuple[str, ...] = ()  # the same dims spelled in C++ over the launcher's symbols (s_<name>)
    strides_cpp: tuple[str, ...] = ()
    alignment: int = 0  # bytes the kernel assumes the data pointer is aligned to (TileLang: 64); 0 = none
    output: bool = False  # allocated and returned by a call that passes the inputs alone (out_idx, T.empty)
    storage: str = ""  # a sub-byte tensor (int4, float4_e2m1fn): the packed tensor a caller passes, "int8[128]" (tl_aot.common.subbyte)

    @property
    def is_tensor(self) -> bool:
        return self.kind == "tensor"

    @property
    def packing(self) -> Packing | None:
        """How a sub-byte tensor is packed (int4: two per 8-bit element); None for a scalar or a tensor of whole bytes."""
        return packing_of(self.dtype) if self.is_tensor else None

    @property
    def dtype_spelled(self) -> str:
        """The dtype as TileLang's users write it: ``tfloat32`` where TVM (and the manifest) says ``custom[tfloat32]``."""
        custom = _CUSTOM_DTYPE.fullmatch(self.dtype)
        return custom.group(1) if custom else self.dtype

    def spelled(self) -> str:
        """``A: float16[m, 4096]``, ``alpha: float32``, ``A: int4[256] packed in int8[128]``: as errors and ``inspect`` show it."""
        if not self.is_tensor:
            return f"{self.name}: {self.dtype_spelled}"
        packed = f" packed in {self.storage}" if self.storage else ""
        return f"{self.name}: {self.dtype_spelled}[{', '.join(str(d) for d in self.shape)}]{packed}"


@dataclass(frozen=True)
class Symbol:
    """A dynamic shape variable and the first tensor dimension that binds it at run time.

    Most are the dimension itself; one TileLang solves from an expression (``n * 2``) carries the
    solution, as TileLang's host code computes it, and the launcher checks that it solves exactly.
    """

    name: str
    dtype: str
    param: str
    dim: int
    expr: str = ""  # "" (the dim itself) or the solution over the dim, e.g. "X.shape[0] // 2"; a packed last dim: "A.shape[1] * 2"
    cpp: str = ""  # that solution in C++ over the launcher's values (x.t_X->shape[0], s_<name>, a_<name>)

    @property
    def derived(self) -> bool:
        """Whether the symbol is solved from a dim expression rather than being a dim itself."""
        return bool(self.cpp)

    def spelled(self) -> str:
        """``m = A.shape[0]``, ``n = X.shape[0] // 2``: how the launcher binds it, for ``inspect``."""
        return f"{self.name} = {self.expr or f'{self.param}.shape[{self.dim}]'}"


@dataclass(frozen=True)
class TmaDescriptor:
    """A host-encoded ``CUtensorMap`` (tiled or im2col); fields are C++ expressions over the call's values."""

    name: str
    tensor: str  # the tensor parameter whose data the descriptor maps
    mode: str  # "tiled" or "im2col"
    dtype: int  # CUtensorMapDataType
    rank: int
    global_address: str
    global_dim: tuple[str, ...] = ()
    global_stride: tuple[str, ...] = ()  # rank - 1 byte strides (the innermost, always the element size, is implied)
    box_dim: tuple[str, ...] = ()
    element_strides: tuple[str, ...] = ()
    lower_corner: tuple[str, ...] = ()
    upper_corner: tuple[str, ...] = ()
    channels_per_pixel: str = "0"
    pixels_per_column: str = "0"
    interleave: int = 0
    swizzle: int = 0
    l2_promotion: int = 0
    oob_fill: int = 0


@dataclass(frozen=True)
class Workspace:
    """A global buffer the prim_func allocates itself (``T.alloc_global``): the library allocates it per call."""

    name: str
    dtype: str
    cpp: str  # the launcher's identifier for its data pointer (w_<name>)
    factors: tuple[str, ...] = ()  # C++ expressions whose product is the element count
    elem_bits: int = 8
    shape: tuple[str, ...] = ()  # the same size as TileLang prints it, for ``inspect``


@dataclass(frozen=True)
class KernelArg:
    """One argument of a device kernel: its C++ type and the C++ expression that computes it."""

    name: str
    ctype: str  # "void*", "int32_t", "float", ... or "CUtensorMap" (then ``value`` is a descriptor index)
    value: str


@dataclass(frozen=True)
class L2Window:
    """An L2 persisting-access window set on the stream around a kernel launch."""

    tensor: str
    hit_ratio: float
    num_bytes: str


@dataclass(frozen=True)
class DeviceKernel:
    """One ``__global__`` launch of the entry, in launch order."""

    name: str
    args: tuple[KernelArg, ...] = ()
    grid: tuple[str, ...] = ("1", "1", "1")  # C++ expressions
    block: tuple[str, ...] = ("1", "1", "1")
    dynamic_smem: str = "0"
    cluster_dims: tuple[int, ...] = ()  # () or (x, y, z)
    cooperative: bool = False
    pdl: bool = False
    l2_windows: tuple[L2Window, ...] = ()
    grid_display: tuple[str, ...] = ()  # the same expressions as TileLang prints them, for ``inspect``
    block_display: tuple[str, ...] = ()


@dataclass(frozen=True)
class ArchVariant:
    """What one target arch needs: its kernels, descriptors and compiled image."""

    arch: Arch  # sm_90a, or sm_80+PTX: a fatbin with a PTX fallback (JSON: "arch": "sm_80", "ptx": true)
    kernels: tuple[DeviceKernel, ...] = ()
    tma_descriptors: tuple[TmaDescriptor, ...] = ()
    image_bytes: int = 0
    image_kind: str = "cubin"  # cubin, or fatbin when a PTX fallback rides along
    workspaces: tuple[Workspace, ...] = ()
    device: str = ""  # the GPU profile device queries were answered from while lowering (tl_aot.gpu.device)
    config: tuple[NamedRepr, ...] = ()  # (name, python repr) of the autotune config built, if the function is @autotune'd
    config_source: str = ""  # where the config came from: "explicit", "record", "default"
    pass_configs: tuple[tuple[str, Any], ...] = ()  # (key, JSON value) pairs: the pass configs lowered with
    compile_flags: tuple[str, ...] = ()  # the kernel's compile_flags, in order
    nvcc_options: tuple[str, ...] = ()  # the nvcc flags the image was compiled with (from the two above)
    func_hash: str = ""  # structural hash of the prim_func built (what TileLang's JIT would compile)
    resolved: str = ""  # how the kernel was reached from the entry's function
    request_key: str = ""  # the identity of the JIT compile request this image answers (tl_aot.jit.request_key.request_key)
    request: str = ""  # that request as JSON: prim_func name and options (portable flags), for ``verify``
    backend: str = "cuda"  # TileLang's code generator: "cuda" (CUDA C++, nvcc) or "cutedsl" (CuTeDSL; kernels found by pattern)
    cuda_version: str = ""  # the CUDA release of the compiler that made the image ("13.0.88"; "" for CuTeDSL's own)
    min_driver_cuda: str = ""  # the oldest driver that loads this image, as a CUDA version (tl_aot.gpu.cuda_compat)
    device_code: str = ""  # digest of the CUDA source TileLang generated, before tl_aot's edits (tl_aot.capture.device_code)


@dataclass(frozen=True)
class LoweredEntry:
    """One exported function of the library and everything needed to launch it on every arch."""

    name: str
    source: str
    function: str
    args: tuple[NamedRepr, ...] = ()  # (name, python repr) pairs of the specialization arguments
    params: tuple[Param, ...] = ()
    symbols: tuple[Symbol, ...] = ()
    variants: tuple[ArchVariant, ...] = ()
    export: str = ""  # the exported function this is a specialisation of ("": exported as ``name``)
    when: tuple[tuple[str, int, int], ...] = ()  # (symbol, lo, hi): the dynamic dims this specialisation covers
    fallback: bool = False  # picked only when no other specialisation of its export matches
    capture_key: str = ""  # a captured kernel's request key (tl_aot.jit.request_key.request_key): what serving matches
    capture_name: str = ""  # the captured prim_func's name
    #: the GPU models (as the driver names them) a captured kernel was recorded on: a workload may pick its kernels by
    #: model (an H200-only kernel), so serving names them when a GPU of another model asks for a kernel no library holds
    captured_on: tuple[str, ...] = ()

    @property
    def exported(self) -> str:
        """The name the library exports this under (several specialisations share one)."""
        return self.export or self.name

    @property
    def inputs(self) -> tuple[Param, ...]:
        """The parameters a call passes when the entry returns its outputs."""
        return tuple(p for p in self.params if not p.output)

    @property
    def outputs(self) -> tuple[Param, ...]:
        """The tensors the entry allocates and returns (in parameter order); empty for in-place entries."""
        return tuple(p for p in self.params if p.output)

    def when_spelled(self) -> str:
        """``m in [1, 64], n = 128``: the dynamic dims this specialisation covers ('' for all)."""
        return ", ".join(f"{s} in [{lo}, {hi}]" if lo != hi else f"{s} = {lo}" for s, lo, hi in self.when)

    def signature(self) -> str:
        """``gemm(A: float16[m, K], B: float16[K, N]) -> C: float16[m, N]``: what users see in errors and inspect."""
        ret = ", ".join(p.spelled() for p in self.outputs)
        if len(self.outputs) > 1:
            ret = f"({ret})"
        when = f" when {self.when_spelled()}" if self.when else (" (fallback)" if self.fallback else "")
        return f"{self.exported}({', '.join(p.spelled() for p in self.inputs)})" + (f" -> {ret}" if ret else "") + when


@dataclass(frozen=True)
class Tuning:
    """A run-time autotuning a captured run did, shipped so serving answers TileLang's autotuner (:mod:`tl_aot.tune.runtime_choice`)."""

    key: str  # the tuning key: function, source, closure, arguments, candidate configs, options, compute capability
    function: str  # module.qualname of the tuned function
    args: str = ""  # the arguments it was tuned for, spelled (for messages)
    config: str = ""  # the chosen config, spelled as JSON
    index: int = -1  # its index among the candidate configs
    candidates: int = 0
    request_key: str = ""  # the request key of the chosen kernel: an entry of this library
    cc: str = ""  # the compute capability it was tuned on
    device: str = ""  # the GPU's name
    latency_ms: float = 0.0  # what the tuner measured for the chosen config


@dataclass(frozen=True)
class Call:
    """A ``@tilelang.jit`` call a captured run made, and the request it led to: serving answers it without tracing.

    See :mod:`tl_aot.call_keys.key`.
    """

    key: str  # the call key: function, source, closure and globals it reads, arguments, jit options, compute capability
    request_key: str  # the request key of the kernel it compiled: an entry of this library


@dataclass(frozen=True)
class LeftOut:
    """A variant a ``--keep-going`` build left out: which, why (the first line of its error) and where it came from."""

    entry: str
    arch: str
    error: str
    origin: str = ""  # a captured kernel's origin (jit function and arguments, or file:line), else source:function

    def spelled(self) -> str:
        """``gemm_0a1b (sm_90a): ValueError: ... [from ops.gemm(M=128) at run.py:12]``."""
        return f"{self.entry} ({self.arch}): {self.error}" + (f"  [from {self.origin}]" if self.origin else "")


@dataclass(frozen=True)
class Manifest:
    """Everything a library says about itself; embedded as JSON and checked by :func:`tl_aot.load`."""

    abi_version: int
    library: str
    entries: tuple[LoweredEntry, ...] = ()
    tl_aot_version: str = ""
    tilelang_version: str = ""
    nvcc_version: str = ""
    build_flags: tuple[str, ...] = field(default=())
    tunings: tuple[Tuning, ...] = ()  # the autotuner's choices recorded with the captured kernels this library holds
    compiler: str = ""  # which compiler made the images and where it came from (tl_aot.cuda.toolchain.compiler_description)
    driver_min_cuda: str = ""  # the oldest driver that loads the library, as the CUDA version it supports ("12.0")
    driver_min_version: str = ""  # the same as a Linux driver version ("525.60.13"; "" if not in tl_aot's table)
    left_out: tuple[LeftOut, ...] = ()  # variants a --keep-going build could not build
    calls: tuple[Call, ...] = ()  # @tilelang.jit calls recorded with the captured kernels this library holds

    def entry(self, name: str) -> LoweredEntry:
        """The entry ``name``; for a specialised export, its first specialisation."""
        for e in self.entries:
            if e.name == name:
                return e
        for e in self.entries:
            if e.export == name:
                return e
        raise KeyError(name)

    def exports(self) -> dict[str, tuple[LoweredEntry, ...]]:
        """Exported name → its specialisations (one entry for an unspecialised export), in library order."""
        out: dict[str, list[LoweredEntry]] = {}
        for e in self.entries:
            out.setdefault(e.exported, []).append(e)
        return {k: tuple(v) for k, v in out.items()}


@dataclass(frozen=True)
class LoweredVariant:
    """What lowering one entry for one arch yields (cached between builds): metadata and CUDA source."""

    entry: str
    arch: Arch  # what it was lowered for; ``arch.ptx``: the image is a fatbin with a PTX fallback
    params: tuple[Param, ...] = ()
    symbols: tuple[Symbol, ...] = ()
    kernels: tuple[DeviceKernel, ...] = ()
    tma_descriptors: tuple[TmaDescriptor, ...] = ()
    cuda_source: str = ""  # what the image is compiled from: CUDA C++, or for "cutedsl" the generated CuTeDSL module
    nvcc_options: tuple[str, ...] = ()
    deps: tuple[str, ...] = ()  # local .py files the kernel imported
    workspaces: tuple[Workspace, ...] = ()
    device: str = ""
    config: tuple[NamedRepr, ...] = ()
    config_source: str = ""
    pass_configs: tuple[tuple[str, Any], ...] = ()  # (key, JSON value): the TileLang pass configs lowered with, as the JIT would use them
    compile_flags: tuple[str, ...] = ()  # the kernel's compile_flags (decorator, prim_func, spec), in order
    func_hash: str = ""  # TileLang's structural hash of the prim_func lowered (tl_aot.jit.resolve.func_hash)
    resolved: str = ""  # how the prim_func was reached, e.g. "make_gemm(M=1024) -> kernel(block_m=128)"
    walk: str = ""  # a kernel file's: the digest of tl_aot's walk that reached it and spelled ``resolved`` (tl_aot.jit.walk_digest)
    request_key: str = ""  # the identity of the JIT compile request this image answers (tl_aot.jit.request_key.request_key)
    request: str = ""  # that request as JSON: prim_func name and options (portable flags)
    inputs: tuple[tuple[str, str], ...] = ()  # (path, sha256) of headers the nvcc flags name: a changed one makes the cached image stale
    backend: str = "cuda"  # "cuda" or "cutedsl": which of TileLang's code generators produced ``cuda_source``
    device_code: str = ""  # digest of TileLang's CUDA source before tl_aot's edits (tl_aot.capture.device_code.digest)
