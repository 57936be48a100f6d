"""What a build reads besides the specs and the kernels' sources: tl_aot's own generator files.

Shared by the cache (the library key) and the stamp (the depfile), so neither imports the other for them.
"""

from __future__ import annotations

from pathlib import Path

from ..cuda.toolchain import RUNTIME_SOURCES

__all__ = ["generator_files"]

_TEMPLATES = Path(__file__).parents[1] / "codegen" / "templates"


def generator_files() -> list[Path]:
    """Files whose content shapes every library besides the kernels: templates and the launcher runtime."""
    return sorted([*_TEMPLATES.glob("*.j2"), *RUNTIME_SOURCES])
