"""Lower one entry for one arch with TileLang's own API and read its launch metadata from the IR.

Runs without a GPU: the target is explicit. Everything the launcher needs (parameters, dynamic
symbols, device kernels in launch order, grid/block/shared memory/cluster dims, TMA descriptors,
L2 windows) is taken from TileLang's lowered host and device modules, never re-parsed from C++.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import re
import sys

from .arch import Arch
from .cexpr import CppExprPrinter, ctype_of
from .device import default_profile, emulate, find_profile
from .errors import LoweringError, SpecError, TlAotError
from .metadata import DeviceKernel, KernelArg, L2Window, LoweredVariant, Param, Symbol, TmaDescriptor, Workspace
from .options import flag_inputs, jit_pass_configs, nvcc_flags_for, portable_flags
from .resolve import CompileRequest, Resolved, func_hash, plain_pass_configs, resolve_kernel
from .source import format_user_error, import_kernel_file, local_dependencies
from .spec import KernelSpec
from .values import spell

__all__ = ["lower_variant", "tilelang_version"]

_TENSORMAP_CREATE = {"__tvm_tensormap_create_tiled": "tiled", "__tvm_tensormap_create_im2col": "im2col"}
_GLOBAL_RE = re.compile(r'(?:extern\s+"C"\s+)?__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(([^)]*)\)')


def tilelang_version() -> str:
    """Version of the TileLang used to lower (importing it if needed)."""
    import tilelang

    return str(getattr(tilelang, "__version__", "unknown"))


def _output_positions(func, out_idx, where: str) -> frozenset:
    """Parameter positions the entry allocates and returns, from ``out_idx`` (ints, negative from the end, or names)."""
    if out_idx is None:
        return frozenset()
    items = [out_idx] if isinstance(out_idx, (int, str)) else list(out_idx)
    names = [func.buffer_map[v].name if v in func.buffer_map else v.name for v in func.params]
    out = set()
    for it in items:
        if isinstance(it, str):
            if it not in names:
                msg = f"{where}: out_idx names {it!r}, which is not a parameter ({', '.join(names)})"
                raise LoweringError(msg)
            i = names.index(it)
        else:
            i = int(it) + (len(names) if int(it) < 0 else 0)
            if not 0 <= i < len(names):
                msg = f"{where}: out_idx {it} is out of range for {len(names)} parameters ({', '.join(names)})"
                raise LoweringError(msg)
        if func.params[i] not in func.buffer_map:
            msg = f"{where}: out_idx {it!r} is the scalar {names[i]!r}; only tensors can be outputs"
            raise LoweringError(msg)
        out.add(i)
    return frozenset(out)


def _signature(func, where: str, outputs: frozenset = frozenset()):
    """Params and dynamic symbols of the prim_func, plus the TIR-name → C++-name map.

    Bound as TileLang's host code binds them: scalars first, then each tensor's dims (a dim that is
    a variable binds it; one solved from a dim expression such as ``n * 2`` is checked per call).
    Inputs come before outputs, so a symbol is bound by an input when one has it: returned outputs
    are shaped from the inputs and scalars alone.
    """
    names: dict[str, str] = {}
    by_pos = _scalar_params(func, where, names)
    symbols: dict[str, Symbol] = {}
    buffers = []
    tensors = [i for i, v in enumerate(func.params) if v in func.buffer_map]
    for group in ([i for i in tensors if i not in outputs], [i for i in tensors if i in outputs]):
        named = []
        for pos in group:
            buf = func.buffer_map[func.params[pos]]
            pname = _check_name(buf.name, f"{where}: tensor parameter")
            names[buf.data.name] = f"p_{pname}"
            named.append((pos, pname, buf))
        _bind_dims(named, symbols, names, where)
        _solve_dims(named, symbols, names, where)
        buffers += named
    for pos, pname, buf in buffers:
        # TileLang declares every argument buffer 64-byte aligned and vectorises on that promise
        # (16-byte loads, TMA): a pointer that breaks it faults the whole CUDA context.
        align = int(getattr(buf, "data_alignment", 0) or 0)
        shape = tuple(_dim_of(s) for s in buf.shape)
        strides = tuple(_stride_of(s, names, f"{where}: tensor {pname!r}") for s in buf.strides)
        by_pos[pos] = Param(pname, "tensor", str(buf.dtype), shape, strides, alignment=align if align > 1 else 0, output=pos in outputs)
    params = [by_pos[i] for i in range(len(func.params))]
    _check_bound(buffers, names, where)
    _check_outputs(params, symbols, where)
    pr = CppExprPrinter(names, {}, where)
    spelled = {pname: (tuple(pr(s) for s in buf.shape), tuple(pr(s) for s in buf.strides)) for _, pname, buf in buffers}
    params = [dataclasses.replace(p, shape_cpp=spelled[p.name][0], strides_cpp=spelled[p.name][1]) if p.is_tensor else p for p in params]
    return tuple(params), tuple(symbols.values()), names


def _scalar_params(func, where: str, names: dict) -> dict:
    """Scalar parameters by position; each binds its variable (``a_<name>``) before any tensor, as in TileLang."""
    out = {}
    for pos, var in enumerate(func.params):
        if var not in func.buffer_map:
            pname = _check_name(var.name, f"{where}: scalar parameter")
            ctype_of(str(var.dtype), f"{where}: parameter {pname!r}")
            names[var.name] = f"a_{pname}"
            out[pos] = Param(pname, "scalar", str(var.dtype))
    return out


def _bind_dims(named: list, symbols: dict, names: dict, where: str) -> None:
    """A dim that is a variable no scalar or earlier dim binds binds it (``s_<name>``)."""
    from tilelang import tvm

    for _, pname, buf in named:
        for i, dim in enumerate(buf.shape):
            if isinstance(dim, tvm.tirx.Var) and not _is_bound(dim.name, names):
                _check_name(dim.name, f"{where}: symbolic dimension of {pname}")
                symbols[dim.name] = Symbol(dim.name, str(dim.dtype), pname, i)
                names[dim.name] = f"s_{dim.name}"


_DIM_REF = "__tl_aot_dim__"


def _solve_dims(named: list, symbols: dict, names: dict, where: str) -> None:
    """Variables found only inside dim expressions, solved as TileLang's arg binder solves them.

    TileLang hands ``dim == shape[i]`` to TVM's linear solver with the unbound variables as unknowns
    (``n * 2`` gives ``n = shape[i] // 2``) and asserts the equation again; the launcher does the
    same. Dims are tried until none solves more, so the order of the tensors does not matter.
    """
    progress = True
    while progress:
        progress = False
        for _, pname, buf in named:
            for i, dim in enumerate(buf.shape):
                free = [v for v in _vars_of(dim) if not _is_bound(v.name, names)]
                if free and _solve_dim(pname, i, dim, free, symbols, names, where):
                    progress = True


def _solve_dim(pname: str, i: int, dim, free: list, symbols: dict, names: dict, where: str) -> bool:
    """Bind ``free`` from ``dim == pname.shape[i]`` if TVM's linear solver solves it exactly."""
    from tilelang import tvm

    ref = tvm.tirx.Var(_DIM_REF, dim.dtype)
    try:
        sol = tvm.arith.solve_linear_equations([tvm.tirx.EQ(dim, ref)], free, {})
    except Exception:  # TVM refuses some non-linear forms outright; TileLang cannot bind them either
        return False
    if len(sol.dst.variables):
        return False
    pr = CppExprPrinter({**names, _DIM_REF: f"x.t_{pname}->shape[{i}]"}, {}, where)
    for v in free:
        value = sol.src_to_dst[v]
        _check_name(v.name, f"{where}: symbolic dimension of {pname}")
        expr = str(value).replace(_DIM_REF, f"{pname}.shape[{i}]")
        symbols[v.name] = Symbol(v.name, str(v.dtype), pname, i, expr=expr, cpp=pr(value))
        names[v.name] = f"s_{v.name}"
    return True


def _is_bound(name: str, names: dict) -> bool:
    """Whether a variable has a value in the launcher: a scalar argument or a symbol."""
    return names.get(name, "").startswith(("a_", "s_"))


def _dim_of(x):
    """A dim as the metadata spells it: an int, a variable's name, or the expression's text."""
    from tilelang import tvm

    if isinstance(x, tvm.tirx.IntImm):
        return int(x.value)
    return x.name if isinstance(x, tvm.tirx.Var) else str(x)


def _stride_of(x, names: dict, what: str):
    """A stride as the metadata spells it; a stride variable must be bound by a shape or a scalar."""
    from tilelang import tvm

    if isinstance(x, tvm.tirx.Var) and not _is_bound(x.name, names):
        msg = f"{what} has a stride variable that no shape binds; tl_aot needs strides derived from shapes"
        raise LoweringError(msg)
    return _dim_of(x)


def _check_bound(buffers: list, names: dict, where: str) -> None:
    """Every variable of every dim has a value: TileLang's binder refuses the same functions."""
    for _, pname, buf in buffers:
        for s in buf.shape:
            for v in _free_vars(s):
                if not _is_bound(v, names):
                    msg = (
                        f"{where}: tensor {pname!r} has dimension `{s}` whose variable {v!r} no other dimension binds "
                        "(a variable is solved from a dimension only as the one unknown of a linear expression, e.g. n * 2)"
                    )
                    raise LoweringError(msg)


def _check_outputs(params: list, symbols: dict, where: str) -> None:
    """Returned outputs must be allocatable from the inputs: every dim known from inputs or scalars, dense."""
    outs = [p for p in params if p.output]
    if not outs:
        return
    hint = "pass it as an argument instead (out_idx = [] in the spec, or drop it from out_idx)"
    for p in outs:
        for d in p.shape:
            for v in [d] if d in symbols else _names_in(str(d)):
                sym = symbols.get(v)
                if sym is not None and next(q for q in params if q.name == sym.param).output:
                    msg = f"{where}: output {p.name!r} has dim {d!r}, which no input tensor's shape or scalar argument gives; {hint}"
                    raise LoweringError(msg)
        dense = [math.prod(p.shape[i + 1 :]) if all(isinstance(d, int) for d in p.shape[i + 1 :]) else None for i in range(len(p.shape))]
        if p.strides and any(isinstance(st, int) and want is not None and st != want for st, want in zip(p.strides, dense)):
            msg = f"{where}: output {p.name!r} has strides {p.strides}; a returned output is allocated dense; {hint}"
            raise LoweringError(msg)


def _names_in(expr: str) -> list[str]:
    return re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expr)


