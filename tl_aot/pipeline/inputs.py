"""What a build reads besides the specs: an entry's Python sources and project, and tl_aot's own generator files.

Shared by the plan (keys, the stamp) and the stages (cache entries, the depfile), so neither
imports the other.
"""

from __future__ import annotations

from pathlib import Path

from ..config.kernel_spec import KernelSpec
from ..config.user_code import SourceSnapshot, project_root, snapshot_files, snapshot_sources
from ..cuda.toolchain import RUNTIME_SOURCES

__all__ = ["sources_of", "project_of", "generator_files"]

_TEMPLATES = Path(__file__).parents[1] / "codegen" / "templates"


def sources_of(spec: KernelSpec) -> SourceSnapshot:
    """The entry's kernel file and the local modules it imports, read now (none for a captured kernel: the record is its source)."""
    return snapshot_files([]) if spec.capture else snapshot_sources(spec.source, spec.imports)


def project_of(spec: KernelSpec) -> Path | None:
    """The project root of the entry's kernel file (cache entries store paths relative to it)."""
    src = Path(spec.source)
    return None if spec.capture or not src.is_file() else project_root(src)


def generator_files() -> list[Path]:
    """Files whose content shapes every library besides the kernels: templates and the launcher runtime."""
    return sorted([*_TEMPLATES.glob("*.j2"), *RUNTIME_SOURCES])
