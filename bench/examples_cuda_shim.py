"""Run a TileLang example on a machine without a GPU far enough for its kernels to be compiled (captured).

    python bench/examples_cuda_shim.py example_x.py [ARGS...]

Many examples make their inputs first (``torch.randn(..., device="cuda")``, ``.cuda()``) and compile
their kernels from those tensors (eager ``@tilelang.jit``) or only afterwards; on a CPU-only torch
they die before any compile. This runs the script as ``__main__`` with the "cuda" device of torch's
factory functions, ``Tensor.cuda`` and ``Tensor.to`` mapped to the CPU: a compile reads shapes and
dtypes only, so TileLang's JIT is asked for the kernels the example asks for on a GPU. The script
still dies later (at a launch or a CUDA-only call), after its first kernels were recorded. Used by
``bench/examples_sweep.py`` for examples that record nothing when run as they are.
"""

from __future__ import annotations

import functools
import runpy
import sys

import torch

_FACTORIES = (
    "arange",
    "as_tensor",
    "empty",
    "empty_like",
    "empty_strided",
    "full",
    "full_like",
    "linspace",
    "ones",
    "ones_like",
    "rand",
    "rand_like",
    "randint",
    "randn",
    "randn_like",
    "randperm",
    "tensor",
    "zeros",
    "zeros_like",
)


def _cpu(device):
    """``device``, with any CUDA device replaced by the CPU."""
    return "cpu" if device is not None and str(device).startswith("cuda") else device


def _on_cpu(factory):
    """``factory`` with its ``device=`` keyword mapped by :func:`_cpu`."""

    @functools.wraps(factory)
    def call(*args, **kwargs):
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        return factory(*args, **kwargs)

    return call


def install() -> None:
    """Map CUDA to the CPU in torch's factories, ``Tensor.cuda``, ``Tensor.to`` and generators; CUDA init, syncs and seeds do nothing."""
    for name in _FACTORIES:
        setattr(torch, name, _on_cpu(getattr(torch, name)))
    tensor_to = torch.Tensor.to

    def to(self, *args, **kwargs):
        args = tuple(_cpu(a) if isinstance(a, (str, torch.device)) else a for a in args)
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        return tensor_to(self, *args, **kwargs)

    torch.Tensor.to = to  # type: ignore[method-assign]
    torch.Tensor.cuda = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
    for name in ("init", "synchronize", "manual_seed", "manual_seed_all", "empty_cache"):
        setattr(torch.cuda, name, _no_op(name))
    torch.Generator = _cpu_generator_type()  # type: ignore[misc]


def _cpu_generator_type() -> type:
    """``torch.Generator`` whose ``device="cuda"`` is the CPU (seeded index draws: ``randperm(generator=g)``).

    A subclass, not a function: torch itself spells ``torch.Generator | None`` and checks ``isinstance``.
    """
    base = torch.Generator

    class CpuGenerator(base):  # type: ignore[misc,valid-type]
        def __new__(cls, device="cpu"):
            return base.__new__(cls, device=_cpu(device))

        def __init__(self, device="cpu") -> None:
            pass

    return CpuGenerator


def _no_op(name: str):
    """What ``torch.cuda.<name>`` does here: nothing (there is no GPU).

    One function per name: torch._dynamo keeps a rule per torch function (``synchronize`` is traced, the
    seeding ones skipped) and refuses, at its first use, one function object that two rules claim.
    """

    def nothing(*_args, **_kwargs) -> None:
        return None

    nothing.__name__ = nothing.__qualname__ = f"cuda_{name}_on_cpu"
    return nothing


def main() -> None:
    """Run ``argv[1]`` as ``__main__`` with the rest as its arguments."""
    install()
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, ".")
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
