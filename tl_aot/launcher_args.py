"""What the launcher does with a call's arguments, as typed pieces: the checks of ``check()``, the reads of ``invoke()``.

Each tensor's dtype, rank, dims (constants, symbols bound and compared, expressions checked once
every symbol is bound), strides and alignment; how each dynamic symbol is bound; the two call forms
(every parameter, or the inputs alone with the outputs returned) with their C++ parameter lists and
range-checked scalar reads. Built from the metadata for :mod:`tl_aot.launcher_context`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .cpp_spelling import DLPACK_DTYPES, c_string_body
from .errors import LoweringError
from .metadata import LoweredEntry, Param, Symbol
from .spec import cpp_name

__all__ = [
    "ArgRead",
    "CallForm",
    "DimCheck",
    "LateCheck",
    "Returns",
    "Scalar",
    "StrideCheck",
    "SymbolBind",
    "TensorCheck",
    "call_form",
    "form_decided_at",
    "header_names",
    "returns_of",
    "scalar_ctype",
    "symbol_bind",
    "tensor_checks",
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
_FLOAT_CTYPES = {"float32": "float", "float64": "double"}
_TENSOR_CTYPE = "::tvm::ffi::TensorView"
_TENSOR = "::tvm::ffi::Tensor"


@dataclass(frozen=True)
class DimCheck:
    """One dim of a tensor in ``check()``: it binds a symbol (its first appearance), or must equal ``value``."""

    dim: int
    bind: str = ""  # the symbol this dim binds (s_<bind> = t->shape[dim]); "" for a comparison
    value: str = ""  # C++ value the dim must equal
    display: str = ""  # the expected shape, for the error (a C string body)
    source: str = ""  # where a symbol compared with was bound, for the error; "" when ``value`` is a constant


@dataclass(frozen=True)
class StrideCheck:
    """A non-dense tensor's stride the kernel assumes (a dim of extent 1 may have any stride)."""

    dim: int
    value: str


@dataclass(frozen=True)
class LateCheck:
    """A dim given by an expression over symbols: checked once every symbol is bound."""

    param: str
    dim: int
    value: str
    display: str


@dataclass(frozen=True)
class TensorCheck:
    """How ``check()`` validates one tensor (dtype, rank, dims, strides, alignment) and allocates an output."""

    name: str
    ndim: int
    dtype: str
    dtype_check: str  # C++ condition on ``t`` accepting the DLPack dtypes of ``dtype``
    dl_dtype: str  # DLDataType of an allocated output
    shape_cpp: tuple  # the dims in C++ (an allocated output's shape); ("1",) for a 0-d tensor
    shape_display: str
    dim_checks: tuple  # DimCheck, except dims solved from a symbol (their symbol's check covers them)
    stride_checks: tuple  # StrideCheck; empty for a dense tensor
    strides_display: str
    alignment: int  # bytes the data pointer must be aligned to; 0: none
    takes_device: bool = False  # the first output of an entry with no input tensor: the call's device is its


@dataclass(frozen=True)
class SymbolBind:
    """How ``check()`` binds one dynamic symbol: a dim read directly, or solved from one and checked exact."""

    name: str
    param: str
    dim: int
    max: str  # C++ upper bound of its type
    derived: bool = False
    derive: str = ""  # the C++ solution over the dim (derived only)
    check: str = ""  # the dim recomputed from the solution, which must equal the tensor's (derived only)
    display: str = ""  # the expected shape, for the error (derived only)


@dataclass(frozen=True)
class Scalar:
    """A scalar parameter as ``Args`` holds it."""

    name: str
    ctype: str


def _dtype_check(dtype: str, where: str, entry: str) -> str:
    """The C++ test on ``t`` that its DLPack dtype is one ``dtype`` accepts (bool and float8 have two spellings)."""
    pairs = DLPACK_DTYPES.get(dtype)
    if pairs is None:
        msg = f"{where}: tensor dtype {dtype} has no DLPack equivalent tl_aot can check"
        raise LoweringError(msg, entry=entry)
    alts = " || ".join(f"(t->dtype.code == {c} && t->dtype.bits == {b})" for c, b in pairs)
    return f"({alts}) && t->dtype.lanes == 1"


def _shape_text(p: Param) -> str:
    """``[m, 4096]``: a tensor's shape as errors show it."""
    return "[" + ", ".join(str(d) for d in p.shape) + "]"


