"""The one seam between tl_aot and TileLang's JIT: the compile request, and the one interception of it.

Every JIT path (``@tilelang.jit`` calls, ``JITImpl.compile``, ``tilelang.compile``,
``par_compile``) reaches ``tilelang.jit.cached`` after TileLang merged the prim_func's own
``out_idx`` / ``pass_configs`` / ``compile_flags``: that function, and ``JITImpl.compile`` (to
know which ``@tilelang.jit`` call a request came from), are the only names of TileLang's that
tl_aot replaces, and only here. Clients -- resolving a kernel at build time (:mod:`tl_aot.jit.resolve`),
capturing a workload (:mod:`tl_aot.capture.recorder`), serving prebuilt kernels (:mod:`tl_aot.serving.active`) --
each :func:`install` an :class:`Interception` of their own; the seam builds one
:class:`CompileRequest` per compile and hands it to the most recently installed interception,
whose ``proceed`` passes it on to the one installed before it and finally to TileLang. When the
last interception is removed, TileLang's own functions are put back.

TileLang's autotuner is the other seam: ``tilelang.autotuner.AutoTuner.run`` (which both
``@autotune`` functions and ``AutoTuner.from_kernel(...).run()`` reach, once per tuning, before
any candidate is compiled) is replaced the same way, for interceptions with an ``on_tune``: each
may answer the tuning itself (serving a recorded choice) or ``proceed`` to TileLang's tuner
(capture records what it chose).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..common.errors import LoweringError
from .import_hooks import on_import

__all__ = [
    "CompileRequest",
    "JitCall",
    "Interception",
    "CompiledStandIn",
    "StandInUsed",
    "install",
    "uninstall",
    "intercepting",
    "last_jit_call",
    "resolving",
    "jit_module",
]


@dataclass(frozen=True)
class CompileRequest:
    """One call of TileLang's compile, as it reached ``tilelang.jit.cached`` (attributes already merged)."""

    func: Any  # tvm PrimFunc
    out_idx: Any  # as TileLang was given it: None, an index or a list of them
    execution_backend: Any
    target: Any  # a target string, a tvm Target or None
    target_host: Any
    pass_configs: dict[Any, Any]  # TileLang's keys (strings or PassConfigKey) -> values
    compile_flags: tuple[str, ...]
    session: int = 0

    @classmethod
    def of(cls, func, out_idx=None, *, session: int = 0, **kwargs) -> CompileRequest:
        """The request for ``cached(func, out_idx, **kwargs)`` as TileLang calls it (flags as a tuple of strings)."""
        flags = kwargs.get("compile_flags")
        flags = [flags] if isinstance(flags, str) else list(flags or ())
        return cls(
            func,
            out_idx,
            kwargs.get("execution_backend"),
            kwargs.get("target"),
            kwargs.get("target_host"),
            dict(kwargs.get("pass_configs") or {}),
            tuple(str(f) for f in flags),
            session,
        )

    @property
    def name(self) -> str:
        attrs = self.func.attrs or {}
        return str(attrs["global_symbol"]) if "global_symbol" in attrs else "main"


@dataclass(frozen=True)
class JitCall:
    """A ``@tilelang.jit`` object's ``compile`` in progress: the object and the arguments it was called with."""

    jit: Any  # TileLang's JITImpl
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def __iter__(self) -> Iterator[Any]:  # unpacks as (jit, args, kwargs)
        return iter((self.jit, self.args, self.kwargs))


@dataclass(frozen=True, eq=False)
class Interception:
    """What one client does with TileLang's JIT.

    ``on_request(request, jit_call, proceed)`` answers one compile: return ``proceed()`` (the
    interceptions installed earlier, then TileLang) or anything standing in for a compiled kernel.
    ``jit_call`` is the ``@tilelang.jit`` compile the request came through (None for
    ``tilelang.compile``). ``on_jit(jit_call)``, if given, is told of each ``@tilelang.jit``
    compile before it runs. ``on_tune(tuner, proceed)``, if given, answers one run of TileLang's
    autotuner (``tuner`` is the ``AutoTuner``, about to run): ``proceed()`` runs the interceptions
    installed earlier, then TileLang's tuner, and returns its ``AutotuneResult``.
    ``on_compile(jit_call, proceed)``, if given, answers a ``@tilelang.jit`` compile before
    TileLang builds its prim_func: return ``proceed()`` (the interceptions installed earlier, then
    TileLang's ``JITImpl.compile``, whose request reaches ``on_request``) or a kernel.
    """

    on_request: Callable
    on_jit: Optional[Callable] = None
    name: str = ""
    on_tune: Optional[Callable] = None
    on_compile: Optional[Callable] = None


