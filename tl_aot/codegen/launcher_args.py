"""How the launcher reads a call's arguments into its ``rt::Frame``: the two call forms, scalar values, returns.

The two call forms (every parameter, or the inputs alone with the outputs returned) with their C++
parameter lists, their ``rt::ArgRead`` rows (range-checked scalar reads, read by the runtime's
``rt::invoke``) and the C++ API's assignments; how a scalar is read back as its C++ type. Built
from the metadata for :mod:`tl_aot.codegen.launcher_context`; the checks are :mod:`tl_aot.codegen.launcher_tables`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..common.errors import LoweringError
from ..common.metadata import LoweredEntry, Param
from ..config.spec_names import cpp_name

__all__ = [
    "CallForm",
    "Returns",
    "call_form",
    "form_decided_at",
    "header_names",
    "returns_of",
    "scalar_ctype",
    "scalar_local",
]

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**63 - 1),
}
_FLOAT_CTYPES = {"float16": "rt::f16", "float32": "float", "float64": "double"}
#: The C++ API's type of a float scalar whose kernel type is no C++ arithmetic type: the call's double,
#: converted by the launcher as a TVM FFI call's is (``rt::f16``: round to nearest, ties to even).
_API_CTYPES = {"float16": "double"}
_TENSOR_CTYPE = "::tvm::ffi::TensorView"
_TENSOR = "::tvm::ffi::Tensor"


# --- Reading the arguments: the two call forms ----------------------------------------------


@dataclass(frozen=True)
class CallForm:
    """One way to call an entry: with every parameter (outputs written in place), or with the inputs alone."""

    count: int  # arguments of this form (a stream may follow)
    names: str  # the parameters, as an argument-count error lists them
    reads: tuple[str, ...]  # rt::ArgRead rows, by position (the TVM FFI call)
    params: tuple[str, ...]  # its parameters' names, in order
    assigns: tuple[str, ...]  # C++ assignments filling Args from the C++ API's u_<name> parameters
    declared: tuple[str, ...]  # C++ parameters as the header declares them (the user's names; C++ keywords get '_')
    defined: tuple[str, ...]  # the same as the launcher defines them (u_<name>: no user name meets a generated one)
    stream: str  # the header's name for a stream parameter that follows (clashes with no parameter)

    @property
    def count_with_stream(self) -> int:
        """Arguments of this form followed by a stream."""
        return self.count + 1

    @property
    def internal(self) -> str:
        """Parameters of the launcher's internal call/alloc function: these (tensors by reference), then the stream."""
        byref = (f"const {d.replace(' u_', '& u_', 1)}" if d.startswith(_TENSOR_CTYPE + " ") else d for d in self.defined)
        return ", ".join([*byref, "bool has_stream", "void* stream"])


def scalar_ctype(p: Param, entry: str) -> str:
    """The C++ type of a scalar parameter as the kernel takes it; tl_aot launchers take integers, float16/32/64 and bool."""
    if p.dtype in _INT_RANGES:
        return f"{p.dtype}_t"
    if p.dtype in _FLOAT_CTYPES:
        return _FLOAT_CTYPES[p.dtype]
    if p.dtype == "bool":
        return "bool"
    msg = f"entry {entry!r}: scalar parameter {p.name!r} has dtype {p.dtype}, which tl_aot launchers do not support"
    raise LoweringError(msg, entry=entry)


def _scalar_field(p: Param) -> str:
    """The ``rt::Scalar`` member holding ``p``: ``f`` for floats, ``i`` for integers and bool."""
    return "f" if p.dtype in _FLOAT_CTYPES else "i"


def scalar_local(p: Param, index: int, entry: str) -> str:
    """``const float a_alpha = static_cast<float>(x.a[0].f)``: scalar ``p`` (``Frame::a[index]``) as its C++ type."""
    ctype = scalar_ctype(p, entry)
    return f"const {ctype} a_{p.name} = static_cast<{ctype}>(x.a[{index}].{_scalar_field(p)})"


