"""What a build produced (:class:`BuildResult`) and the summary it ends its log with (:func:`log_summary`).

Apart from :mod:`tl_aot.pipeline.library`, which runs the stages: the result is what every front
end reads back, and the summary is read from it, the run and the plan once the library is published.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from ..common.metadata import LeftOut, Manifest
from .options import Log
from .plan import Plan
from .variant_run import Failure, VariantRun

__all__ = ["BuildResult", "VariantReport", "log_summary"]


@dataclass(frozen=True)
class VariantReport:
    """One line of the build summary."""

    entry: str
    arch: str
    image_bytes: int
    seconds: float
    cached: bool


@dataclass(frozen=True)
class BuildResult:
    """What a build produced."""

    library: Path
    header: Path
    manifest: Manifest
    up_to_date: bool = False
    rebuilt: tuple[tuple[str, str], ...] = ()  # (entry, arch) pairs lowered and compiled in this run
    reports: tuple[VariantReport, ...] = field(default=())
    depfile: Path | None = None
    deps: tuple[Path, ...] = ()
    failures: tuple[Failure, ...] = ()  # (entry, arch, error) left out by a keep-going build
    torch_companion: Path | None = None  # lib<name>_torch.so, when built with torch ops

    @property
    def left_out(self) -> tuple[LeftOut, ...]:
        """The variants a keep-going build left out, as its manifest records them."""
        return self.manifest.left_out

    def summary(self) -> str:
        """A table: entry, arch, image size, seconds (cached variants marked)."""
        rows = [("entry", "arch", "image", "seconds")]
        for r in self.reports:
            rows.append((r.entry, r.arch, f"{r.image_bytes / 1024:.1f} KiB", "cached" if r.cached else f"{r.seconds:.1f}"))
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)


def log_summary(log: Log, result: BuildResult, run: VariantRun, plan: Plan, jobs: int, t_start: float) -> None:
    """The build's last lines: what was left out, the table of variants, where the job time went, the library and its compiler."""
    if not log:
        return
    if result.manifest.left_out:
        log(f"left out {len(result.manifest.left_out)} variant(s) that failed (--keep-going):")
        for x in result.manifest.left_out:
            log(f"  {x.spelled()}")
    log(result.summary())
    if plan.todo:
        where = f"{run.workers} worker processes" if run.workers > 1 else "this process"
        if run.cluster:
            where = f"on {run.workers} cluster worker(s)"
        spent = run.spent
        log(
            f"job time: lowering {spent.lowering:.1f} s ({where}), nvcc {spent.nvcc:.1f} s, "
            f"host compile {spent.host:.1f} s, link {spent.link:.1f} s; -j {jobs}"
        )
    log(f"built {result.library} in {time.perf_counter() - t_start:.1f} s with TileLang {result.manifest.tilelang_version}")
    m = result.manifest
    if m.compiler:
        driver = f" ({m.driver_min_version}+)" if m.driver_min_version else ""
        log(f"compiler: {m.compiler}; loads on NVIDIA drivers supporting CUDA {m.driver_min_cuda} or newer{driver}")