def _check_name(name: str, what: str) -> str:
    """A parameter or dimension name: any identifier (generated C++ only ever spells it prefixed)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name or ""):
        msg = f"{what} {name!r} is not an identifier tl_aot can name in C++"
        raise LoweringError(msg)
    return name


def _workspaces(host_func, names: dict, lets: dict, where: str):
    """Global buffers the host function allocates itself (``T.alloc_global``): the library allocates them per call."""
    from tilelang import tvm

    found = []

    def visit(node):
        if type(node).__name__ == "AllocBuffer" and node.buffer.scope() == "global":
            found.append(node.buffer)

    tvm.tirx.stmt_functor.post_order_visit(host_func.body, visit)
    out = []
    for i, buf in enumerate(found):
        name = buf.name
        cpp = f"w_{name}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f"w_{i}_" + re.sub(r"\W", "_", name)
        names[buf.data.name] = cpp
    pr = CppExprPrinter(names, lets, where)
    for buf in found:
        factors: list = []
        for dim in buf.shape:
            factors += _product_factors(dim)
        dt = tvm.DataType(str(buf.dtype))
        out.append(
            Workspace(
                name=buf.name,
                dtype=str(buf.dtype),
                cpp=names[buf.data.name],
                factors=tuple(pr(f) for f in factors),
                elem_bits=int(dt.bits) * int(dt.lanes),
                shape=tuple(str(d) for d in buf.shape),
            )
        )
    return tuple(out)


def _product_factors(expr) -> list:
    """``a * b * c`` as [a, b, c] (so the launcher can check the product for overflow)."""
    if type(expr).__name__ == "Mul":
        return _product_factors(expr.a) + _product_factors(expr.b)
    return [expr]


def _vars_of(expr) -> list:
    """The distinct variables of ``expr`` (by name), in the order first met."""
    from tilelang import tvm

    out: dict = {}

    def visit(node):
        if isinstance(node, tvm.tirx.Var) and node.name not in out:
            out[node.name] = node

    tvm.tirx.stmt_functor.post_order_visit(tvm.tirx.Evaluate(expr), visit)
    return list(out.values())


def _free_vars(expr) -> list[str]:
    return [v.name for v in _vars_of(expr)]


def _host_walk(host_func):
    """Lets, packed calls (in program order) of TileLang's lowered host function."""
    from tilelang import tvm

    tirx = tvm.tirx
    lets: dict[str, object] = {}
    calls: list = []

    def visit(node):
        if type(node).__name__ in ("Bind", "LetStmt"):
            lets[node.var.name] = node.value
        elif isinstance(node, tirx.Call) and getattr(node.op, "name", "") in ("tirx.tvm_call_packed", "tir.tvm_call_packed"):
            calls.append(node)

    tirx.stmt_functor.post_order_visit(host_func.body, visit)
    return lets, calls


