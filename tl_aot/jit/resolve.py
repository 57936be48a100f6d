"""Resolve the user's kernel object to exactly what TileLang's JIT would compile for that call.

Operator libraries reach their kernels through factories: a plain function returning a
``T.prim_func``, a ``@tilelang.jit`` function, a factory returning a nested ``@tilelang.jit``
function that takes the config, a factory that calls its jit and returns the compiled kernel, an
``lru_cache`` over either, a factory returning several kernels. tl_aot never imitates that: it
calls the library's code as the library would and **intercepts TileLang's compile**
(``tilelang.jit.cached``, which every JIT path reaches after TileLang merged the prim_func's own
attributes), so the prim_func and the options (``out_idx``, ``pass_configs``, ``compile_flags``,
target, backend) are the ones TileLang's JIT would have used. Nothing is compiled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..common.errors import LoweringError
from ..common.json_types import JsonMapping
from ..config.function_path import NOT_FOUND, lookup_function
from ..config.kernel_spec import KernelSpec
from ..config.values import evaluate
from .factory_walk import WalkArgs, Walker, is_autotuned, unwrap_caches
from .seam import CompiledStandIn, CompileRequest, Interception, install, jit_module, uninstall

if TYPE_CHECKING:
    from ..tune.config_choice import Choice

__all__ = ["intercept_compiles", "resolve_kernel", "func_hash", "Resolved"]

#: Execution backends whose kernels are CUDA C++ compiled by nvcc: the same image tl_aot builds.
_CUDA_BACKENDS = frozenset({None, "auto", "tvm_ffi", "cython", "nvrtc", "ctypes", "dlpack"})
_sessions = itertools.count(1)
_local = threading.local()


@dataclass
class _Interception:
    session: int
    requests: list  # CompileRequest, in call order
    jit_objects: list  # the @tilelang.jit objects whose compile ran
    jit_calls: list = dataclasses.field(default_factory=list)  # (jit object, args, kwargs) of each compile


@contextlib.contextmanager
def intercept_compiles():
    """While active, TileLang's compile records its request and returns a :class:`CompiledStandIn`.

    The interception is :mod:`tl_aot.jit.seam`'s; on exit the stand-ins are removed from the JIT
    caches they were stored in.
    """
    state = _Interception(next(_sessions), [], [])

    def on_request(req, jit_call, proceed):
        req = dataclasses.replace(req, session=state.session)
        state.requests.append(req)
        return CompiledStandIn(req)

    def on_jit(call) -> None:
        state.jit_objects.append(call.jit)
        state.jit_calls.append((call.jit, call.args, dict(call.kwargs)))

    if getattr(_local, "active", False):
        msg = "tl_aot: nested compile interception"
        raise LoweringError(msg)
    _local.active = True
    interception = Interception(on_request, on_jit, name="resolve")
    install(interception, jit_module())
    try:
        yield state
    finally:
        uninstall(interception)
        _local.active = False
        for obj in state.jit_objects:
            _purge(obj)


def _purge(jit_obj) -> None:
    """Drop stand-ins from a ``@tilelang.jit`` object's caches (a later real call compiles for real)."""
    cache = getattr(jit_obj, "_kernel_cache", None)
    if isinstance(cache, dict):
        for k in [k for k, v in cache.items() if isinstance(v, CompiledStandIn)]:
            del cache[k]
    form = getattr(jit_obj, "_call_form_cache", None)
    if form is not None and (
        isinstance(getattr(form, "last_kernel", None), CompiledStandIn)
        or any(isinstance(v, CompiledStandIn) for v in getattr(form, "entries", {}).values())
    ):
        form.clear()


def func_hash(func) -> str:
    """TileLang's structural hash of a prim_func, as 16 hex digits; free variables are matched by position, not identity."""
    from tilelang import tvm

    return f"{int(tvm.ir.structural_hash(func, map_free_vars=True)) & 0xFFFFFFFFFFFFFFFF:016x}"