def _read_row(p: Param, index: int, entry: str) -> str:
    """The ``rt::ArgRead`` of ``p`` (a tensor into ``Frame::t[index]``, a scalar into ``Frame::a[index]``)."""
    if p.is_tensor:
        return f'{{"{p.name}", rt::kTensorArg, {index}, 0, 0, ""}}'
    scalar_ctype(p, entry)  # refuses what launchers do not take
    if p.dtype in _INT_RANGES:
        lo, hi = _INT_RANGES[p.dtype]
        return f'{{"{p.name}", rt::kIntArg, {index}, {"INT64_MIN" if lo == -(2**63) else lo}, {hi}, "{p.dtype}"}}'
    if p.dtype in _FLOAT_CTYPES:
        return f'{{"{p.name}", rt::kFloatArg, {index}, 0, 0, "{p.dtype}"}}'
    return f'{{"{p.name}", rt::kBoolArg, {index}, 0, 0, ""}}'


def _assign(p: Param, index: int) -> str:
    """The C++ API's copy of its parameter ``u_<name>`` into the frame (a tensor viewed as a DLTensor)."""
    if p.is_tensor:
        return f"x.t[{index}] = rt::view(u_{p.name}, &x.dl[{index}])"
    field = _scalar_field(p)
    return f"x.a[{index}].{field} = static_cast<{'double' if field == 'f' else 'int64_t'}>(u_{p.name})"


def call_form(e: LoweredEntry, params: Sequence[Param], shown: Mapping[str, str], where: Mapping[str, int]) -> CallForm:
    """The call form taking ``params`` (in order); ``shown`` maps each to its name in the header, ``where`` to its frame index."""
    ctypes = [_TENSOR_CTYPE if p.is_tensor else _API_CTYPES.get(p.dtype) or scalar_ctype(p, e.name) for p in params]
    return CallForm(
        count=len(params),
        names=", ".join(p.name for p in params),
        reads=tuple(_read_row(p, where[p.name], e.name) for p in params),
        params=tuple(p.name for p in params),
        assigns=tuple(_assign(p, where[p.name]) for p in params),
        declared=tuple(f"{t} {shown[p.name]}" for t, p in zip(ctypes, params)),
        defined=tuple(f"{t} u_{p.name}" for t, p in zip(ctypes, params)),
        stream=cpp_name("stream", {shown[p.name] for p in params}),
    )


def header_names(e: LoweredEntry) -> dict[str, str]:
    """Parameter -> its name in the header: the user's, with a '_' suffix for C++ keywords and clashes."""
    shown = [cpp_name(p.name) for p in e.params]
    shown = [cpp_name(n, set(shown[:i])) for i, n in enumerate(shown)]
    return {p.name: n for p, n in zip(e.params, shown)}


def form_decided_at(e: LoweredEntry) -> int:
    """Where a call of n_inputs + 1 arguments (inputs + stream, or every parameter) shows its form.

    The first position where one form has a tensor and the other not tells them apart.
    """
    alloc_kinds = [p.is_tensor for p in e.inputs] + [False]
    return next((i for i, p in enumerate(e.params) if i < len(alloc_kinds) and p.is_tensor != alloc_kinds[i]), 0)


@dataclass(frozen=True)
class Returns:
    """What a C++ API call passing the inputs alone returns: one output tensor, or a tuple of them."""

    type: str  # the C++ API's return type
    cpp_value: str  # the outputs moved out of the frame


def returns_of(outputs: Sequence[Param]) -> Returns:
    """What returning ``outputs`` (an entry's, one or several) is spelled as; unused for an entry without outputs."""
    moved = ", ".join(f"std::move(x.o[{i}])" for i in range(len(outputs)))
    if len(outputs) == 1:
        return Returns(_TENSOR, moved)
    tuple_type = f"std::tuple<{', '.join([_TENSOR] * len(outputs))}>"
    return Returns(tuple_type, f"{tuple_type}({moved})")
