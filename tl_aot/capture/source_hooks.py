"""TileLang's source post-processors: process-wide callbacks that rewrite the CUDA code its JIT compiles.

``tilelang.engine.callback.register_cuda_postproc`` (and TileLang's IKET profiler, whose
``iket.session()`` registers one to instrument every kernel compiled inside it) registers a Python
function as the global ``tilelang_callback_cuda_postproc``: TileLang's codegen hands it each kernel's
CUDA source and compiles what it returns. That function is not part of the kernel's IR or options, so
a build from a record cannot rerun it: the code it would ship is not the code the JIT ran. A kernel
compiled while one is registered is recorded marked as such, and a build refuses it by name.
"""

from __future__ import annotations

__all__ = ["SOURCE_HOOKS", "active_source_hooks", "source_hook_problem"]

#: Global functions TileLang's CUDA codegen calls on a kernel's source before compiling it.
SOURCE_HOOKS = ("tilelang_callback_cuda_postproc",)


def active_source_hooks() -> tuple[str, ...]:
    """The source post-processors registered now (none when tvm-ffi is not loaded: nothing could have registered one)."""
    try:
        import tvm_ffi
    except ImportError:
        return ()
    return tuple(name for name in SOURCE_HOOKS if tvm_ffi.get_global_func(name, allow_missing=True) is not None)


def source_hook_problem() -> str:
    """Why a kernel compiled now would not rebuild into what the JIT compiled ('' when no post-processor is registered)."""
    hooks = active_source_hooks()
    if not hooks:
        return ""
    return (
        f"TileLang's CUDA source post-processor {', '.join(hooks)} was registered when it compiled (an IKET session, or "
        "tilelang.engine.callback.register_cuda_postproc): the JIT compiled that callback's rewrite of the code, which a "
        "build cannot rerun; compile it outside the callback's scope to capture it"
    )
