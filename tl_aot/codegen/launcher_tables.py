"""An entry's argument checks as constexpr tables, read by one checker in the runtime (``rt::check_args``).

The launcher runtime (``tl_aot/include/tl_aot/launcher_runtime.h``) checks every call from data:
each tensor's rank, dtype, dims (constants, symbols bound and compared, expressions checked once
every symbol is bound), strides and alignment, each dynamic symbol's range, and the shape of each
output it allocates. Here those tables are built from an entry's metadata, every row already spelled
as C++ (``{rt::kEqual, {rt::kConst, 256}, "[m, 256] with dim 1 = 256", ""}``), for
``launcher.cc.j2`` to write out. A value the checker cannot hold as a constant or a symbol is an
expression of the entry's ``eval(x, i)``, evaluated only when the checker reaches it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..common.cpp_spelling import DLPACK_DTYPES, c_string_body
from ..common.errors import LoweringError
from ..common.metadata import LoweredEntry, Param
from ..common.subbyte import storage_dim

__all__ = ["CheckTables", "Table", "check_tables", "frame_reads"]

_INT_LITERAL = re.compile(r"-?\d+")
_TENSOR_REF = re.compile(r"\bx\.t_(\w+)")
_SKIP = '{rt::kSkip, {rt::kConst, 0}, "", ""}'  # a dim checked elsewhere (late, or by its derived symbol)


@dataclass(frozen=True)
class Table:
    """One constexpr array of the entry: its element type (in ``rt::``), name and rows (C++ initialisers)."""

    type: str
    name: str
    rows: tuple[str, ...]  # C++ initialisers


@dataclass(frozen=True)
class CheckTables:
    """What ``launcher.cc.j2`` writes for one entry's checks: the tables, ``eval`` and the ``rt::Checks`` fields."""

    tables: tuple[Table, ...]  # values, dims, tensors, symbols, late
    eval_locals: tuple[str, ...]  # C++ declarations eval() starts with (the symbols and scalars its expressions use)
    exprs: tuple[str, ...]  # C++ expressions, case i of eval()
    num_tensors: int
    num_inputs: int
    num_symbols: int
    num_scalars: int
    num_late_inputs: int
    num_late: int


class _Values:
    """The entry's values as ``rt::Value`` initialisers: constants, symbol slots, or expressions of ``eval``."""

    def __init__(self, symbols: dict[str, int], tensors: dict[str, int]):
        self.symbols = symbols  # symbol name -> slot
        self.tensors = tensors  # tensor name -> index in Frame::t
        self.exprs: list = []

    def expr(self, cpp: str) -> int:
        """The index of expression ``cpp`` in eval() (its tensor references read Frame::t)."""
        cpp = _TENSOR_REF.sub(lambda m: f"x.t[{self.tensors[m.group(1)]}]", cpp)
        if cpp not in self.exprs:
            self.exprs.append(cpp)
        return self.exprs.index(cpp)

    def of(self, cpp: str) -> str:
        """``cpp`` as an ``rt::Value``."""
        cpp = str(cpp)
        if _INT_LITERAL.fullmatch(cpp):
            return f"{{rt::kConst, {cpp}}}"
        if cpp.startswith("s_") and cpp[2:] in self.symbols:
            return f"{{rt::kSymbol, {self.symbols[cpp[2:]]}}}"
        return f"{{rt::kExpr, {self.expr(cpp)}}}"


def _shape_text(p: Param) -> str:
    """``[m, 4096]``, ``[256] (packed in int8[128])``: a tensor's shape as errors show it."""
    return "[" + ", ".join(str(d) for d in p.shape) + "]" + (f" (packed in {p.storage})" if p.storage else "")


def _dtype_text(p: Param) -> str:
    """``float16``; for a packed sub-byte tensor what the caller passes: ``int4 packed 2 per 8-bit element (torch.int8)``."""
    k = p.packing
    if k is None:
        return p.dtype
    like = f" (as TileLang's JIT takes it: torch.{k.storage})" if k.storage else ""
    return f"{p.dtype} packed {k.pack} per {k.storage_bits}-bit element{like}"


