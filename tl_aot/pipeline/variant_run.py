"""What a build's variant stages produce: a :class:`VariantRun`, filled as they finish.

Its lowered variants, images, the :class:`Launcher`, what failed and where the time went. Written
by the scheduler (:mod:`tl_aot.pipeline.scheduler`), the cluster driver and the stages; read by the
link stage (:mod:`tl_aot.pipeline.library`). Its own module so each of them may import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..capture.record_specs import origin_of_spec
from ..common.errors import LoweringError
from ..common.metadata import LeftOut, LoweredVariant, Manifest
from .plan import Task
from .progress import Progress

__all__ = ["Failure", "Launcher", "Timings", "VariantRun", "first_error_line"]


@dataclass(frozen=True)
class Launcher:
    """What the launcher stage gives: the manifest it was rendered from (image sizes still 0), the header's text, the object."""

    manifest: Manifest
    header_text: str
    obj: Path


@dataclass
class Timings:
    """Job seconds a build spent per kind of work (summed over its jobs, so more than the wall time with ``-j``)."""

    lowering: float = 0.0
    nvcc: float = 0.0
    host: float = 0.0  # the launcher's compile
    link: float = 0.0


class Failure(NamedTuple):
    """A variant a tolerant build left out, and why."""

    entry: str
    arch: str
    message: str


def first_error_line(message: str) -> str:
    """The line of an error that says what went wrong: the underlying exception's (``ValueError: ...``), else the first."""
    lines = [ln.strip() for ln in str(message).strip().splitlines() if ln.strip()]
    if not lines:
        return "unknown error"
    cause = next((ln for ln in lines[1:] if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Failure)\b.*:", ln)), None)
    line = cause or lines[0]
    # a long line keeps its head (what failed, where) and its tail (a compiler's diagnostic, appended there)
    return line if len(line) <= 400 else f"{line[:180]} … {line[-217:]}"


@dataclass
class VariantRun:
    """What the lower, compile and launcher stages produced for a build's variants (filled as they finish)."""

    lib_name: str
    lowered: dict[str, LoweredVariant]  # key -> variant, cached ones included
    images: dict[str, bytes]  # key -> image, cached ones included
    tasks: list[Task]  # the tasks left once failed variants are dropped
    progress: Progress
    seconds: dict[str, float] = field(default_factory=dict)  # key -> seconds, for variants built in this run
    rebuilt: list[tuple[str, str]] = field(default_factory=list)  # (entry, arch)
    failures: list[Failure] = field(default_factory=list)  # left out by a tolerant build
    left_out: list[LeftOut] = field(default_factory=list)  # the same, as the manifest records them
    spent: Timings = field(default_factory=Timings)
    workers: int = 1
    cluster: str = ""  # the Dask scheduler whose workers built the variants ("": this machine)
    runtime_obj: Path | None = None
    launcher: Launcher | None = None  # the launcher stage's (none in a shard)
    #: (entry, arch) -> position in the plan: what is left out is listed in plan order, not in the order it failed
    _rank: dict[tuple[str, str], int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._rank = {(t.spec.name, str(t.arch)): i for i, t in enumerate(self.tasks)}

    def fail(self, task: Task, error: BaseException) -> None:
        """Record ``task`` as left out with ``error`` (a tolerant build goes on without it).

        ``left_out`` stays in plan order whatever order variants fail in (it is in the manifest,
        whose bytes must not depend on ``-j`` or on which worker finished first).
        """
        entry, arch = task.spec.name, str(task.arch)
        self.failures.append(Failure(entry, arch, str(error)))
        text = first_error_line(str(error)).removeprefix(f"entry {entry!r} ({arch}): ")
        self.left_out.append(LeftOut(entry, arch, text, origin_of_spec(task.spec)))
        self.left_out.sort(key=lambda x: self._rank.get((x.entry, x.arch), len(self._rank)))
        self.lowered.pop(task.key, None)

    def built(self, task: Task, image: bytes, seconds: float) -> None:
        """Record ``task``'s image, made in this run in ``seconds``."""
        self.images[task.key] = image
        self.seconds[task.key] = seconds
        self.rebuilt.append((task.spec.name, str(task.arch)))

    def error(self) -> LoweringError:
        """The error of a build whose variants failed and that is not to keep going: each failure named, nothing written."""
        left = self.left_out
        listing = "\n".join(f"  {x.spelled()}" for x in left)
        msg = (
            f"{len(left)} of {len(self.tasks) + len(left)} variant(s) of lib{self.lib_name}.so failed to build; nothing was written "
            f"(--keep-going builds the rest and records what it left out):\n{listing}"
        )
        return LoweringError(msg, entry=left[0].entry if len(left) == 1 else None, arch=left[0].arch if len(left) == 1 else None)
