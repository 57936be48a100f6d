"""A prebuilt entry standing in for TileLang's compiled kernel: what serving returns for a compile it answers.

Called like ``tilelang.jit.JITKernel`` (``out_idx`` outputs returned, in the order asked), it
answers ``out_idx`` as ``JITKernel`` does (legalised: non-negative positions), carries the request's
options and, when TileLang's autotuner asked for it, the tuning it answered; its prim_func is built
by TileLang only if asked for (a call served from its ``@tilelang.jit`` call key is never traced).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .profiler import result_idx

if TYPE_CHECKING:
    from ..common.metadata import LoweredEntry
    from ..jit.seam import CompileRequest
    from ..runtime.loader import Library

__all__ = ["ServedKernel", "legalised_out_idx"]


def legalised_out_idx(out_idx: Any, entry: LoweredEntry) -> list[int]:
    """``out_idx`` as TileLang's adapter legalises it (``JITKernel.out_idx``): non-negative positions, in the order given.

    ``None`` is the entry's own outputs (a ``T.empty`` return's, which TileLang reads from the
    prim_func); a name (a spec file's spelling) is that parameter's position.
    """
    if out_idx is None:
        return result_idx(entry)
    names = [p.name for p in entry.params]
    n = len(names)
    items = [out_idx] if isinstance(out_idx, (int, str)) else list(out_idx)
    return [names.index(i) if isinstance(i, str) else int(i) + n if int(i) < 0 else int(i) for i in items]


class ServedKernel:
    """A prebuilt entry standing in for ``tilelang.jit.JITKernel``: same call forms (``out_idx`` outputs returned in its order)."""

    def __init__(
        self, fn: Callable[..., Any], entry: str, library: Library, request: CompileRequest, trace: Callable[[], Any] | None = None
    ) -> None:
        self._library_fn = fn
        asked = request.out_idx
        several = isinstance(asked, (list, tuple)) and len(asked) > 1
        self._fn = self._first_call if several else fn  # outputs asked out of order are put in that order on first call
        self.entry = entry
        self.library = library
        self._func = request.func
        self._trace = trace  # served from its @tilelang.jit call: the prim_func is built only if asked for
        self._asked_out_idx = asked
        self._out_idx: list[int] | None = None  # legalised against the manifest on first use, not at lookup
        self.pass_configs = dict(request.pass_configs)
        self.compile_flags = list(request.compile_flags)
        self.execution_backend = "tl_aot"
        self.config: Any = None
        self.ref_latency: Any = None
        self.adapter = None  # no TileLang adapter: callers that look for one launch through __call__
        self.latency: Any = None  # set when it answers TileLang's autotuner

    @property
    def out_idx(self) -> list[int]:
        """As ``JITKernel.out_idx``: the outputs' positions among the parameters, non-negative, in the order asked."""
        return self._out_idx if self._out_idx is not None else self._outputs(self.library.signature(self.entry))

    def _outputs(self, entry: LoweredEntry) -> list[int]:
        """``out_idx`` legalised against ``entry`` (this kernel's manifest entry), once."""
        if self._out_idx is None:
            self._out_idx = legalised_out_idx(self._asked_out_idx, entry)
        return self._out_idx

    def _first_call(self, *args: Any) -> Any:
        """The first call of a kernel asked for several outputs: from then on, its outputs in ``out_idx``'s order.

        The library returns its outputs in parameter order; TileLang's JIT returns them in the order
        ``out_idx`` names them (``out_idx=[-1, -2]``: the last parameter first).
        """
        in_order = sorted(self.out_idx)
        library_fn = self._library_fn
        self._fn = library_fn
        if self.out_idx != in_order:
            picks = [in_order.index(position) for position in self.out_idx]  # each asked output's place in the library's tuple

            def reordered(*call_args: Any) -> Any:
                outs = library_fn(*call_args)
                return outs if outs is None else tuple(outs[i] for i in picks)

            self._fn = reordered
        return self._fn(*args)

    @property
    def prim_func(self) -> Any:
        """The prim_func this kernel was built from (traced by TileLang on first use when the call was served untraced)."""
        if self._func is None and self._trace is not None:
            self._func = self._trace()
        return self._func

    def update_tuner_result(self, latency: Any, config: Any, ref_latency: Any) -> ServedKernel:
        """As ``JITKernel.update_tuner_result``: the tuning this kernel answered (recorded, not measured here)."""
        self.latency, self.config, self.ref_latency = latency, config, ref_latency
        return self

    def get_tuner_result(self) -> dict[str, Any]:
        """As ``JITKernel.get_tuner_result``."""
        return {"latency": self.latency, "config": self.config, "ref_latency": self.ref_latency}

    def __call__(self, *args: Any) -> Any:
        return self._fn(*args)

    @property
    def params(self) -> list[Any]:
        """As ``JITKernel.params``: TileLang's ``KernelParam`` of each parameter, from the library's manifest."""
        from .profiler import kernel_params

        return kernel_params(self.library.signature(self.entry))

    def get_profiler(self, tensor_supply_type: Any = None) -> Any:
        """As ``JITKernel.get_profiler``: TileLang's ``Profiler`` (``assert_allclose``, ``do_bench``) launching this served kernel."""
        from .profiler import profiler_of

        entry = self.library.signature(self.entry)
        return profiler_of(self, entry, tensor_supply_type, outputs=self._outputs(entry))

    def run_once(self, func: Callable[..., Any] | None = None) -> Any:
        """As ``JITKernel.run_once``: one launch on inputs TileLang's profiler supplies (or ``func`` on them)."""
        return self.get_profiler().run_once(func)

    def get_kernel_source(self, *args: object, **kwargs: object) -> str:
        """The CUDA source is not shipped; the manifest names what was built."""
        entry = self.library.signature(self.entry)
        return f"// served by tl_aot from {self.library.path}: {entry.signature()}"

    def get_host_source(self) -> str:
        """As ``JITKernel.get_host_source``: the host side is the library's launcher, named as the kernel source is."""
        return self.get_kernel_source()

    @property
    def kernel_source(self) -> str:
        """As ``JITKernel.kernel_source``."""
        return self.get_kernel_source()

    @property
    def host_source(self) -> str:
        """As ``JITKernel.host_source``."""
        return self.get_host_source()

    def __repr__(self) -> str:
        return f"<tl_aot.ServedKernel {self.entry} from {self.library.path.name}>"
