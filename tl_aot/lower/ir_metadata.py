"""Read TileLang's lowered IR into launch metadata: workspaces, TMA descriptors, device kernels and their launches.

Everything the launcher needs (device kernels in launch order, grid/block/shared memory/cluster
dims, TMA descriptors, L2 windows) is taken from TileLang's lowered host and device modules as
TIR, never re-parsed from C++; host expressions become C++ through :mod:`tl_aot.lower.cexpr`.
"""

from __future__ import annotations

import re
from typing import Any

from ..common.errors import LoweringError
from ..common.metadata import DeviceKernel, KernelArg, L2Window, TmaDescriptor, Workspace
from .cexpr import CppExprPrinter, ctype_of

__all__ = ["host_walk", "read_workspaces", "read_tma_descriptors", "read_kernels"]

_TENSORMAP_CREATE = {"__tvm_tensormap_create_tiled": "tiled", "__tvm_tensormap_create_im2col": "im2col"}


def read_workspaces(host_func, names: dict[str, str], lets: dict[str, object], where: str):
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


def host_walk(host_func):
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


def read_tma_descriptors(host_func, names, lets, where):
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


def read_kernels(art, host_func, names, lets, desc_index, params, where):
    """Device kernels in launch order, with their argument expressions and launch configuration."""
    device_funcs = {gv.name_hint: f for gv, f in art.device_mod.functions.items()}
    _, calls = host_walk(host_func)
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
        kargs = _kernel_args(fn, call_args[:nparams], desc_index, names, pr, f"{where}: kernel {kname}")
        tags = [str(t) for t in fattrs.get("tirx.kernel_launch_params", [])]
        grid, block, grid_d, block_d, smem, cluster_launch = _launch_config(tags, call_args[nparams:], pr, f"{where}: kernel {kname}")
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


def _kernel_args(fn, values: list[Any], desc_index: dict[str, int], names: dict[str, str], pr, what: str) -> list[KernelArg]:
    """Each kernel parameter's C type and the launcher expression passed for it (a TMA descriptor, a pointer, a scalar)."""
    kargs = []
    for p, value in zip(fn.params, values):
        vname = getattr(value, "name", None)
        if vname in desc_index:
            kargs.append(KernelArg(p.name, "CUtensorMap", str(desc_index[vname])))
        elif str(p.dtype) == "handle":
            if vname is None or not names.get(vname, "").startswith(("p_", "w_")):
                msg = f"{what} pointer argument {p.name} = `{value}` is neither a tensor's data nor a workspace"
                raise LoweringError(msg)
            kargs.append(KernelArg(p.name, "void*", names[vname]))
        else:
            kargs.append(KernelArg(p.name, ctype_of(str(p.dtype), f"{what} arg {p.name}"), pr(value)))
    return kargs


def _launch_config(tags: list[str], values: list[Any], pr, what: str) -> tuple[list[str], list[str], list[str], list[str], str, list[int]]:
    """Grid and block dims (C++ and as TileLang prints them), dynamic shared memory and cluster dims of one launch."""
    grid, block = ["1", "1", "1"], ["1", "1", "1"]
    grid_d, block_d = ["1", "1", "1"], ["1", "1", "1"]
    smem = "0"
    cluster = [1, 1, 1]
    for tag, val in zip(tags, values):
        if tag.startswith("blockIdx."):
            i = "xyz".index(tag[-1])
            grid[i], grid_d[i] = pr(val), str(val)
        elif tag.startswith("threadIdx."):
            i = "xyz".index(tag[-1])
            block[i], block_d[i] = pr(val), str(val)
        elif tag == "tirx.use_dyn_shared_memory":
            smem = pr(val)
        elif re.fullmatch(r"tirx?\.cluster_dim_[xyz]", tag):
            cluster["xyz".index(tag[-1])] = _const_int(val, f"{what} cluster dim")
        else:
            msg = f"{what} has launch parameter {tag!r}, which tl_aot does not support"
            raise LoweringError(msg)
    return grid, block, grid_d, block_d, smem, cluster


def _const_int(val, what: str) -> int:
    try:
        return int(val)
    except (TypeError, ValueError):
        msg = f"{what} must be a compile-time constant, got `{val}`"
        raise LoweringError(msg) from None
