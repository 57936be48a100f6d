"""What a build reads besides the specs and the kernels' sources: an entry's project, and tl_aot's own generator files.

Shared by the plan, the cache (the library key), the stamp (the depfile) and the stages (cache
entries), so none imports another for them.
"""

from __future__ import annotations

from pathlib import Path

from ..config.kernel_spec import KernelSpec
from ..config.user_code import project_root
from ..cuda.toolchain import RUNTIME_SOURCES

__all__ = ["project_of", "generator_files"]

_TEMPLATES = Path(__file__).parents[1] / "codegen" / "templates"


def project_of(spec: KernelSpec) -> Path | None:
    """The project root of the entry's kernel file (cache entries store paths relative to it)."""
    src = Path(spec.source)
    return None if spec.capture or not src.is_file() else project_root(src)


def generator_files() -> list[Path]:
    """Files whose content shapes every library besides the kernels: templates and the launcher runtime."""
    return sorted([*_TEMPLATES.glob("*.j2"), *RUNTIME_SOURCES])