def resolve_kernel(spec: KernelSpec, module, where: str, arch: str, *, tuned=None) -> Resolved:
    """Call ``spec.function`` of ``module`` as the library would and return what TileLang would compile.

    ``tuned`` is a tuning record's config for this arch, as ``(config, note)``.
    """
    obj = lookup_function(module, spec.function)
    if obj is NOT_FOUND:
        names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        msg = f"{where}: {spec.source.name} has no function {spec.function!r} (callables there: {', '.join(names) or 'none'})"
        raise LoweringError(msg, entry=spec.name, arch=arch)
    ns = vars(module)
    args = WalkArgs(
        auto=evaluate(spec.kwargs, ns, where),
        factory=evaluate(dict(spec.factory_args), ns, where),
        jit=evaluate(dict(spec.jit_args), ns, where),
    )
    choice = None
    top = unwrap_caches(obj)
    if tuned and not is_autotuned(top):  # a plain factory tuned over its spec's `tune` table
        from ..tune.config_choice import Choice

        choice = Choice({**args.auto, **tuned[0]}, dict(tuned[0]), f"record ({tuned[1]})", {})
        args.auto = dict(choice.kwargs)
    with intercept_compiles() as state:
        walker = Walker(spec, where, state, tuned, choice, arch)
        req, path = walker.walk(obj, args, level=0)
    if req.session != state.session:
        return Resolved(None, {}, (), None, None, path, stale=True)
    pass_configs, compile_flags = _check_options(req, spec, where, arch)
    if walker.choice is not None:
        pass_configs = {**pass_configs, **walker.choice.pass_configs}
    pass_configs.update(dict(spec.pass_configs))
    compile_flags = (*compile_flags, *spec.compile_flags)
    return Resolved(req.func, pass_configs, compile_flags, req.out_idx, walker.choice, path, req.execution_backend, req.target)


def _check_options(req: CompileRequest, spec: KernelSpec, where: str, arch: str) -> tuple[dict[Any, Any], tuple[str, ...]]:
    """The request's options tl_aot honours; an option it cannot honour is an error naming it."""
    backend = req.execution_backend
    target = req.target
    if backend not in _CUDA_BACKENDS and backend != "cutedsl":
        msg = (
            f"{where}: {spec.function} asks for execution_backend={backend!r}; "
            "tl_aot builds CUDA kernels (backends: tvm_ffi, cython, nvrtc, auto, and cutedsl)"
        )
        raise LoweringError(msg, entry=spec.name, arch=arch)
    kind, want_arch = _target_kind_arch(target)
    if kind not in ("cuda", "cutedsl", None):
        msg = f"{where}: {spec.function} asks for target {str(target)!r}; tl_aot builds CUDA kernels"
        raise LoweringError(msg, entry=spec.name, arch=arch)
    if want_arch and want_arch != arch:
        msg = (
            f"{where}: {spec.function} asks for target {str(target)!r} ({want_arch}) but this variant is built "
            f'for {arch}; build that entry for {want_arch} only (archs = ["{want_arch.removeprefix("sm_")}"])'
        )
        raise LoweringError(msg, entry=spec.name, arch=arch)
    return dict(req.pass_configs), tuple(req.compile_flags)


def _target_kind_arch(target) -> tuple[str | None, str | None]:
    """Kind and arch a kernel's own ``target=`` names (None: the build's)."""
    if target is None or (isinstance(target, str) and target.strip() in ("auto", "")):
        return None, None
    if isinstance(target, str):
        words = target.split()
        arch = next((w.split("=", 1)[1] for w in words if w.startswith(("-arch=", "--arch="))), None)
        return words[0], arch
    if isinstance(target, dict):
        return str(target.get("kind")), (str(target["arch"]) if target.get("arch") else None)
    try:
        attrs = target.attrs
        arch = str(attrs["arch"]) if "arch" in attrs and str(attrs["arch"]) else None
        return str(target.kind.name), arch
    except Exception:  # noqa: BLE001 (not a tvm Target)
        return str(target), None


@dataclass(frozen=True)
class Resolved:
    """What the build lowers for one variant: the prim_func and the options it is compiled with."""

    func: Any  # the tvm PrimFunc
    pass_configs: dict[Any, Any]
    compile_flags: tuple[str, ...]
    out_idx: Any  # the kernel's own (None: no returned outputs declared)
    choice: Choice | None  # the @autotune config chosen
    path: str  # how it was reached, e.g. "make_gemm(M=1024) -> kernel(block_m=128)"
    execution_backend: Any = None  # the request's, as the library passed it
    target: Any = None
    captured: JsonMapping | None = None  # a captured kernel's record item (its device code digests are checked after lowering)
    stale: bool = False  # a stand-in from an earlier build step came back (a cache in user code): import afresh
