"""A build's knobs, checked once where they enter: how many jobs, which caches, where variants are made, what a failure does.

:func:`~tl_aot.pipeline.library.build_library` and
:func:`~tl_aot.pipeline.library.build_part` take them as keywords (their public faces) and pass one
:class:`BuildOptions` to every stage after, so a knob is read and checked in one place, whatever
the front end, and no stage takes more of them than it reads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..common.errors import SpecError
from ..config.kernel_spec import LibrarySpec
from ..lower.native_log import NATIVE_LOG_MODES
from .cluster import CLUSTER_ENV
from .shared_cache import CACHE_URL_ENV

__all__ = ["BuildOptions", "Log"]

#: Where progress lines go (``print``), or None for a quiet build.
Log = Optional[Callable[[str], object]]


@dataclass(frozen=True)
class BuildOptions:
    """How to build, once checked: see :func:`~tl_aot.pipeline.library.build_library` for each knob."""

    jobs: int
    cache_dir: Path | None = None
    cache_url: str = ""
    cluster: str = ""
    header_dir: Path | None = None
    depfile: Path | None = None
    log: Log = print
    force: bool = False
    keep_going: bool = False
    native_log: str = "warnings"  # TileLang's C++ log while lowering: off, warnings, raw (tl_aot.lower.native_log)
    report_all: bool = False

    @classmethod
    def settled(
        cls,
        *,
        jobs: int | None = None,
        cache_dir: str | os.PathLike | None = None,
        cache_url: str | None = None,
        cluster: str | None = None,
        header_dir: str | os.PathLike | None = None,
        depfile: str | os.PathLike | None = None,
        log: Log = print,
        force: bool = False,
        keep_going: bool = False,
        report_all: bool = False,
        native_log: str | None = None,
    ) -> BuildOptions:
        """The options of the keywords given, checked; read from the environment where not given.

        ``jobs`` defaults to :func:`~tl_aot.pipeline.scheduler.default_jobs` (``MAX_JOBS``), the
        cluster and the shared cache to ``TL_AOT_CLUSTER`` / ``TL_AOT_CACHE_URL``; paths are resolved.
        """
        from .scheduler import default_jobs

        if jobs is not None and (type(jobs) is not int or jobs < 1):
            msg = f"jobs must be a whole number of at least 1 (or None for MAX_JOBS / the CPU count), got {jobs!r}"
            raise SpecError(msg)
        native_log = native_log or ("off" if log is None else "warnings")
        if native_log not in NATIVE_LOG_MODES:
            msg = f"native_log must be one of {', '.join(NATIVE_LOG_MODES)}, got {native_log!r}"
            raise SpecError(msg)
        cluster = os.environ.get(CLUSTER_ENV, "") if cluster is None else cluster
        cache_url = os.environ.get(CACHE_URL_ENV, "") if cache_url is None else cache_url
        return cls(
            jobs=jobs or default_jobs(),
            cache_dir=Path(cache_dir).resolve() if cache_dir else None,
            cache_url=cache_url.strip(),
            cluster=cluster.strip(),
            header_dir=Path(header_dir) if header_dir else None,
            depfile=Path(depfile).resolve() if depfile else None,
            log=log,
            force=force,
            keep_going=keep_going,
            native_log=native_log,
            report_all=report_all,
        )

    def tolerant(self, lib: LibrarySpec) -> bool:
        """Whether a failed variant lets the others build: ``keep_going``, ``report_all``, or a record's kernels (every failure named)."""
        return self.keep_going or self.report_all or any(e.capture for e in lib.entries)
