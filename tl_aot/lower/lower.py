"""Lower one entry for one arch with TileLang's own API: the orchestration of one variant.

Runs without a GPU: the target is explicit. The user's object is resolved by :mod:`tl_aot.jit.resolve`,
the lowered IR read into metadata by :mod:`tl_aot.lower.ir_signature` and :mod:`tl_aot.lower.ir_metadata`, and the generated CUDA edited and
checked by :mod:`tl_aot.lower.cuda_source`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from dataclasses import dataclass

from ..capture.device_code import check_against_record, digest, lower, spell_target
from ..common.arch import Arch
from ..common.errors import LoweringError, SpecError, TlAotError, ToolchainNotFound
from ..common.metadata import LoweredVariant
from ..common.tilelang_compat import INSTALL_HINT, tilelang_version
from ..common.user_frames import format_user_error, user_location
from ..config.import_guard import guarded_call
from ..config.kernel_spec import KernelSpec
from ..config.options import flag_inputs, jit_pass_configs, nvcc_flags_for, plain_pass_configs, portable_flags
from ..config.user_code import display_path, function_line, import_kernel_file, local_dependencies
from ..config.values import spell
from ..gpu.device import default_profile, emulate, find_profile
from ..gpu.launch_limits import check_launch_limits
from ..jit.request_key import backend_kind, options_of, request_key
from ..jit.resolve import Resolved, func_hash, resolve_kernel
from ..jit.seam import CompileRequest
from ..jit.walk_digest import walk_digest
from .cexpr import ctype_of
from .cuda_source import check_source_kernels, rename_reserved_names, static_shared_bytes
from .distinct_names import distinguish_names
from .ir_metadata import host_walk, read_kernels, read_tma_descriptors, read_workspaces
from .ir_signature import output_positions, read_signature
from .native_log import NATIVE_LOG_ENV, captured_native_log

__all__ = ["Walked", "lower_variant", "walk_variant"]


class _DropBuilderDump(logging.Filter):
    """Drops TileLang's dump of its internal closure source when a prim_func fails to build.

    tl_aot's error already names the user's file:line and carries TileLang's message.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to build prim_func")


_BUILDER_FILTER = _DropBuilderDump()


def lower_variant(spec: KernelSpec, arch: Arch, *, native_log: str | None = None) -> LoweredVariant:
    """Import ``spec``'s kernel file, specialise it, lower it for ``arch`` and extract its metadata.

    TileLang's C++ log is captured meanwhile and shown as ``native_log`` says (``off``, ``warnings``,
    ``raw``: :mod:`tl_aot.lower.native_log`); default ``$TL_AOT_NATIVE_LOG``, else ``warnings``.
    """
    with captured_native_log(native_log or os.environ.get(NATIVE_LOG_ENV, "warnings")):
        return _lower_variant(spec, arch)


def _lower_variant(spec: KernelSpec, arch: Arch) -> LoweredVariant:
    where = f"entry {spec.name!r} ({arch.sm})"
    builder_log = logging.getLogger("tilelang.language.eager.builder")
    if _BUILDER_FILTER not in builder_log.filters:
        builder_log.addFilter(_BUILDER_FILTER)
    try:
        from tilelang import tvm
    except ImportError as e:
        msg = f"{where}: TileLang is needed at build time: {INSTALL_HINT} ({e})"
        raise ToolchainNotFound(msg, entry=spec.name, arch=arch.sm) from None
    profile = _profile(spec, arch)
    deps = [] if spec.capture else local_dependencies(spec.source, spec.imports)
    files = {str(spec.source.resolve())} | {str(p) for p in deps}
    target = tvm.target.Target({"kind": "cuda", "arch": arch.sm})
    try:
        with target, emulate(profile):
            with guarded_call(f"{display_path(spec.source)}:{spec.function}", files, entry=spec.name, arch=arch.sm):
                resolved = _resolve(spec, arch, where)
            func = resolved.func
            out_idx = resolved.out_idx if spec.out_idx is None else spec.out_idx
            outputs = output_positions(func, out_idx, where)
            identity = _request_identity(spec, resolved, out_idx)  # before lowering: TileLang's renames variables in place
            pass_configs = jit_pass_configs(resolved.pass_configs, resolved.compile_flags)
            backend = spec.backend or backend_kind(resolved.execution_backend, resolved.target)
            lower_target = _cutedsl_target(spec, arch, target) if backend == "cutedsl" else target
            _check_scalars(func, where)  # before TileLang's own check, which names neither parameter nor dtype
            art = lower(func, lower_target, pass_configs)
        distinguish_names(func)  # after lowering: the device code is the JIT's, byte for byte
        params, symbols, names = read_signature(func, where, outputs)
        if backend == "cutedsl":
            from .cutedsl import check_params

            check_params(params, where)
        host_funcs = list(art.host_mod.functions.values())
        if len(host_funcs) != 1:
            msg = f"{where}: expected one host function after lowering, got {len(host_funcs)}"
            raise LoweringError(msg, entry=spec.name, arch=arch.sm)
        host = host_funcs[0]
        lets, _ = host_walk(host)
        workspaces = read_workspaces(host, names, lets, where)
        descs, desc_index = read_tma_descriptors(host, names, lets, where)
        kernels = read_kernels(art, host, names, lets, desc_index, params, where)
        kernel_source, code = _proven_code(backend, art, resolved, arch, where)
        source, nvcc_options, static_shared = _device_code(
            backend, art, kernel_source, func, lower_target, kernels, workspaces, pass_configs, where
        )
        line = None if spec.capture else function_line(spec.source, spec.function)
        check_launch_limits(kernels, static_shared, arch, where, location=f"{spec.source}:{line}" if line else None)
    except TlAotError as e:  # raised knowing less (a helper given only `where`): the variant is this one
        e.entry, e.arch = e.entry or spec.name, e.arch or arch.sm
        _locate(e, spec)
        raise
    except Exception as e:  # TileLang's own errors: keep its message, add where in the user's code
        at = format_user_error(e, files)
        tail = f"\n  at {at}" if at else f"\n  in {spec.source}:{spec.function}"
        msg = f"{where}: TileLang failed to lower {spec.function}{tail}\n  {type(e).__name__}: {_first_lines(e)}"
        raise LoweringError(msg, entry=spec.name, arch=arch.sm, location=user_location(e, files) or None) from e
    return LoweredVariant(
        entry=spec.name,
        arch=arch,
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
        backend=backend,
        device_code=code,
        **identity,
    )