def _tma_descriptors(host_func, names, lets, where):
    """Descriptor metadata from the host function's ``tma_descriptor_args``, in creation order."""
    attrs = host_func.attrs or {}
    tma_args = attrs.get("tma_descriptor_args") if "tma_descriptor_args" in attrs else None
    descs: list[TmaDescriptor] = []
    desc_index: dict[str, int] = {}
    if not tma_args:
        return descs, desc_index
    data_to_param = {var_name: cpp[2:] for var_name, cpp in names.items() if cpp.startswith(("p_", "w_"))}
    pr = CppExprPrinter(names, lets, where)
    for var, args in tma_args.items():
        kind = str(args[0].value if hasattr(args[0], "value") else args[0])
        mode = _TENSORMAP_CREATE.get(kind)
        if mode is None:
            msg = f"{where}: unknown TMA descriptor constructor {kind}"
            raise LoweringError(msg)
        _, _, dtype, rank, addr, *rest = args
        rank = int(rank)
        addr_name = getattr(addr, "name", None)
        if addr_name not in data_to_param:
            msg = f"{where}: TMA descriptor {var.name} maps `{addr}`, which is neither a tensor parameter's data nor a workspace"
            raise LoweringError(msg)
        ints = lambda xs: tuple(pr(x) for x in xs)  # noqa: E731
        common = dict(
            name=str(var.name),
            tensor=data_to_param[addr_name],
            mode=mode,
            dtype=int(dtype),
            rank=rank,
            global_address=pr(addr),
            global_dim=ints(rest[:rank]),
            global_stride=ints(rest[rank + 1 : 2 * rank]),
        )
        if mode == "tiled":
            interleave, swizzle, l2, oob = (int(x) for x in rest[4 * rank : 4 * rank + 4])
            d = TmaDescriptor(
                **common,
                box_dim=ints(rest[2 * rank : 3 * rank]),
                element_strides=ints(rest[3 * rank : 4 * rank]),
                interleave=interleave,
                swizzle=swizzle,
                l2_promotion=l2,
                oob_fill=oob,
            )
        else:
            pix, chan, interleave, swizzle, l2, oob = rest[5 * rank - 4 : 5 * rank + 2]
            d = TmaDescriptor(
                **common,
                element_strides=ints(rest[2 * rank : 3 * rank]),
                lower_corner=ints(rest[3 * rank : 4 * rank - 2]),
                upper_corner=ints(rest[4 * rank - 2 : 5 * rank - 4]),
                pixels_per_column=pr(pix),
                channels_per_pixel=pr(chan),
                interleave=int(interleave),
                swizzle=int(swizzle),
                l2_promotion=int(l2),
                oob_fill=int(oob),
            )
        desc_index[var.name] = len(descs)
        descs.append(d)
    return descs, desc_index


