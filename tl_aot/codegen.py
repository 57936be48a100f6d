"""Render the C++ launcher and header from jinja2 templates (``tl_aot/templates/*.j2``).

Templates substitute and loop; every decision and C++ spelling (dtype checks, argument getters,
check expressions) is made here, from the metadata dataclasses.
"""

from __future__ import annotations

import functools
import json
import math
import re

from . import dispatch
from .arch import parse_arch
from .errors import LoweringError
from .metadata import ABI_VERSION, LoweredEntry, Manifest, to_json
from .spec import cpp_name

__all__ = ["render_launcher", "render_manifest", "render_header", "render_loader", "image_symbol", "DLPACK_DTYPES"]

#: TileLang dtype -> accepted DLPack (code, bits) pairs (lanes are always 1).
DLPACK_DTYPES = {
    "float16": [(2, 16)],
    "bfloat16": [(4, 16)],
    "float32": [(2, 32)],
    "float64": [(2, 64)],
    "int8": [(0, 8)],
    "int16": [(0, 16)],
    "int32": [(0, 32)],
    "int64": [(0, 64)],
    "uint8": [(1, 8)],
    "uint16": [(1, 16)],
    "uint32": [(1, 32)],
    "uint64": [(1, 64)],
    "bool": [(6, 8), (1, 8)],
    "float8_e4m3": [(10, 8), (8, 8)],
    "float8_e4m3fn": [(10, 8), (8, 8)],
    "float8_e5m2": [(12, 8)],
    "float8_e8m0fnu": [(14, 8)],
}

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
#: rt::kMaxKernels (and Workspaces' capacity) in tl_aot/include/tl_aot/launcher_runtime.h.
_MAX_KERNELS = 16
_FLOAT_CTYPES = {"float32": "float", "float64": "double"}


