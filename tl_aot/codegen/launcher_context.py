"""What the launcher and header templates substitute for a library: typed pieces built from its manifest.

One frozen dataclass per thing the generated C++ spells, each built by a short function: here an
entry, an export (its TVM FFI call, the picker of its specialisations, its C++ API overloads) and
the library; a call's arguments are :mod:`tl_aot.codegen.launcher_args`, an arch's launches
:mod:`tl_aot.codegen.launcher_launch`. Every decision and C++ spelling is made in these modules:
``templates/launcher.cc.j2`` and ``launcher.h.j2`` only substitute, loop, and branch on flags set here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from ..common.cpp_spelling import DLPACK_DTYPES, c_comment, c_string_body, cpp_bool
from ..common.errors import LoweringError
from ..common.metadata import ABI_VERSION, LoweredEntry, Manifest, Param
from ..config.spec_names import cpp_name
from ..gpu.cuda_compat import cuda_int
from . import dispatch
from .launcher_args import CallForm, Returns, call_form, form_decided_at, header_names, returns_of, scalar_local
from .launcher_launch import VariantCode, variant_code
from .launcher_tables import CheckTables, Table, check_tables, frame_reads
from .launcher_units import UnitPlan

__all__ = ["EntryCode", "ExportCode", "LibraryCode", "UnitCode", "entry_code", "library_code", "units_of"]


# --- One entry -------------------------------------------------------------------------------


@dataclass(frozen=True)
class EntryCode:
    """Everything the launcher spells for one entry (one specialisation), inside namespace ``ns``."""

    name: str  # the exported name; several specialisations share it
    ns: str
    label: str  # what errors call it: the entry, and which specialisation (a C string body)
    signature: str  # comment-safe
    source: str
    function: str
    args_display: str
    archs: tuple[str, ...]  # "sm_90a", "sm_80+PTX"
    variants: tuple[VariantCode, ...]
    args_type: str  # its rt::Args<tensors, symbols, scalars, outputs> (the C++ API's frame)
    checks: CheckTables
    tables: tuple[Table, ...]  # the checks' and the argument reads' (rt::ArgRead of both forms)
    locals: tuple[str, ...]  # C++ declarations a launch starts with: its symbols, tensors' data and scalars, by name
    outputs: tuple[Param, ...]  # the outputs (allocated when the call passes the inputs alone)
    allocates: bool  # has outputs: a call has two forms
    tensorless: bool  # no input tensor: the device is the current one when allocating, else the first output's
    every: CallForm  # every parameter
    inputs_only: CallForm  # the inputs alone (the outputs returned)
    forms: tuple[str, ...]  # rt::Form of every parameter and of the inputs alone ({nullptr, 0, ""}: one form), reading `reads`
    decide_at: int  # where the two forms differ (launcher_args.form_decided_at)
    decide_tensor: str  # C++ bool: every-parameter form has a tensor at decide_at
    returns: Returns
    call_fn: str  # the launcher's internal function for the every-parameter form
    alloc_fn: str  # ... and for the inputs-alone form


def _namespace(index: int) -> str:
    """The C++ namespace holding one entry's generated code: by position, so no entry name can clash."""
    return f"entry{index}"


