"""A prebuilt entry standing in for TileLang's compiled kernel: what serving returns for a compile it answers.

Called like ``tilelang.jit.JITKernel`` (``out_idx`` outputs returned), it carries the request's
options and, when TileLang's autotuner asked for it, the tuning it answered; its prim_func is built
by TileLang only if asked for (a call served from its ``@tilelang.jit`` call key is never traced).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..jit.seam import CompileRequest
    from ..runtime.loader import Library

__all__ = ["ServedKernel"]


class ServedKernel:
    """A prebuilt entry standing in for ``tilelang.jit.JITKernel``: same call forms (``out_idx`` outputs returned)."""

    def __init__(
        self, fn: Callable[..., Any], entry: str, library: Library, request: CompileRequest, trace: Callable[[], Any] | None = None
    ) -> None:
        self._fn = fn
        self.entry = entry
        self.library = library
        self._func = request.func
        self._trace = trace  # served from its @tilelang.jit call: the prim_func is built only if asked for
        self.out_idx = request.out_idx
        self.pass_configs = dict(request.pass_configs)
        self.compile_flags = list(request.compile_flags)
        self.execution_backend = "tl_aot"
        self.config: Any = None
        self.ref_latency: Any = None
        self.adapter = None  # no TileLang adapter: callers that look for one launch through __call__
        self.latency: Any = None  # set when it answers TileLang's autotuner

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

        return profiler_of(self, self.library.signature(self.entry), tensor_supply_type)

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
