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
import functools
import hashlib
import inspect
import itertools
import threading
from dataclasses import dataclass

from .errors import LoweringError
from .jit_seam import CompiledStandIn, CompileRequest, Interception, StandInUsed, install, jit_module, uninstall
from .spec import KernelSpec
from .values import evaluate, spell

__all__ = [
    "CompileRequest",
    "CompiledStandIn",
    "StandInUsed",
    "Resolved",
    "intercept_compiles",
    "resolve_kernel",
    "options_digest",
    "func_hash",
]

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

    The interception is :mod:`tl_aot.jit_seam`'s; on exit the stand-ins are removed from the JIT
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


@dataclass(frozen=True)
class Resolved:
    """What the build lowers for one variant: the prim_func and the options it is compiled with."""

    func: object
    pass_configs: dict
    compile_flags: tuple
    out_idx: object  # the kernel's own (None: no returned outputs declared)
    choice: object  # autotune.Choice or None
    path: str  # how it was reached, e.g. "make_gemm(M=1024) -> kernel(block_m=128)"
    execution_backend: object = None  # the request's, as the library passed it
    target: object = None
    captured: object = None  # a captured kernel's record item (its device code digests are checked after lowering)
    stale: bool = False  # a stand-in from an earlier build step came back (a cache in user code): import afresh


def func_hash(func) -> str:
    """TileLang's structural hash of a prim_func, as 16 hex digits; free variables are matched by position, not identity."""
    from tilelang import tvm

    return f"{int(tvm.ir.structural_hash(func, map_free_vars=True)) & 0xFFFFFFFFFFFFFFFF:016x}"


def options_digest(pass_configs: dict, compile_flags) -> str:
    """A short digest of the options a kernel is compiled with (shown by ``inspect``, compared by tests)."""
    text = repr((sorted((_key(k), spell(_plain(v))) for k, v in pass_configs.items()), list(compile_flags)))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _plain(v):
    """TVM containers and scalars as Python values (pass configs arrive as either)."""
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    for conv in (int, float, str):
        if type(v).__name__ in ("IntImm", "Integer") and conv is int:
            return int(v)
    if hasattr(v, "items"):
        return {str(k): _plain(x) for k, x in v.items()}
    if hasattr(v, "__iter__"):
        return [_plain(x) for x in v]
    return str(v)


def plain_pass_configs(pc: dict) -> dict:
    """Pass configs as JSON-able Python values under their string keys (``tl.disable_tma_lower``), sorted."""
    return dict(sorted((_key(k), _plain(v)) for k, v in pc.items()))


def _key(k) -> str:
    return str(getattr(k, "value", k))


# ---------------------------------------------------------------------------------------------
# Walking the user's object


def _is_jit(obj) -> bool:
    return hasattr(obj, "get_tir") and hasattr(obj, "pass_configs") and hasattr(obj, "compile")


def _unwrap_caches(obj):
    """``functools.lru_cache`` / ``cache`` wrappers are called through ``__wrapped__``: a cached result is never a stand-in."""
    seen = 0
    while hasattr(obj, "cache_clear") and hasattr(obj, "__wrapped__") and seen < 16:
        obj = obj.__wrapped__
        seen += 1
    return obj


def _label(obj) -> str:
    if isinstance(obj, functools.partial):
        return f"partial({_label(obj.func)})"
    if _is_jit(obj):
        return getattr(obj.func, "__name__", None) or getattr(getattr(obj.func, "orig_func", None), "__name__", "jit")
    return getattr(obj, "__name__", type(obj).__name__)


def _signature(obj):
    target = obj.jit_impl if hasattr(obj, "jit_impl") and hasattr(obj, "configs") else obj
    if _is_jit(target):
        return target.signature
    try:
        return inspect.signature(target)
    except (TypeError, ValueError):
        return None


def _explicit(sig) -> set:
    if sig is None:
        return set()
    return {n for n, p in sig.parameters.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL, p.POSITIONAL_ONLY)}