def tensor_checks(e: LoweredEntry, tensors: list, where: str) -> tuple[tuple, list]:
    """Each tensor's checks, and the dim checks that must wait for every symbol (expressions over them)."""
    symbols = {s.name for s in e.symbols if not s.derived}  # derived ones are solved after the tensors' checks
    solved_from = {(s.param, s.dim) for s in e.symbols if s.derived}  # dims their own check covers
    bound: dict[str, tuple[str, int]] = {}
    late: list = []
    device_from = tensors[0] if tensors[0].output else None  # no input tensor: the first output names the device
    out = []
    for p in tensors:
        shape = _shape_text(p)
        checks = [
            c
            for i, (d, cpp) in enumerate(zip(p.shape, p.shape_cpp))
            if (p.name, i) not in solved_from and (c := _dim_check(p, i, d, cpp, shape, symbols, bound, late)) is not None
        ]
        code, bits = DLPACK_DTYPES[p.dtype][0] if p.dtype in DLPACK_DTYPES else (0, 0)
        out.append(
            TensorCheck(
                name=p.name,
                ndim=len(p.shape),
                dtype=p.dtype,
                dtype_check=_dtype_check(p.dtype, f"{where}: parameter {p.name!r}", e.name),
                dl_dtype=f"DLDataType{{{code}, {bits}, 1}}",
                shape_cpp=tuple(p.shape_cpp) or ("1",),
                shape_display=c_string_body(shape),
                dim_checks=tuple(checks),
                stride_checks=tuple(StrideCheck(i, cpp) for i, cpp in enumerate(p.strides_cpp)) if p.strides else (),
                strides_display=c_string_body("(" + ", ".join(str(s) for s in p.strides) + ")"),
                alignment=p.alignment if p.alignment > 1 and (p.alignment & (p.alignment - 1)) == 0 else 0,
                takes_device=p is device_from,
            )
        )
    return tuple(out), late


def _dim_check(p: Param, i: int, d, cpp: str, shape: str, symbols: set, bound: dict, late: list) -> DimCheck | None:
    """One dim's check: a constant, the binding of a symbol, a symbol bound earlier, or (into ``late``) an expression."""
    if isinstance(d, int):
        return DimCheck(dim=i, value=str(d), display=c_string_body(f"{shape} with dim {i} = {d}"))
    if d in symbols and d not in bound:
        bound[d] = (p.name, i)
        return DimCheck(dim=i, bind=d)
    display = c_string_body(f"{shape} with dim {i} = {d} = ")
    if d in symbols:
        src = bound[d]
        return DimCheck(dim=i, value=f"s_{d}", display=display, source=c_string_body(f" (from '{src[0]}' dim {src[1]})"))
    late.append((p.output, LateCheck(p.name, i, cpp, display)))
    return None


def symbol_bind(s: Symbol, e: LoweredEntry) -> SymbolBind:
    """How the launcher binds one symbol: a dim read in the tensor's check, or solved from one and checked."""
    imax = "2147483647" if s.dtype == "int32" else "INT64_MAX"
    if not s.derived:
        return SymbolBind(s.name, s.param, s.dim, imax)
    p = next(q for q in e.params if q.name == s.param)
    shown = "2147483647" if s.dtype == "int32" else str(2**63 - 1)
    display = c_string_body(f"{_shape_text(p)} with dim {s.dim} = {p.shape[s.dim]} for an integer {s.name} in [1, {shown}]")
    return SymbolBind(s.name, s.param, s.dim, imax, derived=True, derive=s.cpp, check=p.shape_cpp[s.dim], display=display)


# --- Reading the arguments: the two call forms ----------------------------------------------


@dataclass(frozen=True)
class ArgRead:
    """How ``invoke()`` reads one TVM FFI argument into ``Args``: a tensor, or a scalar through its range-checked getter."""

    name: str
    index: int  # position in the call
    tensor: bool
    ctype: str = ""
    getter: str = ""  # a scalar's C++ read of a[index]