@dataclass(frozen=True)
class Walked:
    """A kernel file's entry walked again, not lowered: the label this walk spells and the request it reaches."""

    resolved: str  # the "built from" label (:attr:`~tl_aot.common.metadata.LoweredVariant.resolved`)
    request_key: str  # the JIT compile request reached: the same as a cached variant's, the same kernel
    walk: str  # the digest of the walk (:func:`tl_aot.jit.walk_digest.walk_digest`)


def walk_variant(spec: KernelSpec, arch: Arch, *, native_log: str | None = None) -> Walked:
    """Import ``spec``'s kernel file and walk its entry to the compile request for ``arch`` as lowering does, without lowering.

    What a cached variant made by another tl_aot walk is checked against (:mod:`tl_aot.pipeline.relabel`):
    the same request is the same kernel, which keeps its image and takes this walk's label.
    """
    if spec.capture:
        msg = f"entry {spec.name!r} ({arch.sm}): a captured kernel is not walked: its label is spelled from its record"
        raise LoweringError(msg, entry=spec.name, arch=arch.sm)
    where = f"entry {spec.name!r} ({arch.sm})"
    from tilelang import tvm

    files = {str(spec.source.resolve())} | {str(p) for p in local_dependencies(spec.source, spec.imports)}
    with captured_native_log(native_log or os.environ.get(NATIVE_LOG_ENV, "warnings")):
        with tvm.target.Target({"kind": "cuda", "arch": arch.sm}), emulate(_profile(spec, arch)):
            with guarded_call(f"{display_path(spec.source)}:{spec.function}", files, entry=spec.name, arch=arch.sm):
                resolved = _resolve(spec, arch, where)
            identity = _request_identity(spec, resolved, resolved.out_idx if spec.out_idx is None else spec.out_idx)
    return Walked(resolved.path, identity["request_key"], identity["walk"])


def _proven_code(backend: str, art, resolved: Resolved, arch: Arch, where: str) -> tuple[str, str]:
    """TileLang's CUDA source (before tl_aot's edits) and its digest; a captured kernel's must be the one recorded.

    For a captured kernel, the source is the JIT's spelling of it: TileLang's with its same-named
    shared-memory aliases placed and ordered as the JIT's process wrote them (:mod:`tl_aot.capture.alias_order`).
    """
    if backend != "cuda":
        return art.kernel_source, ""
    if resolved.captured is None:
        return art.kernel_source, digest(art.kernel_source)
    spelled = spell_target(art.target) if getattr(art, "target", None) is not None else ""
    proven = check_against_record(resolved.captured, arch.sm, art.kernel_source, where, tilelang_version=tilelang_version(), target=spelled)
    return proven.source, proven.sha256


def _device_code(
    backend: str, art, kernel_source: str, func, target, kernels, workspaces, pass_configs, where: str
) -> tuple[str, tuple[str, ...], dict[str, int]]:
    """The source the image is compiled from, its nvcc flags and its kernels' static shared memory, checked.

    CUDA C++ (``kernel_source``, TileLang's as proven; reserved names renamed) for nvcc, or the
    module TileLang's CuTeDSL JIT would generate.
    """
    if backend == "cutedsl":
        from .cutedsl import check_kernels, generated_module

        check_kernels(kernels, workspaces, art.kernel_source, where)
        return generated_module(art, func, target), (), {}
    source = rename_reserved_names(kernel_source)
    check_source_kernels(kernels, source, where)
    return source, nvcc_flags_for(pass_configs), static_shared_bytes(source)