class StandInUsed(LoweringError, AttributeError):
    """A compiled kernel's attribute was used at build time (``hasattr`` probes see it as absent)."""


class CompiledStandIn:
    """What TileLang's compile returns while tl_aot resolves a kernel: the request, never a compiled kernel.

    A cache of the user's (an ``lru_cache`` over a private helper, say) may keep it past the build;
    called or used once no resolve is running, it compiles the request with TileLang, as the JIT
    would have, and stands for that kernel.
    """

    def __init__(self, request: CompileRequest, unrunnable: str = "") -> None:
        self.tl_aot_request = request
        self.tl_aot_kernel = None
        # Why no kernel can stand behind it in this process, when that is not a build
        # (``capture --device``: nothing is compiled, there is no GPU); errors say it instead.
        self.tl_aot_unrunnable = unrunnable

    def __call__(self, *args, **kwargs):
        return self._tl_aot_compiled(None)(*args, **kwargs)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._tl_aot_compiled(name), name)

    def _tl_aot_compiled(self, attribute):
        """TileLang's kernel for the request; while a resolve runs (or nothing compiles), the error that tl_aot never runs kernels."""
        if self.tl_aot_kernel is None and not resolving() and not self.tl_aot_unrunnable:
            # The request is what reached ``cached``, function attributes already merged (a
            # ``T.empty`` return's out_idx, function-level flags): replayed through ``cached``, not
            # ``tilelang.compile``, which would merge them again and refuse the out_idx it made.
            req = self.tl_aot_request
            kernel = jit_module().cached(
                req.func,
                out_idx=req.out_idx,
                execution_backend=req.execution_backend,
                target=req.target,
                target_host=req.target_host,
                pass_configs=dict(req.pass_configs),
                compile_flags=list(req.compile_flags),
            )
            if not isinstance(kernel, CompiledStandIn):  # an interception that compiles nothing stood in again
                self.tl_aot_kernel = kernel
        if self.tl_aot_kernel is None:
            what = "was called" if attribute is None else f": .{attribute} was used"
            if self.tl_aot_unrunnable:
                msg = f"kernel {self.tl_aot_request.name!r}{what if attribute else ' ' + what}, but {self.tl_aot_unrunnable}"
                raise (LoweringError if attribute is None else StandInUsed)(msg)
            if attribute is None:
                msg = (
                    f"kernel {self.tl_aot_request.name!r} {what} while tl_aot built it; tl_aot builds kernels ahead of time "
                    "and never runs them at build time (move warm-up or test calls out of the factory)"
                )
                raise LoweringError(msg)
            msg = f"kernel {self.tl_aot_request.name!r}{what} while tl_aot built it; tl_aot only takes what TileLang would compile"
            raise StandInUsed(msg)
        return self.tl_aot_kernel

    def __repr__(self) -> str:
        return f"<tl_aot stand-in for compiled kernel {self.tl_aot_request.name!r}>"


def resolving() -> bool:
    """Whether tl_aot is resolving a kernel in this process (a ``resolve`` interception is installed)."""
    with _lock:
        return any(i.name == "resolve" for i in _installed)


_lock = threading.RLock()
_installed: list = []  # Interception, oldest first
_real: dict[str, Callable[..., Any]] = {}  # TileLang's own functions while patched: "cached", "compile"
_local = threading.local()


def jit_module():
    """The module ``tilelang.jit`` (the package attribute of that name is the decorator)."""
    return importlib.import_module("tilelang.jit")