def _takes_any(sig) -> bool:
    return sig is None or any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())


def _describe(obj, sig) -> str:
    if sig is None:
        return f"{_label(obj)}(...)"
    return f"{_label(obj)}{sig}"


@dataclass
class _Args:
    """The arguments still to place: ``auto`` go to whichever level names them; ``factory`` / ``jit`` are pinned."""

    auto: dict
    factory: dict
    jit: dict
    taken_by: dict = dataclasses.field(default_factory=dict)  # auto name -> the level that took it
    swallowed: bool = False  # a factory's **kwargs saw the auto names no parameter named
    bound: dict = dataclasses.field(default_factory=dict)  # a functools.partial's keywords, for the level it wraps
    levels: list = dataclasses.field(default_factory=list)  # each level walked, as it describes itself (its parameters)


def resolve_kernel(spec: KernelSpec, module, where: str, arch: str, *, tuned=None) -> Resolved:
    """Call ``spec.function`` of ``module`` as the library would and return what TileLang would compile.

    ``tuned`` is a tuning record's config for this arch, as ``(config, note)``.
    """
    obj = getattr(module, spec.function, None)
    if obj is None:
        names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        msg = f"{where}: {spec.source.name} has no function {spec.function!r} (callables there: {', '.join(names) or 'none'})"
        raise LoweringError(msg, entry=spec.name, arch=arch)
    ns = vars(module)
    args = _Args(
        auto=evaluate(spec.kwargs, ns, where),
        factory=evaluate(dict(spec.factory_args), ns, where),
        jit=evaluate(dict(spec.jit_args), ns, where),
    )
    choice = None
    top = _unwrap_caches(obj)
    if tuned and not _is_autotuned(top):  # a plain factory tuned over its spec's `tune` table
        from .autotune import Choice

        choice = Choice({**args.auto, **tuned[0]}, dict(tuned[0]), f"record ({tuned[1]})", {})
        args.auto = dict(choice.kwargs)
    with intercept_compiles() as state:
        walker = _Walker(spec, where, state, tuned, choice, arch)
        req, path = walker.walk(obj, args, level=0)
    if req.session != state.session:
        return Resolved(None, {}, (), None, None, path, stale=True)
    pass_configs, compile_flags = _check_options(req, spec, where, arch)
    if walker.choice is not None:
        pass_configs = {**pass_configs, **walker.choice.pass_configs}
    pass_configs.update(dict(spec.pass_configs))
    compile_flags = (*compile_flags, *spec.compile_flags)
    return Resolved(req.func, pass_configs, compile_flags, req.out_idx, walker.choice, path, req.execution_backend, req.target)


def _is_autotuned(obj) -> bool:
    return hasattr(obj, "jit_impl") and hasattr(obj, "configs")


def _check_options(req: CompileRequest, spec: KernelSpec, where: str, arch: str) -> tuple[dict, tuple]:
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