def _kernels(art, host_func, names, lets, desc_index, params, where):
    """Device kernels in launch order, with their argument expressions and launch configuration."""
    device_funcs = {gv.name_hint: f for gv, f in art.device_mod.functions.items()}
    _, calls = _host_walk(host_func)
    pr = CppExprPrinter(names, lets, where)
    l2_map = {}
    attrs = host_func.attrs or {}
    if "l2_persistent_map" in attrs:
        l2_map = dict(attrs["l2_persistent_map"])
    tensor_bytes = {p.name: p for p in params if p.is_tensor}
    kernels: list[DeviceKernel] = []
    for call in calls:
        kname = str(call.args[0].value)
        if kname not in device_funcs:
            continue  # __tvm_set_device and friends: the launcher does their job itself
        fn = device_funcs[kname]
        fattrs = fn.attrs or {}
        nparams = len(fn.params)
        call_args = list(call.args[1:])
        kargs = []
        for p, value in zip(fn.params, call_args[:nparams]):
            vname = getattr(value, "name", None)
            if vname in desc_index:
                kargs.append(KernelArg(p.name, "CUtensorMap", str(desc_index[vname])))
            elif str(p.dtype) == "handle":
                if vname is None or not names.get(vname, "").startswith(("p_", "w_")):
                    msg = f"{where}: kernel {kname} pointer argument {p.name} = `{value}` is neither a tensor's data nor a workspace"
                    raise LoweringError(msg)
                kargs.append(KernelArg(p.name, "void*", names[vname]))
            else:
                kargs.append(KernelArg(p.name, ctype_of(str(p.dtype), f"{where}: kernel {kname} arg {p.name}"), pr(value)))
        tags = [str(t) for t in fattrs.get("tirx.kernel_launch_params", [])]
        launch_vals = call_args[nparams:]
        grid, block = ["1", "1", "1"], ["1", "1", "1"]
        grid_d, block_d = ["1", "1", "1"], ["1", "1", "1"]
        smem = "0"
        cluster_launch = [1, 1, 1]
        for tag, val in zip(tags, launch_vals):
            if tag.startswith("blockIdx."):
                i = "xyz".index(tag[-1])
                grid[i], grid_d[i] = pr(val), str(val)
            elif tag.startswith("threadIdx."):
                i = "xyz".index(tag[-1])
                block[i], block_d[i] = pr(val), str(val)
            elif tag == "tirx.use_dyn_shared_memory":
                smem = pr(val)
            elif re.fullmatch(r"tirx?\.cluster_dim_[xyz]", tag):
                cluster_launch["xyz".index(tag[-1])] = _const_int(val, f"{where}: kernel {kname} cluster dim")
            else:
                msg = f"{where}: kernel {kname} has launch parameter {tag!r}, which tl_aot does not support"
                raise LoweringError(msg)
        cluster = tuple(cluster_launch)
        if "cluster_dims" in fattrs:
            cd = [int(x) for x in fattrs["cluster_dims"]]
            cluster = tuple((cd + [1, 1, 1])[:3])
        if cluster == (1, 1, 1):
            cluster = ()
        windows = []
        # TileLang records T.annotate_l2_hit_ratio per host function: it covers each of its launches.
        for buf_name, (hit, size) in l2_map.items():
            tname = str(buf_name)
            if tname in tensor_bytes:
                windows.append(L2Window(tname, float(hit), pr(size)))
        kernels.append(
            DeviceKernel(
                name=kname,
                args=tuple(kargs),
                grid=tuple(grid),
                block=tuple(block),
                dynamic_smem=smem,
                cluster_dims=cluster,
                cooperative=bool(fattrs.get("use_cooperative_groups", False)),
                pdl="has_cuda_pdl_sync" in fattrs,
                l2_windows=tuple(windows),
                grid_display=tuple(grid_d),
                block_display=tuple(block_d),
            )
        )
    if not kernels:
        msg = f"{where}: the lowered function launches no device kernel"
        raise LoweringError(msg)
    return tuple(kernels)