def last_jit_call() -> JitCall | None:
    """The ``@tilelang.jit`` compile running in this thread (None outside one, or for ``tilelang.compile``)."""
    return getattr(_local, "call", None)


def install(interception: Interception, tl_jit=None) -> None:
    """Put ``interception`` in front of the ones installed (TileLang's functions are patched on the first)."""
    tl_jit = tl_jit or jit_module()
    with _lock:
        if not _real:
            _real["cached"], _real["compile"] = tl_jit.cached, tl_jit.JITImpl.compile
            tl_jit.cached = _cached
            tl_jit.JITImpl.compile = _compile
        _installed.append(interception)
    if interception.on_tune is not None:
        on_import(_TUNER_MODULE, _patch_tuner)


def uninstall(interception: Interception) -> None:
    """Remove ``interception``; with none left, TileLang's own functions are put back."""
    with _lock:
        if interception in _installed:
            _installed.reverse()
            _installed.remove(interception)  # the latest install of it
            _installed.reverse()
        if not _installed and _real:
            tl_jit = jit_module()
            tl_jit.cached, tl_jit.JITImpl.compile = _real.pop("cached"), _real.pop("compile")
        if not any(i.on_tune is not None for i in _installed) and "run" in _real:
            importlib.import_module(_TUNER_MODULE).AutoTuner.run = _real.pop("run")


class intercepting:  # noqa: N801 (used as a context manager, like contextlib's)
    """``with intercepting(interception):`` installs it for the block."""

    def __init__(self, interception: Interception) -> None:
        self.interception = interception

    def __enter__(self) -> Interception:
        install(self.interception)
        return self.interception

    def __exit__(self, *exc) -> None:
        uninstall(self.interception)


def _compile(self, *args, **kwargs):
    """``JITImpl.compile``: tells the interceptions, lets them answer, else runs TileLang's remembering which call compiles."""
    call = JitCall(self, args, dict(kwargs))
    with _lock:
        chain = list(_installed)
        real = _real.get("compile")
    for icp in chain:
        if icp.on_jit is not None:
            icp.on_jit(call)
    answering = [icp for icp in chain if icp.on_compile is not None]

    def at(i: int):
        if i >= 0:
            return answering[i].on_compile(call, lambda: at(i - 1))
        before = getattr(_local, "call", None)
        _local.call = call
        try:
            return (real or jit_module().JITImpl.compile)(self, *args, **kwargs)
        finally:
            _local.call = before

    return at(len(answering) - 1)


def _cached(func=None, out_idx=None, *args, **kwargs):
    """``tilelang.jit.cached``: one request, answered by the newest interception (which may proceed to older ones)."""
    with _lock:
        chain = list(_installed)
        real = _real.get("cached")
    req = CompileRequest.of(func, out_idx, **kwargs)
    call = last_jit_call()

    def at(i: int):
        if i < 0:
            return (real or jit_module().cached)(func, out_idx, *args, **kwargs)
        return chain[i].on_request(req, call, lambda: at(i - 1))

    return at(len(chain) - 1)


_TUNER_MODULE = "tilelang.autotuner.tuner"


def _patch_tuner(tuner_module) -> None:
    """Replace ``AutoTuner.run`` (once, while an interception with ``on_tune`` is installed)."""
    with _lock:
        if "run" in _real or not any(i.on_tune is not None for i in _installed):
            return
        tuner_cls = getattr(tuner_module, "AutoTuner", None)
        if tuner_cls is None or not callable(getattr(tuner_cls, "run", None)):
            return  # another TileLang layout: its tuner runs unintercepted
        _real["run"] = tuner_cls.run
        tuner_cls.run = _run


def _run(self, *args, **kwargs):
    """``AutoTuner.run``: one tuning, answered by the newest interception with ``on_tune`` (which may proceed)."""
    with _lock:
        chain = [i for i in _installed if i.on_tune is not None]
        real = _real.get("run")

    def at(i: int):
        if i < 0:
            return (real or importlib.import_module(_TUNER_MODULE).AutoTuner.run)(self, *args, **kwargs)
        return chain[i].on_tune(self, lambda: at(i - 1))

    return at(len(chain) - 1)
