"""Edits of the CUDA source TileLang generates, and checks of it against the lowered kernels.

The only place tl_aot reads generated C++ as text: keyword-named kernel parameters are renamed
(nvcc refuses them), and every lowered kernel must be a ``__global__`` of the source with the
parameters the launcher passes.
"""

from __future__ import annotations

import re

from .errors import LoweringError

__all__ = ["check_source_kernels", "rename_keyword_params"]

_GLOBAL_RE = re.compile(r'(?:extern\s+"C"\s+)?__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(([^)]*)\)')


def check_source_kernels(kernels, source: str, where: str) -> None:
    """A hand-written ``__global__`` (T.CUDASourceCodeKernel) must take exactly the arguments passed."""
    decls = {m.group(1): m.group(2) for m in _GLOBAL_RE.finditer(source)}
    for k in kernels:
        decl = decls.get(k.name)
        if decl is None:
            continue
        arity = 0 if not decl.strip() or decl.strip() == "void" else decl.count(",") + 1
        if arity != len(k.args):
            passed = ", ".join(a.name for a in k.args) or "nothing"
            msg = (
                f"{where}: CUDA kernel {k.name} declares {arity} parameter(s) ({decl.strip()}) but the "
                f"prim_func passes {len(k.args)} ({passed}); TileLang passes only the prim_func parameters "
                "the launch uses, in order: make the __global__ signature match"
            )
            raise LoweringError(msg)


_KEYWORD_PARAMS = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?\w+\s*\(([^)]*)\)")


def rename_keyword_params(source: str) -> str:
    """Rename kernel parameters that are C++ keywords (``new``, ``this``, ``delete``) in TileLang's CUDA source.

    TileLang accepts such names and spells them verbatim in the ``__global__`` signature and body,
    which nvcc refuses. The rename is confined to each kernel's own declaration and body; the
    launcher passes arguments by position, so nothing else changes.
    """
    from .spec import CPP_RESERVED

    out, pos = [], 0
    for m in _KEYWORD_PARAMS.finditer(source):
        names = {re.findall(r"\w+", p)[-1] for p in m.group(1).split(",") if re.findall(r"\w+", p)}
        bad = sorted(n for n in names if n in CPP_RESERVED)
        if not bad or m.start() < pos:
            continue
        end = _function_end(source, m.end())
        span = source[m.start() : end]
        for n in bad:
            new = f"{n}_"
            while re.search(rf"\b{new}\b", source):
                new += "_"
            span = re.sub(rf"\b{n}\b", new, span)
        out.append(source[pos : m.start()] + span)
        pos = end
    out.append(source[pos:])
    return "".join(out)


def _function_end(source: str, i: int) -> int:
    """End of the declaration (``;``) or body (matching ``}``) that starts right after index ``i``."""
    while i < len(source) and source[i] not in ";{":
        i += 1
    if i >= len(source) or source[i] == ";":
        return min(i + 1, len(source))
    depth = 0
    for j in range(i, len(source)):
        if source[j] == "{":
            depth += 1
        elif source[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(source)
