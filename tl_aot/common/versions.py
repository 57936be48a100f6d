"""Versions, read without importing anything heavy: tl_aot's own, and installed distributions' by their metadata.

The bottom of the package: cache keys, toolsets, manifests and the CuTeDSL and TileLang checks all
ask here, so none of them imports another to learn a version.
"""

from __future__ import annotations

__all__ = ["__version__", "package_version", "CUTEDSL_DIST", "CUTEDSL_PIN", "cutedsl_version"]

#: tl_aot's version (``tl_aot.__version__``): the one source of truth; pyproject.toml reads it
#: (``[tool.setuptools.dynamic]``). How it changes: docs/versioning.md; what changed: CHANGELOG.md.
__version__ = "0.1.0"

#: The distribution that provides CuTeDSL, and the version ``tl_aot[cutedsl]`` pins.
CUTEDSL_DIST = "nvidia-cutlass-dsl"
CUTEDSL_PIN = "4.8.1"


def package_version(dist: str) -> str:
    """Installed version of ``dist`` without importing it ('' if absent)."""
    import importlib.metadata  # not at import: ``import tl_aot`` stays cheap

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def cutedsl_version() -> str:
    """The installed CuTeDSL version ('' when the extra is not installed); imports nothing."""
    return package_version(CUTEDSL_DIST)