@dataclass(frozen=True)
class CallForm:
    """One way to call an entry: with every parameter (outputs written in place), or with the inputs alone."""

    count: int  # arguments of this form (a stream may follow)
    names: str  # the parameters, as an argument-count error lists them
    reads: tuple  # ArgRead, by position (the TVM FFI call)
    tensors: tuple  # names of its tensor parameters, wrapped as DLTensor by the C++ API
    assigns: tuple  # C++ assignments filling Args from the C++ API's u_<name> parameters
    declared: tuple  # C++ parameters as the header declares them (the user's names; C++ keywords get '_')
    defined: tuple  # the same as the launcher defines them (u_<name>: no user name meets a generated one)
    stream: str  # the header's name for a stream parameter that follows (clashes with no parameter)

    @property
    def count_with_stream(self) -> int:
        """Arguments of this form followed by a stream."""
        return self.count + 1

    @property
    def internal(self) -> str:
        """Parameters of the launcher's internal call/alloc function: these, then the stream."""
        return ", ".join([*self.defined, "bool has_stream", "void* stream"])


def scalar_ctype(p: Param, entry: str) -> str:
    """The C++ type of a scalar parameter; tl_aot launchers take integers, float32/64 and bool."""
    if p.dtype in _INT_RANGES:
        return f"{p.dtype}_t"
    if p.dtype in _FLOAT_CTYPES:
        return _FLOAT_CTYPES[p.dtype]
    if p.dtype == "bool":
        return "bool"
    msg = f"entry {entry!r}: scalar parameter {p.name!r} has dtype {p.dtype}, which tl_aot launchers do not support"
    raise LoweringError(msg, entry=entry)


def _scalar_getter(p: Param, arg: str, kname: str) -> str:
    """The C++ read of scalar ``p`` from ``arg`` (an AnyView): its range or kind checked, errors naming the entry."""
    if p.dtype in _INT_RANGES:
        lo, hi = _INT_RANGES[p.dtype]
        lo_s = "INT64_MIN" if lo == -(2**63) else f"int64_t({lo})"
        return f'rt::int_arg({arg}, {kname}, "{p.name}", {lo_s}, int64_t({hi}), "{p.dtype}")'
    if p.dtype in _FLOAT_CTYPES:
        return f'rt::float_arg({arg}, {kname}, "{p.name}", "{p.dtype}")'
    return f'rt::bool_arg({arg}, {kname}, "{p.name}")'


def call_form(e: LoweredEntry, params: list, shown: dict, ns: str) -> CallForm:
    """The call form taking ``params`` (in order); ``shown`` maps each to its name in the header."""
    reads = []
    for i, p in enumerate(params):
        if p.is_tensor:
            reads.append(ArgRead(p.name, i, True))
        else:
            ctype = scalar_ctype(p, e.name)
            reads.append(ArgRead(p.name, i, False, ctype, _scalar_getter(p, f"a[{i}]", f"{ns}::kName")))
    ctypes = [_TENSOR_CTYPE if p.is_tensor else scalar_ctype(p, e.name) for p in params]
    return CallForm(
        count=len(params),
        names=", ".join(p.name for p in params),
        reads=tuple(reads),
        tensors=tuple(p.name for p in params if p.is_tensor),
        assigns=tuple(f"x.t_{p.name} = &dl_{p.name}" if p.is_tensor else f"x.a_{p.name} = u_{p.name}" for p in params),
        declared=tuple(f"{t} {shown[p.name]}" for t, p in zip(ctypes, params)),
        defined=tuple(f"{t} u_{p.name}" for t, p in zip(ctypes, params)),
        stream=cpp_name("stream", {shown[p.name] for p in params}),
    )


def header_names(e: LoweredEntry) -> dict:
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
    """What a call passing the inputs alone returns: one output tensor, or a tuple of them."""

    type: str  # the C++ API's return type
    several: bool
    moved: str  # the outputs moved out of Args, comma separated
    ffi_value: str  # what the TVM FFI call returns (an Array named ``outs`` holds several)
    cpp_value: str  # what the C++ API returns


def returns_of(outputs: tuple) -> Returns:
    """What returning ``outputs`` (an entry's, one or several) is spelled as; unused for an entry without outputs."""
    moved = ", ".join(f"std::move(x.o_{p.name})" for p in outputs)
    if len(outputs) == 1:
        return Returns(_TENSOR, False, moved, moved, moved)
    tuple_type = f"std::tuple<{', '.join([_TENSOR] * len(outputs))}>"
    return Returns(tuple_type, True, moved, "std::move(outs)", f"{tuple_type}({moved})")