@functools.lru_cache(maxsize=1)
def _env():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("tl_aot", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def c_string_body(text) -> str:
    """``text`` escaped to sit between the quotes of a C++ string literal (octal escapes, never hex)."""
    out = []
    for b in str(text).encode():
        ch = chr(b)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif 0x20 <= b < 0x7F and ch != "?":  # '?' escaped: no trigraph can form
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    return "".join(out)


def c_comment(text) -> str:
    """``text`` made safe for a ``//`` comment: one line, printable ASCII, no line-splicing backslash."""
    return "".join(c if " " <= c <= "~" and c != "\\" else ("/" if c == "\\" else "?") for c in str(text))


def image_symbol(entry: str, arch: str, ptx: bool) -> str:
    """Name of the embedded image of ``entry`` for ``arch`` (``__tvm_ffi__cubin_<this>``)."""
    return f"{entry}__{arch}{'_ptx' if ptx else ''}"


def _dtype_check(dtype: str, where: str) -> str:
    pairs = DLPACK_DTYPES.get(dtype)
    if pairs is None:
        msg = f"{where}: tensor dtype {dtype} has no DLPack equivalent tl_aot can check"
        raise LoweringError(msg)
    alts = " || ".join(f"(t->dtype.code == {c} && t->dtype.bits == {b})" for c, b in pairs)
    return f"({alts}) && t->dtype.lanes == 1"


def _scalar_getter(dtype: str, name: str, entry: str, entry_name: str = "") -> tuple[str, str]:
    """C++ type of a scalar parameter and the expression reading it from ``@`` (an AnyView); ``entry`` spells its name."""
    if dtype in _INT_RANGES:
        lo, hi = _INT_RANGES[dtype]
        lo_s = "INT64_MIN" if lo == -(2**63) else f"int64_t({lo})"
        return f"{dtype}_t", f'rt::int_arg(@, {entry}, "{name}", {lo_s}, int64_t({hi}), "{dtype}")'
    if dtype in _FLOAT_CTYPES:
        return _FLOAT_CTYPES[dtype], f'rt::float_arg(@, {entry}, "{name}", "{dtype}")'
    if dtype == "bool":
        return "bool", f'rt::bool_arg(@, {entry}, "{name}")'
    msg = f"entry {entry_name or entry!r}: scalar parameter {name!r} has dtype {dtype}, which tl_aot launchers do not support"
    raise LoweringError(msg)


def _entry_context(e: LoweredEntry, index: int, label: str = "") -> dict:
    """Everything the launcher template substitutes for one entry (specialisation)."""
    where = f"entry {e.name!r}"
    # Inputs first: they bind the shape symbols that outputs (possibly allocated) are checked against.
    tensors = [p for p in e.params if p.is_tensor and not p.output] + [p for p in e.params if p.output]
    if not tensors:
        msg = f"{where}: takes no tensor; tl_aot picks the device from the tensors, so an entry needs at least one"
        raise LoweringError(msg)
    t_ctx, late = _tensor_contexts(e, tensors, where)
    params_ctx, scalars = _param_contexts(e, index)
    sym_ctx = [_symbol_context(s, e) for s in e.symbols]
    # Scalars a dim is computed from (a T.match_buffer dim, a returned output's size) are read in check().
    dims_cpp = " ".join([*(c for p in tensors for c in (*p.shape_cpp, *p.strides_cpp)), *(s.cpp for s in e.symbols)])
    check_scalars = [d for d in scalars if re.search(rf"\ba_{d['name']}\b", dims_cpp)]
    variants = [_variant_context(e, v, where) for v in e.variants]
    # The header declares parameters by the user's names (C++ keywords get a '_' suffix); the
    # launcher defines them as u_<name>, so no user name meets a generated identifier.
    shown = [cpp_name(p.name) for p in e.params]
    shown = [cpp_name(n, set(shown[:i])) for i, n in enumerate(shown)]
    ins = [(p, n) for p, n in zip(params_ctx, shown) if not p["output"]]
    outs = [t for t in t_ctx if t["output"]]
    # A call passing n_inputs + 1 == len(params) arguments is the inputs + a stream, or every
    # parameter: the first position where one form has a tensor and the other not tells them apart.
    alloc_kinds = [p["is_tensor"] for p, _ in ins] + [False]
    decide_at = next((i for i, p in enumerate(params_ctx) if i < len(alloc_kinds) and p["is_tensor"] != alloc_kinds[i]), 0)
    returns = "::tvm::ffi::Tensor" if len(outs) == 1 else f"std::tuple<{', '.join(['::tvm::ffi::Tensor'] * len(outs))}>"
    return {
        "name": e.exported,  # what the API is called; e.name is unique per specialisation
        "label": c_string_body(label or e.exported),  # what errors say: the entry, and which specialisation
        "ns": _namespace(index),
        "cpp_name": cpp_name(e.exported),
        "signature": c_comment(e.signature()),
        "source": c_comment(e.source),
        "function": e.function,
        "args_display": c_comment(", ".join(f"{k}={v}" for k, v in e.args)),
        "archs": [v.arch + ("+PTX" if v.ptx else "") for v in e.variants],
        "tensors": t_ctx,
        "scalars": scalars,
        "params": params_ctx,
        "param_names": ", ".join(p.name for p in e.params),
        "input_names": ", ".join(p.name for p in e.params if not p.output),
        "inputs": [t for t in t_ctx if not t["output"]],
        "outputs": outs,
        "n_inputs": len(ins),
        "decide_at": decide_at,
        "decide_tensor": bool(params_ctx and params_ctx[decide_at]["is_tensor"]),
        "in_params": [p for p, _ in ins],
        "returns": returns,
        "cpp_in_params": ", ".join(f"{p['ctype']} {n}" for p, n in ins),
        "cpp_def_in_params": ", ".join(f"{p['ctype']} u_{p['name']}" for p, _ in ins),
        "cpp_def_in_args": ", ".join(f"u_{p['name']}" for p, _ in ins),
        "symbols": sym_ctx,
        "check_scalars": check_scalars,
        "late_checks": late,
        "variants": variants,
        "cpp_params": ", ".join(f"{p['ctype']} {n}" for p, n in zip(params_ctx, shown)),
        "stream_param": cpp_name("stream", set(shown)),
        "in_stream_param": cpp_name("stream", {n for _, n in ins}),
        "cpp_def_params": ", ".join(f"{p['ctype']} u_{p['name']}" for p in params_ctx),
        "cpp_def_args": ", ".join(f"u_{p['name']}" for p in params_ctx),
    }


def _tensor_contexts(e: LoweredEntry, tensors: list, where: str) -> tuple[list, list]:
    """Each tensor's checks (dtype, dims, strides, alignment), and the dim checks that must wait for solved symbols."""
    symbols = {s.name: s for s in e.symbols if not s.derived}  # derived ones are solved after the tensors' checks
    solved_from = {(s.param, s.dim) for s in e.symbols if s.derived}  # dims their own check covers
    bound: dict[str, tuple[str, int]] = {}
    t_ctx, late = [], []
    for p in tensors:
        shape = "[" + ", ".join(str(d) for d in p.shape) + "]"
        checks = [
            c
            for i, (d, cpp) in enumerate(zip(p.shape, p.shape_cpp))
            if (p.name, i) not in solved_from and (c := _dim_check(p, i, d, cpp, shape, symbols, bound, late)) is not None
        ]
        code, bits = DLPACK_DTYPES[p.dtype][0] if p.dtype in DLPACK_DTYPES else (0, 0)
        t_ctx.append(
            {
                "name": p.name,
                "output": p.output,
                "shape_cpp": list(p.shape_cpp) or ["1"],
                "dl_dtype": f"DLDataType{{{code}, {bits}, 1}}",
                "ndim": len(p.shape),
                "dtype": p.dtype,
                "dtype_check": _dtype_check(p.dtype, f"{where}: parameter {p.name!r}"),
                "dim_checks": checks,
                "shape_display": c_string_body(shape),
                "stride_checks": [{"dim": i, "value": cpp} for i, cpp in enumerate(p.strides_cpp)] if p.strides else [],
                "alignment": p.alignment if p.alignment > 1 and (p.alignment & (p.alignment - 1)) == 0 else 0,
                "strides_display": c_string_body("(" + ", ".join(str(s) for s in p.strides) + ")"),
            }
        )
    return t_ctx, late


def _dim_check(p, i: int, d, cpp: str, shape: str, symbols: dict, bound: dict, late: list) -> dict | None:
    """One dim's check: a constant, the binding of a symbol, a symbol bound earlier, or (into ``late``) an expression."""
    if isinstance(d, int):
        return {"bind": "", "source": "", "dim": i, "value": str(d), "display": c_string_body(f"{shape} with dim {i} = {d}")}
    if d in symbols and d not in bound:
        bound[d] = (p.name, i)
        return {"bind": d, "dim": i}
    if d in symbols:
        src = bound[d]
        return {
            "bind": "",
            "dim": i,
            "value": f"s_{d}",
            "display": c_string_body(f"{shape} with dim {i} = {d} = "),
            "source": c_string_body(f" (from '{src[0]}' dim {src[1]})"),
        }
    late.append({"param": p.name, "output": p.output, "dim": i, "value": cpp, "display": c_string_body(f"{shape} with dim {i} = {d} = ")})
    return None


def _param_contexts(e: LoweredEntry, index: int) -> tuple[list, list]:
    """Every parameter's C++ type (and a scalar's getter), and the scalars among them."""
    params_ctx, scalars = [], []
    for p in e.params:
        if p.is_tensor:
            params_ctx.append({"name": p.name, "is_tensor": True, "output": p.output, "ctype": "::tvm::ffi::TensorView"})
        else:
            ctype, getter = _scalar_getter(p.dtype, p.name, f"{_namespace(index)}::kName", e.name)
            d = {"name": p.name, "is_tensor": False, "output": False, "ctype": ctype, "getter": getter}
            params_ctx.append(d)
            scalars.append(d)
    return params_ctx, scalars


def _variant_context(e: LoweredEntry, v, where: str) -> dict:
    """One arch's image, kernels (launch configs, arguments), TMA descriptors and workspaces."""
    if len(v.kernels) > _MAX_KERNELS or len(v.workspaces) > _MAX_KERNELS:
        msg = (
            f"{where} ({v.arch}): launches {len(v.kernels)} kernels with {len(v.workspaces)} workspaces; "
            f"the launcher runtime holds at most {_MAX_KERNELS} of each per entry (rt::kMaxKernels)"
        )
        raise LoweringError(msg)
    a = parse_arch(v.arch)
    kernels = []
    for k in v.kernels:
        try:
            static_smem = int(k.dynamic_smem)
        except ValueError:
            static_smem = -1
        args = [{**_as_dict(arg), "index": i} for i, arg in enumerate(k.args)]
        kernels.append({**_as_dict(k), "args": args, "static_smem": static_smem, "cluster_size": math.prod(k.cluster_dims or (1,))})
    workspaces = [
        {"name": c_string_body(w.name), "cpp": w.cpp, "factors": list(w.factors) or ["1"], "elem_bytes": max(1, (w.elem_bits + 7) // 8)}
        for w in v.workspaces
    ]
    return {
        "arch": v.arch,
        "major": a.major,
        "minor": a.minor,
        "arch_specific": "true" if a.suffix == "a" else "false",
        "ptx_flag": "true" if v.ptx else "false",
        "image_symbol": image_symbol(e.name, v.arch, v.ptx),
        "kernels": kernels,
        "tma_descriptors": [_as_dict(d) for d in v.tma_descriptors],
        "workspaces": workspaces,
    }


def _symbol_context(s, e: LoweredEntry) -> dict:
    """How the launcher binds one symbol: a dim read in the tensor's check, or solved from one and checked."""
    imax = "2147483647" if s.dtype == "int32" else "INT64_MAX"
    ctx = {"name": s.name, "param": s.param, "dim": s.dim, "max": imax, "derive": s.cpp}
    if s.derived:
        p = next(q for q in e.params if q.name == s.param)
        shape = "[" + ", ".join(str(d) for d in p.shape) + "]"
        shown = "2147483647" if s.dtype == "int32" else str(2**63 - 1)
        ctx["check"] = p.shape_cpp[s.dim]
        ctx["display"] = c_string_body(f"{shape} with dim {s.dim} = {p.shape[s.dim]} for an integer {s.name} in [1, {shown}]")
    return ctx


def _exports(manifest: Manifest, entries: list) -> list:
    """One context per exported function: its entries (specialisations) and, for several, the C++ pick rules."""
    index = {e.name: i for i, e in enumerate(manifest.entries)}
    out = []
    for j, (name, members) in enumerate(manifest.exports().items()):
        idx = [index[m.name] for m in members]
        first = entries[idx[0]]
        x = {"name": name, "first": first, "members": idx, "rules": [], "ns": first["ns"]}
        x["call"] = f"{x['ns']}::invoke(a, num_args, result, {x['ns']}::form(a, num_args, {x['ns']}::kName))"
        x["signatures"] = [entries[i]["signature"] for i in idx]
        if members[0].export:  # specialisations, even a lone one: its `when` ranges are enforced too
            x.update(_pick_context(members, idx))
            x["ns"] = f"export{j}"
            x["call"] = f"{x['ns']}::invoke(a, num_args, result)"  # picks a specialisation, then as above
        out.append(x)
    return out


def _pick_context(members: tuple, idx: list) -> dict:
    """C++ conditions that pick a specialisation: only the tests that tell the specialisations apart."""
    rules = dispatch.plan(members)
    params = members[0].params
    inputs = [p for p in params if not p.output]
    # a tensor's position: the same in both forms unless an output comes before it
    pos = {p.name: (inputs.index(p), params.index(p)) for p in params if p.is_tensor and not p.output}
    tensors = [{"name": n, "pos": str(a) if a == b else f"alloc ? {a} : {b}"} for n, (a, b) in pos.items()]
    by_index = {r.index: r for r in rules}
    conds = []
    for r in rules:
        terms = []
        for k, tr in enumerate(r.tensors):
            others = [by_index[i].tensors[k] for i in range(len(members))]
            if any(o.dtype != tr.dtype for o in others):
                alts = " || ".join(f"(t[{k}]->dtype.code == {c} && t[{k}]->dtype.bits == {b})" for c, b in DLPACK_DTYPES[tr.dtype])
                terms.append(f"({alts})")
            dims = []
            for d, (lo, hi) in enumerate(tr.dims):
                same = all(len(o.dims) == len(tr.dims) and o.dims[d] == (lo, hi) for o in others)
                if same and not tr.narrowed[d]:
                    continue  # the same for all: the picked specialisation's own checks test it
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
        conds.append({"cond": " && ".join(terms) or "true", "member": idx[r.index]})
    return {"rules": conds, "tensors": tensors, "built": c_string_body(" | ".join(dispatch.describe(m) for m in members))}


def _namespace(index: int) -> str:
    """The C++ namespace holding one entry's generated code: by position, so no entry name can clash."""
    return f"entry{index}"


def _as_dict(obj) -> dict:
    import dataclasses

    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def _raw_string(text: str) -> tuple[str, str]:
    """``text`` and a delimiter that lets it sit verbatim in a C++ raw string literal."""
    delim = "tlaot"
    while f'){delim}"' in text:
        delim += "x"
    return text, delim


def _context(manifest: Manifest, header_name: str) -> dict:
    exports = manifest.exports()
    label = {m.name: f"{x} (specialisation {i + 1}/{len(ms)})" for x, ms in exports.items() if len(ms) > 1 for i, m in enumerate(ms)}
    entries = [_entry_context(e, i, label.get(e.name, "")) for i, e in enumerate(manifest.entries)]
    archs = sorted({a for e in entries for a in e["archs"]})
    return {
        "lib": manifest.library,
        "entries": entries,
        "exports": _exports(manifest, entries),
        "archs": archs,
        "sources": sorted({c_comment(e.source) for e in manifest.entries}),
        "tl_aot_version": manifest.tl_aot_version,
        "tilelang_version": manifest.tilelang_version,
        "nvcc_version": manifest.nvcc_version,
        "abi_version": ABI_VERSION,
        "header_name": header_name,
    }


def render_launcher(manifest: Manifest, *, header_name: str) -> str:
    """The launcher translation unit for every entry of ``manifest``."""
    return _env().get_template("launcher.cc.j2").render(**_context(manifest, header_name))


def render_manifest(manifest: Manifest) -> str:
    """The manifest translation unit: the JSON of ``manifest`` as the launcher's ``tl_aot_manifest_json``.

    Kept apart from the launcher, whose text never depends on image sizes: the launcher can be
    rendered and compiled as soon as lowering is done, the manifest only once nvcc is.
    """
    text, delim = _raw_string(to_json(manifest))
    return (
        _env()
        .get_template("manifest.cc.j2")
        .render(
            lib=manifest.library,
            entries=[e.name for e in manifest.entries],
            abi_version=ABI_VERSION,
            tl_aot_version=manifest.tl_aot_version,
            manifest_json=text,
            manifest_delim=delim,
        )
    )


def render_header(manifest: Manifest) -> str:
    """The C++ API header (``<lib>.h``) matching :func:`render_launcher`."""
    return _env().get_template("launcher.h.j2").render(**_context(manifest, f"{manifest.library}.h"))


#: File name of the copy of :mod:`tl_aot.torch_ops` shipped next to a generated loader.
TORCH_GLUE_MODULE = "_tl_aot_torch"


def render_loader(manifest: Manifest, *, module: str, library_file: str, torch_ops: bool | str = False) -> str:
    """A pure-Python module that loads ``library_file`` from its own folder and exposes each entry.

    ``module`` is the dotted name it is imported as (``tl_gemm._kernels``). The module needs only
    ``tvm_ffi`` (not tl_aot), so a package shipping it depends on apache-tvm-ffi alone; its
    ``register_torch_ops()`` uses the copy of :mod:`tl_aot.torch_ops` placed beside it
    (``_tl_aot_torch.py``). ``torch_ops`` (True or a namespace) registers them on import when
    torch is installed; the default namespace is the package's name.
    """
    package = module.rpartition(".")[0] or module
    namespace = torch_ops if isinstance(torch_ops, str) else package.replace(".", "_").lstrip("_") or manifest.library.lstrip("_")
    glue = f"from . import {TORCH_GLUE_MODULE}" if "." in module else f"import {TORCH_GLUE_MODULE}"

    def py_str(text: str) -> str:  # a double-quoted Python literal, as ruff format writes it
        return json.dumps(text)

    entries = [
        {
            "name": name,
            "name_repr": py_str(name),
            "signatures": [m.signature() for m in ms],
            "tuple": len(ms[0].outputs) > 1,
            "tensorless": bool(ms[0].outputs) and not any(p.is_tensor for p in ms[0].inputs),
        }
        for name, ms in manifest.exports().items()
    ]
    archs = sorted({v.arch + ("+PTX" if v.ptx else "") for e in manifest.entries for v in e.variants})
    return (
        _env()
        .get_template("loader.py.j2")
        .render(
            package=package,
            library_file=library_file,
            library_file_repr=py_str(library_file),
            missing_tvm_ffi_msg=py_str(f"{module} needs apache-tvm-ffi: pip install apache-tvm-ffi"),
            entries=entries,
            any_tuple=any(e["tuple"] for e in entries),
            any_tensorless=any(e["tensorless"] for e in entries),
            namespace_repr=py_str(namespace),
            torch_glue_import=glue,
            torch_ops=bool(torch_ops),
            archs=archs,
            sources=sorted({e.source for e in manifest.entries}),
            tl_aot_version=manifest.tl_aot_version,
            tilelang_version=manifest.tilelang_version,
            nvcc_version=manifest.nvcc_version,
        )
    )
