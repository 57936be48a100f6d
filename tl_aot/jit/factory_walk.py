"""Walking the user's kernel object down to one compile request: factories, partials, caches, nested jits.

A resolution (:func:`tl_aot.jit.resolve.resolve_kernel`) calls each level the user's object leads to
(a factory, a ``functools.partial``, an ``lru_cache``, a ``@tilelang.jit`` or autotuned function,
a tuple or dict of kernels) with the arguments it names, as the library itself would, under
:func:`tl_aot.jit.resolve.intercept_compiles`; the :class:`Walker` follows what each level returns
until TileLang is asked for one compile, and says which level took which argument when none does.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..common.errors import LoweringError
from ..config.kernel_spec import KernelSpec
from ..config.values import spell
from .seam import CompiledStandIn, CompileRequest, jit_module

__all__ = ["Walker", "WalkArgs", "is_autotuned", "unwrap_caches"]


def _is_jit(obj) -> bool:
    return hasattr(obj, "get_tir") and hasattr(obj, "pass_configs") and hasattr(obj, "compile")


def unwrap_caches(obj):
    """``functools.lru_cache`` / ``cache`` wrappers are called through ``__wrapped__``: a cached result is never a stand-in."""
    seen = 0
    while hasattr(obj, "cache_clear") and hasattr(obj, "__wrapped__") and seen < 16:
        obj = obj.__wrapped__
        seen += 1
    return obj


def _label(obj) -> str:
    if isinstance(obj, functools.partial):
        return f"partial({_label(obj.func)})"
    if is_autotuned(obj):
        return _label(obj.jit_impl)
    wrapped = getattr(obj, "__wrapped__", None)
    if wrapped is not None and (_is_jit(wrapped) or is_autotuned(wrapped)):
        # functools.wraps finds no __name__ on a @tilelang.jit object: the wrapper keeps its own def's name
        return _label(wrapped)
    if _is_jit(obj):
        return str(getattr(obj.func, "__name__", None) or getattr(getattr(obj.func, "orig_func", None), "__name__", "jit"))
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
class WalkArgs:
    """The arguments still to place: ``auto`` go to whichever level names them; ``factory`` / ``jit`` are pinned."""

    auto: dict[str, Any]
    factory: dict[str, Any]
    jit: dict[str, Any]
    taken_by: dict[str, str] = dataclasses.field(default_factory=dict)  # auto name -> the level that took it
    swallowed: bool = False  # a factory's **kwargs saw the auto names no parameter named
    bound: dict[str, Any] = dataclasses.field(default_factory=dict)  # a functools.partial's keywords, for the level it wraps
    levels: list = dataclasses.field(default_factory=list)  # each level walked, as it describes itself (its parameters)


def is_autotuned(obj) -> bool:
    return hasattr(obj, "jit_impl") and hasattr(obj, "configs")


class Walker:
    """One resolution: calls each level with its arguments and follows what it returns."""

    def __init__(self, spec: KernelSpec, where: str, state, tuned, choice, arch: str | None = None) -> None:
        self.spec, self.where, self.state, self.tuned, self.choice, self.arch = spec, where, state, tuned, choice, arch

    def fail(self, text: str):
        """Raise the resolution's error: ``text`` after where (entry and arch), which are also its fields."""
        msg = f"{self.where}: {text}"
        raise LoweringError(msg, entry=self.spec.name, arch=self.arch)

    def walk(self, obj, args: WalkArgs, level: int):
        """Follow ``obj`` down to one compile request; returns (request, path)."""
        obj = unwrap_caches(obj)
        from tilelang import tvm

        if isinstance(obj, functools.partial):
            if obj.args:
                self.fail(f"{_label(obj)} binds positional arguments; tl_aot passes arguments by name (bind them by keyword)")
            args.bound = {**obj.keywords, **args.bound}
            return self.walk(obj.func, args, level)
        if isinstance(obj, types.MethodType) and (is_autotuned(obj.__func__) or _is_jit(obj.__func__)):
            # A @classmethod over @tilelang.jit, reached as Class.method: the class is its first argument,
            # bound by name as a functools.partial would bind it (the @tilelang.jit object takes keywords only).
            sig = _signature(obj.__func__)
            first = next(iter(sig.parameters), None) if sig is not None else None
            if first is None:
                self.fail(f"{_label(obj)} is a method that takes no parameter for its {type(obj.__self__).__name__}")
            else:
                args.bound = {first: obj.__self__, **args.bound}
            return self.walk(obj.__func__, args, level)
        if isinstance(obj, CompiledStandIn):
            self._no_leftovers(args, f"{obj.tl_aot_request.name} (compiled by the level above)")
            return obj.tl_aot_request, obj.tl_aot_request.name
        if isinstance(obj, tvm.tirx.PrimFunc):
            self._no_leftovers(args, "the T.prim_func")
            tl_jit = jit_module()

            return self._one_request(lambda: tl_jit.compile(obj)), "prim_func"
        if is_autotuned(obj) or _is_jit(obj):
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

    def _no_leftovers(self, args: WalkArgs, what: str) -> None:
        left = sorted({**args.jit, **({} if args.swallowed else args.auto)})
        if left:
            taken = "; ".join(f"{d} took {', '.join(ns)}" for d, ns in _group(args.taken_by).items())
            names = ", ".join(left)
            walked = "".join(f"{d} has no parameter {names}; " for d in args.levels)
            self.fail(f"no level takes {names}: {walked}{what} takes no further arguments" + (f" ({taken})" if taken else ""))

    def _select(self, many):
        items = list(many.items()) if isinstance(many, dict) else list(enumerate(many))
        listing = ", ".join(f"{k} ({_label(unwrap_caches(v))})" for k, v in items)
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

    def _jit(self, obj, args: WalkArgs, level: int):
        from ..tune.config_choice import choose_config

        autotuned = is_autotuned(obj)
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

    def _factory(self, fn, args: WalkArgs, level: int):
        sig = _signature(fn)
        kwargs = self._take(fn, sig, args, level=level, jit_level=False)
        self._bind(fn, sig, kwargs)
        before = len(self.state.requests)
        result = unwrap_caches(fn(**kwargs))
        here = f"{_label(fn)}({_kw(kwargs)})"
        if isinstance(result, (tuple, list, dict)):
            result = self._select(result)
        elif not (_is_jit(result) or is_autotuned(result) or isinstance(result, CompiledStandIn) or callable(result) or _is_final(result)):
            made = self.state.requests[before:]  # a kernel object of the library's own holding compiled kernels
            if len(made) == 1:
                result = CompiledStandIn(made[0])
            elif made:
                result = self._select({str(i): CompiledStandIn(r) for i, r in enumerate(made)})
        req, rest = self.walk(result, args, level + 1)
        return req, f"{here} -> {rest}"

    def _take(self, obj, sig, args: WalkArgs, *, level: int, jit_level: bool, extra_ok: bool = False) -> dict[str, Any]:
        """The arguments this level takes: pinned ones first, then the auto ones it names."""
        explicit = _explicit(sig)
        anykw = _takes_any(sig) or extra_ok
        desc = _describe(obj, sig)
        if desc not in args.levels:
            args.levels.append(desc)
        out: dict[str, Any] = dict(args.bound)  # functools.partial keywords; the build's own args override them
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

    def _unknown(self, obj, sig, args: WalkArgs):
        names = ", ".join(sorted(args.auto))
        levels = [f"{d} took {', '.join(ns)}" for d, ns in _group(args.taken_by).items()]
        levels.append(f"{_describe(obj, sig)} takes {', '.join(sorted(_explicit(sig))) or 'nothing'}")
        self.fail(f"no level takes {names}: " + "; ".join(levels) + "; set them with --arg NAME=VALUE (args = {...} in a spec)")

    def _bind(self, obj, sig, kwargs: dict[str, Any]) -> None:
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


def _kw(kwargs: Mapping[str, Any]) -> str:
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