def _storage_cpp(cpp: str, pack: int) -> str:
    """A logical last dim or stride (C++) as the packed storage counts it: ``256`` -> ``128``, ``s_n`` -> ``(s_n) / 2``."""
    if pack == 1:
        return cpp
    return str(int(cpp) // pack) if _INT_LITERAL.fullmatch(cpp) else f"({cpp}) / {pack}"


def _dtypes(p: Param, where: str, entry: str) -> str:
    """The DLPack spellings ``p``'s dtype accepts, as the ``dtypes, num_dtypes`` fields of ``rt::TensorSpec``."""
    if p.packing is not None:
        return "{}, 0"  # any dtype of the storage's bits: ``packed_bits``
    pairs = DLPACK_DTYPES.get(p.dtype)
    if pairs is None:
        msg = f"{where}: parameter {p.name!r}: tensor dtype {p.dtype} has no DLPack equivalent tl_aot can check"
        raise LoweringError(msg, entry=entry)
    return "{" + ", ".join(f"{{{c}, {b}}}" for c, b in pairs) + f"}}, {len(pairs)}"


def _dim_row(
    p: Param,
    i: int,
    d,
    cpp: str,
    shape: str,
    values: _Values,
    free: set[str],
    bound: dict[str, tuple[str, int]],
    late: list[tuple[bool, str]],
) -> str:
    """One dim's ``rt::Dim``: the binding of a free symbol, or a value it must equal; an expression waits (``late``)."""
    if isinstance(d, int):
        return f'{{rt::kEqual, {{rt::kConst, {d}}}, "{c_string_body(f"{shape} with dim {i} = {d}")}", ""}}'
    if d in free and d not in bound:
        bound[d] = (p.name, i)
        return f'{{rt::kBind, {{rt::kSymbol, {values.symbols[d]}}}, "", ""}}'
    expected = c_string_body(f"{shape} with dim {i} = {d} = ")
    if d in free:
        source = c_string_body(f" (from '{bound[d][0]}' dim {bound[d][1]})")
        return f'{{rt::kEqual, {{rt::kSymbol, {values.symbols[d]}}}, "{expected}", "{source}"}}'
    late.append((p.output, f'{{{values.tensors[p.name]}, {i}, {values.of(cpp)}, "{expected}"}}'))
    return _SKIP


def _tensor_rows(
    e: LoweredEntry, tensors: list[Param], values: _Values, where: str
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], list[tuple[bool, str]]]:
    """The ``rt::TensorSpec`` rows, the ``rt::Dim`` and ``rt::Value`` rows they point into, and the late checks."""
    free = {s.name for s in e.symbols if not s.derived}  # derived symbols are solved after the tensors' checks
    solved_from = {(s.param, s.dim) for s in e.symbols if s.derived}
    bound: dict[str, tuple[str, int]] = {}  # symbol -> (tensor, dim) that binds it
    late: list[tuple[bool, str]] = []  # (an output's?, its rt::Late row)
    dims: list[str] = []
    flat: list[str] = []  # rt::Value rows: strides and allocated shapes
    rows = []
    for p in tensors:
        shape = _shape_text(p)
        first_dim = len(dims)
        for i, (d, cpp) in enumerate(zip(p.shape, p.shape_cpp)):
            solved = (p.name, i) in solved_from  # its derived symbol's own check covers it
            dims.append(_SKIP if solved else _dim_row(p, i, d, cpp, shape, values, free, bound, late))
        strides = "nullptr"
        if p.strides and len(p.strides_cpp) != len(p.shape):  # the checker reads one stride per dim
            msg = f"{where}: parameter {p.name!r} has {len(p.strides_cpp)} strides for {len(p.shape)} dims"
            raise LoweringError(msg, entry=e.name)
        if p.strides:
            strides = f"values + {len(flat)}"
            flat += [values.of(c) for c in p.strides_cpp]
        k = p.packing
        pack = k.pack if k is not None else 1
        alloc, alloc_ndim = "nullptr", 0
        if p.output:  # a packed output is allocated as its storage, as TileLang's JIT allocates it
            alloc_shape = tuple(p.shape_cpp) or ("1",)
            alloc_shape = (*alloc_shape[:-1], _storage_cpp(str(alloc_shape[-1]), pack))
            alloc, alloc_ndim = f"values + {len(flat)}", len(alloc_shape)
            flat += [values.of(c) for c in alloc_shape]
        code, bits = DLPACK_DTYPES.get(p.dtype, [(0, 0)])[0]
        lanes = 1
        if k is not None:
            code, bits, lanes = k.storage_dlpack
        alignment = p.alignment if p.alignment > 1 and (p.alignment & (p.alignment - 1)) == 0 else 0
        shown = [s if i == len(p.strides) - 1 else storage_dim(s, pack) for i, s in enumerate(p.strides)]  # as the caller's
        strides_shown = c_string_body("(" + ", ".join(str(s) for s in shown) + ")")
        packed = f", {k.storage_bits}, {k.pack}" if k is not None else ""
        rows.append(
            f'{{"{p.name}", {len(p.shape)}, "{c_string_body(shape)}", "{c_string_body(_dtype_text(p))}", {_dtypes(p, where, e.name)}, '
            f'dims + {first_dim}, {strides}, "{strides_shown}", {alignment}, {{{code}, {bits}, {lanes}}}, {alloc}, {alloc_ndim}{packed}}}'
        )
    return tuple(rows), tuple(dims), tuple(flat), late