def _cutedsl_target(spec: KernelSpec, arch: Arch, target):
    """The CUDA target of ``arch`` marked for TileLang's CuTeDSL code generator (the extra checked first)."""
    from tilelang import tvm

    from .cutedsl import require_cutedsl

    require_cutedsl(spec.name, arch.sm)
    if arch.ptx:
        msg = f"entry {spec.name!r} ({arch}): the cutedsl backend builds cubins only; build {arch.sm} without +PTX"
        raise SpecError(msg, entry=spec.name, arch=arch.sm)
    if spec.compile_flags:
        msg = (
            f"entry {spec.name!r} ({arch}): nvcc flags ({' '.join(spec.compile_flags)}) do not apply to the cutedsl "
            "backend: CuTeDSL compiles its images, not nvcc"
        )
        raise SpecError(msg, entry=spec.name, arch=arch.sm)
    exported = dict(target.export())
    exported["keys"] = [*dict.fromkeys([*exported.get("keys", ()), "cutedsl"])]
    return tvm.target.Target(exported)


def _check_scalars(func, where: str) -> None:
    """Refuse a scalar parameter whose dtype no kernel call can take (bfloat16, float8, ...), naming it.

    TileLang's packed API asserts ``dtype.is_float()`` with no name for these; the error raised here
    names the entry, arch, parameter and dtype, and ``_locate`` adds the user's file:line.
    """
    for var in func.params:
        if var not in func.buffer_map:
            ctype_of(str(var.dtype), f"{where}: parameter {var.name!r}")


def _locate(e: TlAotError, spec: KernelSpec) -> None:
    """Give ``e`` the user's ``def`` of the entry as its location, in its fields and its text, when it names none.

    Checks of the lowered kernel (its names, launch limits, outputs) know only ``entry (arch)``; every
    front end prints the message alone, so the file:line a user fixes goes into the text too.
    """
    if e.location is None and not spec.capture:
        line = function_line(spec.source, spec.function)
        e.location = f"{display_path(spec.source)}:{line}" if line else None
    if e.location and e.args and isinstance(e.args[0], str) and e.location not in e.args[0]:
        e.args = (f"{e.args[0]}\n  at {e.location}", *e.args[1:])


def _request_identity(spec: KernelSpec, resolved: Resolved, out_idx) -> dict[str, str]:
    """The JIT compile request this variant answers, with the options it was built with (spec overrides included).

    Its key is what serving matches; its prim_func name and options, as JSON, are what ``verify`` compares;
    ``walk``: which tl_aot walk reached it from a kernel file (:mod:`tl_aot.jit.walk_digest`).
    Taken before the variant is lowered, of the prim_func as this process first saw it
    (:mod:`tl_aot.jit.pristine_ir`): ``@tilelang.jit`` hands out one prim_func object for the same
    arguments, and lowering it for another arch may have renamed its variables since.
    """
    req = CompileRequest.of(
        resolved.func,
        out_idx,  # as TileLang takes it: None, an index (``out_idx=-1``), a name or a list; the key spells each alike
        execution_backend=resolved.execution_backend,
        target=resolved.target,
        pass_configs=resolved.pass_configs,
        compile_flags=resolved.compile_flags,
    )
    options = options_of(req)
    key = spec.capture.key if spec.capture else request_key(req.func, options)
    request = {"name": req.name, "options": {**options, "compile_flags": portable_flags(options["compile_flags"])}}
    walk = "" if spec.capture else walk_digest()
    return {"request_key": key, "request": json.dumps(request, sort_keys=True, default=str), "walk": walk}


def _resolve(spec: KernelSpec, arch: Arch, where: str) -> Resolved:
    """Import the kernel file (and the spec's ``imports`` first) and resolve the entry as TileLang's JIT would.

    A stand-in from an earlier variant (a cache in the user's code kept it) means the module's
    state is stale: it is imported afresh once and resolved again.
    """
    if spec.capture:
        from ..capture.record_specs import resolve_captured

        return resolve_captured(spec, where)
    tuned = spec.tuned_config(arch.sm)
    for attempt in (0, 1):
        module = import_kernel_file(spec.source, entry=spec.name, arch=arch.sm, fresh=attempt > 0, imports=spec.imports)
        resolved = resolve_kernel(spec, module, where, arch.sm, tuned=tuned)
        if not resolved.stale:
            return resolved
    msg = f"{where}: {spec.function} keeps returning a kernel resolved for another variant (a cache outside its module?)"
    raise LoweringError(msg, entry=spec.name, arch=arch.sm)


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


if __name__ == "__main__":  # pragma: no cover - debugging aid: python -m tl_aot.lower.lower file.py:fn sm_90a
    from ..common.arch import parse_arch
    from ..common.metadata_json import to_json
    from ..config.arg_text import parse_target

    src, fn = parse_target(sys.argv[1])
    spec = KernelSpec.create(name=fn, source=src, function=fn, archs=[sys.argv[2]])
    assert isinstance(spec, KernelSpec)
    v = lower_variant(spec, parse_arch(sys.argv[2]))
    print(to_json(v, indent=1))