def _const_int(val, what: str) -> int:
    try:
        return int(val)
    except (TypeError, ValueError):
        msg = f"{what} must be a compile-time constant, got `{val}`"
        raise LoweringError(msg) from None


def _check_source_kernels(kernels, source: str, where: str) -> None:
    """A hand-written ``__global__`` (T.CUDASourceCodeKernel) must take exactly the arguments passed."""
    decls = {m.group(1): m.group(2) for m in _GLOBAL_RE.finditer(source)}
    for k in kernels:
        decl = decls.get(k.name)
        if decl is None:
            continue
        arity = 0 if not decl.strip() or decl.strip() == "void" else decl.count(",") + 1
        if arity != len(k.args):
            passed = ", ".join(a.name for a in k.args) or "nothing"
            msg = (
                f"{where}: CUDA kernel {k.name} declares {arity} parameter(s) ({decl.strip()}) but the "
                f"prim_func passes {len(k.args)} ({passed}); TileLang passes only the prim_func parameters "
                "the launch uses, in order: make the __global__ signature match"
            )
            raise LoweringError(msg)


_KEYWORD_PARAMS = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?\w+\s*\(([^)]*)\)")


def _rename_keyword_params(source: str) -> str:
    """Rename kernel parameters that are C++ keywords (``new``, ``this``, ``delete``) in TileLang's CUDA source.

    TileLang accepts such names and spells them verbatim in the ``__global__`` signature and body,
    which nvcc refuses. The rename is confined to each kernel's own declaration and body; the
    launcher passes arguments by position, so nothing else changes.
    """
    from .spec import CPP_RESERVED

    out, pos = [], 0
    for m in _KEYWORD_PARAMS.finditer(source):
        names = {re.findall(r"\w+", p)[-1] for p in m.group(1).split(",") if re.findall(r"\w+", p)}
        bad = sorted(n for n in names if n in CPP_RESERVED)
        if not bad or m.start() < pos:
            continue
        end = _function_end(source, m.end())
        span = source[m.start() : end]
        for n in bad:
            new = f"{n}_"
            while re.search(rf"\b{new}\b", source):
                new += "_"
            span = re.sub(rf"\b{n}\b", new, span)
        out.append(source[pos : m.start()] + span)
        pos = end
    out.append(source[pos:])
    return "".join(out)