def entry_code(e: LoweredEntry, index: int, label: str = "") -> EntryCode:
    """The launcher's pieces for entry ``e``, the ``index``-th of its library; ``label`` names a specialisation."""
    where = f"entry {e.name!r}"
    tensors = [p for p in e.params if p.is_tensor and not p.output] + [p for p in e.params if p.output]
    if not tensors:
        msg = f"{where}: takes no tensor; tl_aot picks the device from the tensors, so an entry needs at least one"
        raise LoweringError(msg, entry=e.name)
    t_index, a_index = frame_reads(e, tensors)
    scalars = [p for p in e.params if not p.is_tensor]
    scalar_reads = {p.name: scalar_local(p, a_index[p.name], e.name) for p in scalars}
    shown = header_names(e)
    where_in_frame = {**t_index, **a_index}
    at = form_decided_at(e)
    every, inputs_only = call_form(e, list(e.params), shown, where_in_frame), call_form(e, list(e.inputs), shown, where_in_frame)
    checks = check_tables(e, tensors, scalar_reads, where)
    return EntryCode(
        name=e.exported,
        ns=_namespace(index),
        label=c_string_body(label or e.exported),
        signature=c_comment(e.signature()),
        source=c_comment(e.source),
        function=e.function,
        args_display=c_comment(", ".join(f"{k}={v}" for k, v in e.args)),
        archs=tuple(str(v.arch) for v in e.variants),
        variants=tuple(variant_code(e, v, where) for v in e.variants),
        args_type=f"rt::Args<{len(tensors)}, {len(e.symbols)}, {len(scalars)}, {len(e.outputs)}>",
        checks=checks,
        tables=(*checks.tables, Table("ArgRead", "reads", every.reads + (inputs_only.reads if e.outputs else ()))),
        locals=(
            *(f"const int64_t s_{s.name} = x.s[{i}]" for i, s in enumerate(e.symbols)),
            *(f"void* const p_{p.name} = x.p[{i}]" for i, p in enumerate(tensors)),
            *scalar_reads.values(),
        ),
        outputs=tuple(e.outputs),
        allocates=bool(e.outputs),
        tensorless=not any(not p.output for p in tensors),
        every=every,
        inputs_only=inputs_only,
        forms=(
            f'{{reads, {every.count}, "{every.names}"}}',
            f'{{reads + {every.count}, {inputs_only.count}, "{inputs_only.names}"}}' if e.outputs else '{nullptr, 0, ""}',
        ),
        decide_at=at,
        decide_tensor=cpp_bool(bool(e.params) and e.params[at].is_tensor),
        returns=returns_of(e.outputs),
        call_fn=f"call_{index}",
        alloc_fn=f"alloc_{index}",
    )


# --- Exports: the TVM FFI functions and the C++ API ------------------------------------------


@dataclass(frozen=True)
class Member:
    """One specialisation of an export: its entry index and namespace."""

    index: int
    ns: str


@dataclass(frozen=True)
class PickTensor:
    """An input tensor the picker reads: its name and its position in the call (which may depend on the form)."""

    name: str
    pos: str


@dataclass(frozen=True)
class PickRule:
    """A C++ condition on the input tensors ``t[]`` and the specialisation it picks."""

    cond: str
    member: int


@dataclass(frozen=True)
class Picker:
    """The integer if-chain choosing among an export's specialisations (fallbacks last), in namespace ``ns``."""

    name: str
    ns: str
    members: tuple[Member, ...]
    tensors: tuple[PickTensor, ...]
    rules: tuple[PickRule, ...]
    built: str  # the specialisations built, for the error when none matches (a C string body)

    @property
    def first(self) -> Member:
        """The specialisation whose form (argument count) every other shares."""
        return self.members[0]


@dataclass(frozen=True)
class Target:
    """A launcher function an overload calls for one specialisation."""

    member: int
    function: str


@dataclass(frozen=True)
class Overload:
    """One C++ API function of an export: its return type, parameters (declared, defined) and what it calls."""

    returns: str
    declared: str  # the header's parameter list
    defined: str  # the launcher's
    args: str  # what it passes on
    targets: tuple[Target, ...]  # one per specialisation

    @property
    def target(self) -> str:
        """The function called for an export with one entry (and never reached past a picker)."""
        return self.targets[0].function


@dataclass(frozen=True)
class ExportCode:
    """One exported function: its TVM FFI call and C++ API overloads, and for specialisations the picker."""

    name: str
    cpp_name: str
    first: EntryCode
    signatures: tuple[str, ...]
    ffi_call: str  # the rt::FfiFn its TVM FFI export calls, and its context
    picker: Picker | None
    call: Overload
    call_stream: Overload
    alloc: Overload | None  # only for an entry with outputs
    alloc_stream: Overload | None

    @property
    def overloads(self) -> tuple[Overload, ...]:
        """The overloads in the order the launcher defines them."""
        return tuple(o for o in (self.call, self.call_stream, self.alloc, self.alloc_stream) if o is not None)


class _Overloads(TypedDict):
    """The C++ API overloads of one export, by the :class:`ExportCode` field each fills."""

    call: Overload
    call_stream: Overload
    alloc: Overload | None
    alloc_stream: Overload | None


#: An export's specialisations: (entry index, entry), in the library's order.
_Members = tuple[tuple[int, LoweredEntry], ...]


