"""The TileLang releases tl_aot is tested with, and what differs between them, in one place.

``tl_aot[build]`` declares ``tilelang>=0.1.12,<=0.1.15`` (pyproject.toml); CI runs the unit tests on
the oldest and the newest. A build with another release goes ahead but warns once per process.
Spellings that differ between releases live here; kernels and tl_aot's own code use these names.
"""

from __future__ import annotations

import functools
import importlib.util
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .versions import package_version

__all__ = [
    "TESTED_TILELANG",
    "OLDEST",
    "NEWEST",
    "INSTALL_HINT",
    "installed_version",
    "tilelang_version",
    "is_tested",
    "warn_if_untested",
    "header_dirs",
    "cluster_kernel",
]

#: Releases whose unit tests, quickstart and real-build integration tests pass (0.1.12: oldest, CI runs its unit tests
#: and test_library_cpu; 0.1.15: newest, CI runs everything; 0.1.13, 0.1.14: by hand, docs/contributing.md).
TESTED_TILELANG = ("0.1.12", "0.1.13", "0.1.14", "0.1.15")
OLDEST, NEWEST = TESTED_TILELANG[0], TESTED_TILELANG[-1]
INSTALL_HINT = f'pip install "tilelang>={OLDEST},<={NEWEST}"'

_warned: set[str] = set()


def installed_version() -> str:
    """The installed TileLang release ('' if none), read without importing it."""
    return package_version("tilelang")


def tilelang_version() -> str:
    """The version of the TileLang that lowers here, as it says itself (importing it if needed)."""
    import tilelang

    return str(getattr(tilelang, "__version__", "unknown"))


@functools.lru_cache(maxsize=1)
def header_dirs() -> tuple[Path, ...]:
    """TileLang's include path, as its JIT and tl_aot's nvcc pass it: its device templates, then its CUTLASS.

    Found without importing TileLang; empty when it is not installed. A header a kernel's
    ``compile_flags`` name through this path (``-include tl_templates/cuda/gemm.h``) belongs to the
    TileLang release installed, and is identified by it rather than copied.
    """
    spec = importlib.util.find_spec("tilelang")
    if spec is None or not spec.submodule_search_locations:
        return ()
    root = Path(next(iter(spec.submodule_search_locations)))
    return (root / "src", root / "3rdparty" / "cutlass" / "include")


def is_tested(version: str) -> bool:
    """Whether ``version`` (``0.1.14``, ``0.1.14+cu130``, ``0.1.14.post1``) is a tested release."""
    base = version.split("+", 1)[0]
    return any(base == v or base.startswith(v + ".post") for v in TESTED_TILELANG)


def warn_if_untested(log: Callable[[str], object] | None = None) -> str:
    """Warn once per process (through ``log``, else :mod:`warnings`) when the installed TileLang is untested; return it."""
    version = installed_version()
    if version and not is_tested(version) and version not in _warned:
        _warned.add(version)
        msg = f"TileLang {version} is not a release tl_aot is tested with ({', '.join(TESTED_TILELANG)}); {INSTALL_HINT}"
        if log:
            log(f"warning: {msg}")
        else:
            warnings.warn(msg, stacklevel=2)
    return version


def cluster_kernel(*blocks: Any, cluster_dims: Any, threads: Any = None) -> Any:
    """A launch frame in thread-block clusters of ``cluster_dims`` (sm_90+).

    ``T.ClusterKernel(..., cluster_dims=)`` is the spelling every tested release accepts; 0.1.15
    also takes ``T.Kernel(..., cluster_dims=)``, which 0.1.12-0.1.14 reject.
    """
    import tilelang.language as T

    return T.ClusterKernel(*blocks, cluster_dims=cluster_dims, threads=threads)