def _symbol_row(s, e: LoweredEntry, values: _Values) -> str:
    """One ``rt::SymbolSpec``: bound by a dim and range-checked, or solved from one and checked exact."""
    imax, shown = ("2147483647", "2147483647") if s.dtype == "int32" else ("INT64_MAX", str(2**63 - 1))
    t = values.tensors[s.param]
    if not s.derived:
        return f'{{"{s.name}", {t}, {s.dim}, {imax}, -1, {{rt::kConst, 0}}, ""}}'
    p = next(q for q in e.params if q.name == s.param)
    expected = c_string_body(f"{_shape_text(p)} with dim {s.dim} = {p.shape[s.dim]} for an integer {s.name} in [1, {shown}]")
    return f'{{"{s.name}", {t}, {s.dim}, {imax}, {values.expr(s.cpp)}, {values.of(p.shape_cpp[s.dim])}, "{expected}"}}'


def frame_reads(e: LoweredEntry, tensors: list[Param]) -> tuple[dict[str, int], dict[str, int]]:
    """Where each value lives in the call's ``rt::Frame``: tensor name -> index of ``t``/``p``, scalar name -> index of ``a``."""
    return {p.name: i for i, p in enumerate(tensors)}, {p.name: i for i, p in enumerate(q for q in e.params if not q.is_tensor)}


def _eval_locals(exprs: list[str], e: LoweredEntry, scalar_reads: dict[str, str]) -> tuple[str, ...]:
    """The declarations of the symbols and scalars eval()'s expressions use (spelled as the metadata spells them)."""
    text = " ".join(exprs)
    out = [f"const int64_t s_{s.name} = x.s[{i}]" for i, s in enumerate(e.symbols) if re.search(rf"\bs_{s.name}\b", text)]
    out += [read for name, read in scalar_reads.items() if re.search(rf"\ba_{name}\b", text)]
    return tuple(out)


def check_tables(e: LoweredEntry, tensors: list[Param], scalar_reads: dict[str, str], where: str) -> CheckTables:
    """The tables of entry ``e`` whose tensors are ``tensors`` (inputs first); ``scalar_reads``: name -> its local."""
    t_index, _ = frame_reads(e, tensors)
    values = _Values({s.name: i for i, s in enumerate(e.symbols)}, t_index)
    rows, dims, flat, late = _tensor_rows(e, tensors, values, where)
    symbols = tuple(_symbol_row(s, e, values) for s in e.symbols)
    late_rows = tuple(r for output, r in late if not output) + tuple(r for output, r in late if output)
    n_inputs = sum(1 for p in tensors if not p.output)
    return CheckTables(
        tables=(
            Table("Value", "values", flat),
            Table("Dim", "dims", dims),
            Table("TensorSpec", "tensors", rows),
            Table("SymbolSpec", "symbols", symbols),
            Table("LateCheck", "late", late_rows),
        ),
        eval_locals=_eval_locals(values.exprs, e, scalar_reads),
        exprs=tuple(values.exprs),
        num_tensors=len(tensors),
        num_inputs=n_inputs,
        num_symbols=len(e.symbols),
        num_scalars=sum(1 for p in e.params if not p.is_tensor),
        num_late_inputs=sum(1 for output, _ in late if not output),
        num_late=len(late),
    )