def _overloads(members: list[tuple[int, EntryCode]]) -> _Overloads:
    """The C++ API overloads of an export whose specialisations are ``members`` ((entry index, EntryCode), same parameters)."""
    e = members[0][1]

    def overload(returns: str, form: CallForm, stream: bool, alloc: bool) -> Overload:
        return Overload(
            returns=returns,
            declared=", ".join([*form.declared, *([f"void* {form.stream}"] if stream else [])]),
            defined=", ".join([*form.defined, *(["void* stream"] if stream else [])]),
            args=", ".join([*(f"u_{name}" for name in form.params), "true, stream" if stream else "false, nullptr"]),
            targets=tuple(Target(i, m.alloc_fn if alloc else m.call_fn) for i, m in members),
        )

    return {
        "call": overload("void", e.every, False, False),
        "call_stream": overload("void", e.every, True, False),
        "alloc": overload(e.returns.type, e.inputs_only, False, True) if e.allocates else None,
        "alloc_stream": overload(e.returns.type, e.inputs_only, True, True) if e.allocates else None,
    }


def _export_code(name: str, j: int, members: _Members, codes: list[EntryCode], others: frozenset = frozenset()) -> ExportCode:
    """The ``j``-th export, ``name``, over its specialisations ``members`` ((entry index, LoweredEntry)).

    ``others``: the library's other exports, which its C++ spelling (``EOF_`` for ``EOF``) must not take.
    """
    first = codes[members[0][0]]
    ns = first.ns
    picker = None
    if members[0][1].export:  # specialisations, even a lone one: its `when` ranges are enforced too
        picker = _picker(name, f"export{j}", members, codes)
    return ExportCode(
        name=name,
        cpp_name=cpp_name(name, others),
        first=first,
        signatures=tuple(codes[i].signature for i, _ in members),
        ffi_call=f"{picker.ns}::invoke, nullptr" if picker else f"rt::call_entry, &units::{ns}",  # a picker picks, then invokes
        picker=picker,
        **_overloads([(i, codes[i]) for i, _ in members]),
    )


def _picker(name: str, ns: str, members: _Members, codes: list[EntryCode]) -> Picker:
    """The C++ conditions that pick a specialisation: only the tests that tell the specialisations apart."""
    entries = tuple(m for _, m in members)
    params = entries[0].params
    inputs = [p for p in params if not p.output]
    # a tensor's position: the same in both forms unless an output comes before it
    pos = {p.name: (inputs.index(p), params.index(p)) for p in params if p.is_tensor and not p.output}
    rules = dispatch.plan(entries)
    by_index = {r.index: r for r in rules}
    return Picker(
        name=name,
        ns=ns,
        members=tuple(Member(i, codes[i].ns) for i, _ in members),
        tensors=tuple(PickTensor(n, str(a) if a == b else f"alloc ? {a} : {b}") for n, (a, b) in pos.items()),
        rules=tuple(PickRule(_pick_condition(r, by_index, len(entries)), members[r.index][0]) for r in rules),
        built=c_string_body(" | ".join(dispatch.describe(m) for m in entries)),
    )


def _pick_condition(r: dispatch.Rule, by_index: dict[int, dispatch.Rule], n: int) -> str:
    """The C++ test of rule ``r`` on ``t[]``, leaving out what every specialisation shares (their own checks test it)."""
    terms = []
    for k, tr in enumerate(r.tensors):
        others = [by_index[i].tensors[k] for i in range(n)]
        if any(o.dtype != tr.dtype for o in others):
            alts = " || ".join(f"(t[{k}]->dtype.code == {c} && t[{k}]->dtype.bits == {b})" for c, b in DLPACK_DTYPES[tr.dtype])
            terms.append(f"({alts})")
        dims = []
        for d, (lo, hi) in enumerate(tr.dims):
            same = all(len(o.dims) == len(tr.dims) and o.dims[d] == (lo, hi) for o in others)
            if same and not tr.narrowed[d]:
                continue
            if lo == hi:
                dims.append(f"t[{k}]->shape[{d}] == {lo}")
                continue
            if lo > 1:
                dims.append(f"t[{k}]->shape[{d}] >= {lo}")
            if hi < dispatch.UNBOUNDED:
                dims.append(f"t[{k}]->shape[{d}] <= {hi}")
        if dims or any(len(o.dims) != len(tr.dims) for o in others):
            terms.append(f"t[{k}]->ndim == {len(tr.dims)}")
        terms += dims
    return " && ".join(terms) or "true"


