"""What a build reads besides the specs and the kernels' sources: tl_aot's own generator files and factory walk.

Shared by the cache (the variant and library keys) and the stamp (the depfile), so neither imports the other for them.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from ..cuda.toolchain import RUNTIME_SOURCES

__all__ = ["generator_files", "walk_code_digest"]

_TEMPLATES = Path(__file__).parents[1] / "codegen" / "templates"

#: The walk from a kernel file's entry to its compile request (:mod:`tl_aot.jit.factory_walk`): it
#: decides which prim_func a file entry builds and spells its "built from" label, both cached.
_WALK = Path(__file__).parents[1] / "jit" / "factory_walk.py"


def generator_files() -> list[Path]:
    """Files whose content shapes every library besides the kernels: templates and the launcher runtime."""
    return sorted([*_TEMPLATES.glob("*.j2"), *RUNTIME_SOURCES])


@functools.cache
def walk_code_digest() -> str:
    """The SHA-256 of tl_aot's factory walk, read once per process: what a kernel file's variant key covers of tl_aot's code.

    The walk's label of a variant ("built from ``make_gemm(M=1024) -> kernel(block_m=128)``") is
    made from the user's live objects while lowering, so it cannot be spelled again at link time
    as a captured kernel's is; another walk lowers the file's entries again (a captured entry,
    never walked, keeps its cache hits).
    """
    return hashlib.sha256(_WALK.read_bytes()).hexdigest()[:16]