class _Walker:
    """One resolution: calls each level with its arguments and follows what it returns."""

    def __init__(self, spec: KernelSpec, where: str, state: _Interception, tuned, choice, arch: str | None = None) -> None:
        self.spec, self.where, self.state, self.tuned, self.choice, self.arch = spec, where, state, tuned, choice, arch

    def fail(self, text: str):
        """Raise the resolution's error: ``text`` after where (entry and arch), which are also its fields."""
        msg = f"{self.where}: {text}"
        raise LoweringError(msg, entry=self.spec.name, arch=self.arch)

    def walk(self, obj, args: _Args, level: int):
        """Follow ``obj`` down to one compile request; returns (request, path)."""
        obj = _unwrap_caches(obj)
        from tilelang import tvm

        if isinstance(obj, functools.partial):
            if obj.args:
                self.fail(f"{_label(obj)} binds positional arguments; tl_aot passes arguments by name (bind them by keyword)")
            args.bound = {**obj.keywords, **args.bound}
            return self.walk(obj.func, args, level)
        if isinstance(obj, CompiledStandIn):
            self._no_leftovers(args, f"{obj.tl_aot_request.name} (compiled by the level above)")
            return obj.tl_aot_request, obj.tl_aot_request.name
        if isinstance(obj, tvm.tirx.PrimFunc):
            self._no_leftovers(args, "the T.prim_func")
            tl_jit = jit_module()

            return self._one_request(lambda: tl_jit.compile(obj)), "prim_func"
        if _is_autotuned(obj) or _is_jit(obj):
            return self._jit(obj, args, level)
        if isinstance(obj, (tuple, list, dict)):
            return self.walk(self._select(obj), args, level)
        if callable(obj):
            return self._factory(obj, args, level)
        self.fail(f"{self.spec.function} gave a {type(obj).__name__}, not a T.prim_func, a @tilelang.jit function or a factory of one")
        return None

    def _one_request(self, call) -> CompileRequest:
        before = len(self.state.requests)
        result = call()
        if isinstance(result, CompiledStandIn):
            return result.tl_aot_request
        new = self.state.requests[before:]
        if len(new) != 1:
            self.fail(f"expected one compile, TileLang was asked for {len(new)}")
        return new[0]

    def _no_leftovers(self, args: _Args, what: str) -> None:
        left = sorted({**args.jit, **({} if args.swallowed else args.auto)})
        if left:
            taken = "; ".join(f"{d} took {', '.join(ns)}" for d, ns in _group(args.taken_by).items())
            names = ", ".join(left)
            walked = "".join(f"{d} has no parameter {names}; " for d in args.levels)
            self.fail(f"no level takes {names}: {walked}{what} takes no further arguments" + (f" ({taken})" if taken else ""))

    def _select(self, many):
        items = list(many.items()) if isinstance(many, dict) else list(enumerate(many))
        listing = ", ".join(f"{k} ({_label(_unwrap_caches(v))})" for k, v in items)
        sel = self.spec.select
        if not sel:
            self.fail(
                f'{self.spec.function} gives {len(items)} kernels ({listing}); choose one with select = "<key>" '
                "in the entry (--select on the command line), one entry per kernel"
            )
        for k, v in items:
            if str(k) == sel:
                return v
        self.fail(f"select = {sel!r} is none of the kernels {self.spec.function} gives: {listing}")
        return None

    def _jit(self, obj, args: _Args, level: int):
        from .autotune import choose_config

        autotuned = _is_autotuned(obj)
        jit = obj.jit_impl if autotuned else obj
        sig = jit.signature
        # an eager-style kernel (tensor annotations, T.const dims) takes its dims as extra keywords
        eager = bool(getattr(jit.func, "tensor_args", None))
        kwargs = self._take(jit, sig, args, level=level, jit_level=True, extra_ok=eager)
        if autotuned:
            rec = self.tuned[0] if self.tuned else None
            choice = choose_config(obj, kwargs, function=_label(jit), where=self.where, record=rec)
            if choice.source == "record":
                choice = dataclasses.replace(choice, source=f"record ({self.tuned[1]})")
            self.choice = choice
            kwargs = choice.kwargs
        self._no_leftovers(args, _describe(jit, sig))
        if not eager:  # an eager kernel's tensors are annotations, bound by TileLang itself
            self._bind(jit, sig, kwargs)
        req = self._one_request(lambda: jit.compile(**kwargs))
        return req, f"{_label(jit)}({_kw(kwargs)})"

    def _factory(self, fn, args: _Args, level: int):
        sig = _signature(fn)
        kwargs = self._take(fn, sig, args, level=level, jit_level=False)
        self._bind(fn, sig, kwargs)
        before = len(self.state.requests)
        result = _unwrap_caches(fn(**kwargs))
        here = f"{_label(fn)}({_kw(kwargs)})"
        if isinstance(result, (tuple, list, dict)):
            result = self._select(result)
        elif not (_is_jit(result) or _is_autotuned(result) or isinstance(result, CompiledStandIn) or callable(result) or _is_final(result)):
            made = self.state.requests[before:]  # a kernel object of the library's own holding compiled kernels
            if len(made) == 1:
                result = CompiledStandIn(made[0])
            elif made:
                result = self._select({str(i): CompiledStandIn(r) for i, r in enumerate(made)})
        req, rest = self.walk(result, args, level + 1)
        return req, f"{here} -> {rest}"

    def _take(self, obj, sig, args: _Args, *, level: int, jit_level: bool, extra_ok: bool = False) -> dict:
        """The arguments this level takes: pinned ones first, then the auto ones it names."""
        explicit = _explicit(sig)
        anykw = _takes_any(sig) or extra_ok
        desc = _describe(obj, sig)
        if desc not in args.levels:
            args.levels.append(desc)
        out: dict = dict(args.bound)  # functools.partial keywords; the build's own args override them
        args.bound = {}
        pinned = []
        if level == 0:
            pinned.append(("factory_args", args.factory))
        if jit_level:
            pinned.append(("jit_args", args.jit))
        fixed = set()
        for key, given in pinned:
            for n, v in given.items():
                if n not in explicit and not anykw:
                    self.fail(f"{key} {n!r}: {desc} has no parameter {n!r}")
                out[n] = v
                fixed.add(n)
            given.clear()
        for n in list(args.taken_by):
            if level > 0 and n in explicit and n not in fixed:
                self.fail(
                    f"{n!r} is a parameter of both {args.taken_by[n]} and {desc}; say which takes it: "
                    f"factory_args = {{{n} = ...}} for the first, jit_args = {{{n} = ...}} for the second "
                    "(--factory-arg / --jit-arg on the command line), or both"
                )
        for n in list(args.auto):
            if n in explicit and n not in fixed:
                out[n] = args.auto.pop(n)
                args.taken_by[n] = desc
        if anykw and args.auto:
            out.update({n: v for n, v in args.auto.items() if n not in fixed})  # **kwargs sees them; deeper levels too
            args.swallowed = True
        if jit_level and args.auto and not args.swallowed:
            self._unknown(obj, sig, args)
        return out

    def _unknown(self, obj, sig, args: _Args):
        names = ", ".join(sorted(args.auto))
        levels = [f"{d} took {', '.join(ns)}" for d, ns in _group(args.taken_by).items()]
        levels.append(f"{_describe(obj, sig)} takes {', '.join(sorted(_explicit(sig))) or 'nothing'}")
        self.fail(f"no level takes {names}: " + "; ".join(levels) + "; set them with --arg NAME=VALUE (args = {...} in a spec)")

    def _bind(self, obj, sig, kwargs: dict) -> None:
        if sig is None:
            return
        try:
            sig.bind(**kwargs)
        except TypeError as e:
            names = ", ".join(p.name + ("" if p.default is inspect.Parameter.empty else f"={p.default!r}") for p in sig.parameters.values())
            self.fail(
                f"{_label(obj)}({names}) cannot be called with {kwargs or 'no arguments'}: {e}; "
                "set them with --arg NAME=VALUE (or args = {...} in a spec file)"
            )


def _is_final(obj) -> bool:
    from tilelang import tvm

    return isinstance(obj, tvm.tirx.PrimFunc)


def _kw(kwargs: dict) -> str:
    text = ", ".join(f"{k}={_short(v)}" for k, v in kwargs.items())
    return text if len(text) < 200 else text[:197] + "..."


def _short(v) -> str:
    try:
        return spell(v)
    except Exception:  # noqa: BLE001 (a label only)
        return type(v).__name__


def _group(taken: dict) -> dict:
    out: dict = {}
    for n, d in taken.items():
        out.setdefault(d, []).append(n)
    return out