def _function_end(source: str, i: int) -> int:
    """End of the declaration (``;``) or body (matching ``}``) that starts right after index ``i``."""
    while i < len(source) and source[i] not in ";{":
        i += 1
    if i >= len(source) or source[i] == ";":
        return min(i + 1, len(source))
    depth = 0
    for j in range(i, len(source)):
        if source[j] == "{":
            depth += 1
        elif source[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(source)


class _DropBuilderDump(logging.Filter):
    """Drops TileLang's dump of its internal closure source when a prim_func fails to build.

    tl_aot's error already names the user's file:line and carries TileLang's message.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to build prim_func")


_BUILDER_FILTER = _DropBuilderDump()


def lower_variant(spec: KernelSpec, arch: Arch) -> LoweredVariant:
    """Import ``spec``'s kernel file, specialise it, lower it for ``arch`` and extract its metadata."""
    where = f"entry {spec.name!r} ({arch.sm})"
    builder_log = logging.getLogger("tilelang.language.eager.builder")
    if _BUILDER_FILTER not in builder_log.filters:
        builder_log.addFilter(_BUILDER_FILTER)
    try:
        import tilelang
        from tilelang import tvm
    except ImportError as e:
        from .errors import ToolchainNotFound

        msg = f"{where}: TileLang is needed at build time: pip install tilelang==0.1.15 ({e})"
        raise ToolchainNotFound(msg) from None
    profile = _profile(spec, arch)
    deps = [] if spec.capture else local_dependencies(spec.source, spec.imports)
    files = {str(spec.source.resolve())} | {str(p) for p in deps}
    target = tvm.target.Target({"kind": "cuda", "arch": arch.sm})
    try:
        with target, emulate(profile):
            resolved = _resolve(spec, arch, where)
            func = resolved.func
            out_idx = resolved.out_idx if spec.out_idx is None else spec.out_idx
            outputs = _output_positions(func, out_idx, where)
            pass_configs = jit_pass_configs(resolved.pass_configs, resolved.compile_flags)
            with tvm.transform.PassContext(opt_level=3, config=pass_configs):
                art = tilelang.lower(func, target=target)
        params, symbols, names = _signature(func, where, outputs)
        host_funcs = list(art.host_mod.functions.values())
        if len(host_funcs) != 1:
            msg = f"{where}: expected one host function after lowering, got {len(host_funcs)}"
            raise LoweringError(msg)
        host = host_funcs[0]
        lets, _ = _host_walk(host)
        workspaces = _workspaces(host, names, lets, where)
        descs, desc_index = _tma_descriptors(host, names, lets, where)
        kernels = _kernels(art, host, names, lets, desc_index, params, where)
        source = _rename_keyword_params(art.kernel_source)
        _check_source_kernels(kernels, source, where)
        nvcc_options = nvcc_flags_for(pass_configs)
    except TlAotError:
        raise
    except Exception as e:  # TileLang's own errors: keep its message, add where in the user's code
        at = format_user_error(e, files)
        tail = f"\n  at {at}" if at else f"\n  in {spec.source}:{spec.function}"
        msg = f"{where}: TileLang failed to lower {spec.function}{tail}\n  {type(e).__name__}: {_first_lines(e)}"
        raise LoweringError(msg) from e
    return LoweredVariant(
        entry=spec.name,
        arch=arch.sm,
        ptx=arch.ptx,
        params=params,
        symbols=symbols,
        kernels=kernels,
        tma_descriptors=tuple(descs),
        cuda_source=source,
        nvcc_options=nvcc_options,
        deps=tuple(str(p) for p in deps),
        workspaces=workspaces,
        device=profile.name,
        config=tuple((k, _spelled(v)) for k, v in resolved.choice.config.items()) if resolved.choice else (),
        config_source=resolved.choice.source if resolved.choice else "",
        pass_configs=tuple((k, json.dumps(v)) for k, v in plain_pass_configs(resolved.pass_configs).items()),
        compile_flags=tuple(resolved.compile_flags),
        func_hash=func_hash(func),
        resolved=resolved.path,
        inputs=flag_inputs(nvcc_options),
        **_request_identity(spec, resolved, out_idx),
    )


def _request_identity(spec: KernelSpec, resolved: Resolved, out_idx) -> dict:
    """The JIT compile request this variant answers, with the options it was built with (spec overrides included).

    Its key is what serving matches; its prim_func name and options, as JSON, are what ``verify`` compares.
    """
    from .capture import options_of, request_key

    req = CompileRequest(
        resolved.func,
        None if out_idx is None else list(out_idx),
        resolved.execution_backend,
        resolved.target,
        None,
        dict(resolved.pass_configs),
        tuple(str(f) for f in resolved.compile_flags),
        0,
    )
    options = options_of(req)
    key = spec.capture[1] if spec.capture else request_key(req.func, options)
    request = {"name": req.name, "options": {**options, "compile_flags": portable_flags(options["compile_flags"])}}
    return {"request_key": key, "request": json.dumps(request, sort_keys=True, default=str)}


def _resolve(spec: KernelSpec, arch: Arch, where: str) -> Resolved:
    """Import the kernel file (and the spec's ``imports`` first) and resolve the entry as TileLang's JIT would.

    A stand-in from an earlier variant (a cache in the user's code kept it) means the module's
    state is stale: it is imported afresh once and resolved again.
    """
    if spec.capture:
        from .capture import resolve_captured

        return resolve_captured(spec, where)
    tuned = spec.tuned_config(arch.sm)
    for attempt in (0, 1):
        module = import_kernel_file(spec.source, entry=spec.name, arch=arch.sm, fresh=attempt > 0, imports=spec.imports)
        resolved = resolve_kernel(spec, module, where, arch.sm, tuned=tuned)
        if not resolved.stale:
            return resolved
    msg = f"{where}: {spec.function} keeps returning a kernel resolved for another variant (a cache outside its module?)"
    raise LoweringError(msg)


def _spelled(v) -> str:
    try:
        return spell(v)
    except SpecError:
        return repr(v)


def _profile(spec: KernelSpec, arch: Arch):
    """The GPU profile of this variant: the entry's ``device`` if it fits ``arch``, else the arch's default."""
    if spec.device:
        with contextlib.suppress(SpecError):
            return find_profile(spec.device, arch)
    return default_profile(arch)


def _first_lines(e: BaseException, n: int = 40) -> str:
    lines = str(e).strip().splitlines()
    text = "\n  ".join(lines[:n])
    return text + ("\n  ..." if len(lines) > n else "")


if __name__ == "__main__":  # pragma: no cover - debugging aid: python -m tl_aot.lower file.py:fn sm_90a
    from .arch import parse_arch
    from .metadata import to_json
    from .spec import parse_target

    src, fn = parse_target(sys.argv[1])
    v = lower_variant(KernelSpec.create(name=fn, source=src, function=fn, archs=[sys.argv[2]]), parse_arch(sys.argv[2]))
    print(to_json(v, indent=1))