# --- The library -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LibraryCode:
    """What ``launcher.cc.j2`` and ``launcher.h.j2`` substitute for one library."""

    lib: str
    api: str  # the header's export macro, TL_AOT_<LIB>_API
    header_name: str
    entries: tuple[EntryCode, ...]
    exports: tuple[ExportCode, ...]
    pickers: tuple[Picker, ...]  # of the specialised exports
    archs: tuple[str, ...]
    sources: tuple[str, ...]
    tl_aot_version: str
    tilelang_version: str
    nvcc_version: str
    abi_version: int
    min_driver: int  # the driver floor as cuDriverGetVersion spells it (13000), 0 for none
    min_driver_version: str  # C++ string literals: the floor as a Linux driver version, the compiler
    built_with: str


def library_code(manifest: Manifest, header_name: str) -> LibraryCode:
    """The pieces of ``manifest``'s launcher and header (``header_name``: what the launcher includes)."""
    exports = manifest.exports()
    label = {m.name: f"{x} (specialisation {i + 1}/{len(ms)})" for x, ms in exports.items() if len(ms) > 1 for i, m in enumerate(ms)}
    entries = [entry_code(e, i, label.get(e.name, "")) for i, e in enumerate(manifest.entries)]
    index = {e.name: i for i, e in enumerate(manifest.entries)}
    codes = tuple(
        _export_code(name, j, tuple((index[m.name], m) for m in ms), entries, frozenset(exports) - {name})
        for j, (name, ms) in enumerate(exports.items())
    )
    return LibraryCode(
        lib=manifest.library,
        api=f"TL_AOT_{manifest.library.upper()}_API",
        header_name=header_name,
        entries=tuple(entries),
        exports=codes,
        pickers=tuple(x.picker for x in codes if x.picker),
        archs=tuple(sorted({a for e in entries for a in e.archs})),
        sources=tuple(sorted({c_comment(e.source) for e in manifest.entries})),
        tl_aot_version=manifest.tl_aot_version,
        tilelang_version=manifest.tilelang_version,
        nvcc_version=manifest.nvcc_version,
        abi_version=ABI_VERSION,
        min_driver=cuda_int(manifest.driver_min_cuda) if manifest.driver_min_cuda else 0,
        min_driver_version=f'"{c_string_body(manifest.driver_min_version)}"',
        built_with=f'"{c_string_body(manifest.compiler or "nvcc " + manifest.nvcc_version)}"',
    )


# --- Translation units -----------------------------------------------------------------------


@dataclass(frozen=True)
class UnitCode:
    """What ``launcher.cc.j2`` substitutes for one translation unit, besides the library's :class:`LibraryCode` fields.

    Each entry's ``rt::Entry`` (``units::entry<i>``) and the ``rt::Library`` (``units::library``)
    are the only names the units share: everything else a unit defines stays in it.
    """

    entries: tuple[EntryCode, ...]  # defined here
    exports: tuple[ExportCode, ...]  # exported here (their entries are here)
    pickers: tuple[Picker, ...]
    declared: tuple[EntryCode, ...]  # named here: its own entries, or every entry in the unit defining the library
    defines_library: bool  # the entry table, rt::Library and the library-wide exports
    part: str  # "" for a launcher in one unit, else which unit this is: " (unit 2)" (no "of 31": a grown library keeps its units' text)
    sources: tuple[str, ...]  # of its entries (its first line): a unit's text changes only with its entries
    archs: tuple[str, ...]


def units_of(code: LibraryCode, plans: tuple[UnitPlan, ...]) -> tuple[UnitCode, ...]:
    """The units of ``code``'s launcher cut as ``plans`` say: one whole unit, or the library-wide unit first, then one per plan."""
    if len(plans) <= 1:
        return (UnitCode(code.entries, code.exports, code.pickers, code.entries, True, "", code.sources, code.archs),)
    units = [UnitCode((), (), (), code.entries, True, " (unit 1)", code.sources, code.archs)]
    for k, plan in enumerate(plans, 2):
        entries = tuple(code.entries[i] for i in plan.entries)
        exports = tuple(code.exports[j] for j in plan.exports)
        pickers = tuple(x.picker for x in exports if x.picker)
        sources = tuple(sorted({e.source for e in entries}))
        archs = tuple(sorted({a for e in entries for a in e.archs}))
        units.append(UnitCode(entries, exports, pickers, entries, False, f" (unit {k})", sources, archs))
    return tuple(units)
