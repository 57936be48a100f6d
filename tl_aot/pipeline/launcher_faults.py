"""Which entries' generated launcher code fails to compile, when a unit of the launcher does.

Generated C++ that does not compile is a tl_aot bug, never the user's doing; but in a library of
thousands of entries it is one entry's bug, and it must not cost the other entries (a
``--keep-going`` build leaves the entry out and links the rest) nor hide which entry it is (a
build that stops names it). A unit (:mod:`tl_aot.codegen.launcher_units`: ~66 entries) says only
that one of its entries is at fault; :func:`find_bad_code` finds which by compiling parts of it
apart, each part rendered as a launcher of its own (its header, library code and entries): a
failing part is cut into up to :data:`WAYS` smaller ones, whole exports first (an export and its
specialisations share a picker), then single specialisations, until each failing part is one
entry. A unit of 66 entries with one bad entry costs two rounds of compiles (8 parts, then the
bad part's ~8 entries), each round as parallel as the build's job slots.

Entries that fail only together (each part alone compiles, the whole does not) are searched
again by halves, and blamed together once both halves of a failing part compile. A unit whose
failure no part reproduces is not the entries' doing, nor is one where a launcher of no entry
fails too (a missing ``cuda.h``): nothing is blamed, and the build stops with the compiler's own error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..common.errors import CompileError, FailedProcessError, tool_signal

__all__ = ["WAYS", "ISSUES", "BadCode", "LauncherCodeError", "Probe", "compiler_errors", "code_fault", "find_bad_code"]

#: How many parts a failing part is cut into per round: 66 entries with one at fault take 8 + 8 compiles in two rounds.
WAYS = 8

#: Where a tl_aot bug is reported (``pyproject.toml``'s ``Issues`` URL).
ISSUES = "https://github.com/tile-ai/tl_aot/issues"

#: Compiles a launcher of the entries at these positions; returns the compiler's output if it fails, else None.
Probe = Callable[[tuple[int, ...]], "str | None"]

#: Runs independent jobs, results in order (:data:`tl_aot.pipeline.stages.Each`).
Each = Callable[[Sequence[Callable[[], Any]]], list[Any]]

_ERROR_LINE = re.compile(r"\b(error|fatal error)\b", re.IGNORECASE)


@dataclass(frozen=True)
class BadCode:
    """Entries whose generated launcher code fails to compile, and what the compiler said."""

    entries: tuple[str, ...]  # one entry, or entries that fail only together; in library order
    errors: tuple[str, ...]  # the compiler's first error lines
    output: str  # the compiler's whole output for them

    def reason(self, entry: str) -> str:
        """Why ``entry`` is left out, as the manifest's ``left_out`` records it: a tl_aot bug, the compiler's first error line."""
        others = [n for n in self.entries if n != entry]
        together = f" together with {', '.join(map(repr, others))}" if others else ""
        first = self.errors[0] if self.errors else "the compiler gave no error line"
        return f"its generated launcher code does not compile{together}, a tl_aot bug (please report it at {ISSUES}): {first}"

    def spelled(self) -> str:
        """``'gemm_0a1b': gemm.cc:12:5: error: ...`` (the first error line)."""
        names = " + ".join(repr(e) for e in self.entries)
        return f"{names}: {self.errors[0] if self.errors else 'the compiler gave no error line'}"


class LauncherCodeError(CompileError):
    """The launcher's generated C++ failed to compile; ``bad`` names the entries whose code fails (a tl_aot bug)."""

    def __init__(self, library: str, bad: tuple[BadCode, ...], units: Sequence[str], *, seconds: float = 0.0) -> None:
        self.bad = bad
        self.seconds = seconds  # spent finding them
        names = [n for b in bad for n in b.entries]
        lines = [
            f"the launcher of lib{library}.so did not compile ({', '.join(units)}): the generated C++ of "
            f"{len(names)} entr{'y' if len(names) == 1 else 'ies'} fails, a tl_aot bug (please report it with these lines at {ISSUES}; "
            "--keep-going leaves such entries out and builds the rest):"
        ]
        for b in bad:
            lines.append(f"  entry {' + '.join(repr(n) for n in b.entries)}:")
            lines.extend(
                f"    {ln}" for ln in b.errors or ("(the compiler gave no error line; its output follows)", *b.output.splitlines()[:5])
            )
        super().__init__("\n".join(lines), entry=names[0] if len(names) == 1 else None)

    @property
    def entries(self) -> tuple[str, ...]:
        """Every entry named, in library order."""
        return tuple(n for b in self.bad for n in b.entries)


def compiler_errors(output: str, most: int = 3) -> tuple[str, ...]:
    """The compiler's first ``most`` lines saying ``error`` (g++, clang, nvcc alike), stripped of surrounding space."""
    return tuple(ln.strip() for ln in output.splitlines() if _ERROR_LINE.search(ln))[:most]


def code_fault(error: BaseException) -> str | None:
    """The compiler's output if ``error`` is the compiler refusing the code (not a missing tool, a signal or a full disk), else None."""
    if not isinstance(error, FailedProcessError) or tool_signal(error.returncode) is not None:
        return None
    output = f"{error.stderr}\n{error.stdout}".strip()
    if "(with the disk full at " in str(error).splitlines()[0] or not compiler_errors(output):
        return None
    return output


def find_bad_code(
    export_of: Sequence[int],
    failing: Sequence[tuple[tuple[int, ...], str]],
    probe: Probe,
    each: Each,
    *,
    names: Sequence[str],
    ways: int = WAYS,
) -> tuple[BadCode, ...]:
    """The entries whose code fails, found among the ``failing`` groups (entry positions, and the compiler's output for them).

    ``export_of[i]``: the export entry ``i`` belongs to (its specialisations share one); ``names[i]``:
    its name. Each round cuts every failing group into up to ``ways`` parts and compiles them all
    through ``each``; a failing part of one entry is blamed. A group none of whose parts fails is
    compiled whole (what failed may be how the unit was cut, not its entries): it is blamed
    together if it fails, else nothing in it is. The first round also compiles a launcher of no
    entry (``probe(())``): where even that fails, the toolchain is at fault and nothing is blamed.
    Returns the blamed, in library order.
    """
    found: list[tuple[tuple[int, ...], str]] = []
    unsure: list[tuple[int, ...]] = []  # failing groups (as the build cut them) none of whose parts fails: compiled whole next
    level = [(tuple(members), output, False, ways) for members, output in failing if members]
    control = level != []  # the first round also compiles a launcher of no entry: if that fails, no entry is at fault
    while level:
        parts = [(g, p) for g, (members, _, _, w) in enumerate(level) for p in _parts(members, export_of, w)]
        outputs = each([_bound(probe, p) for _, p in parts] + ([_bound(probe, ())] if control else []))
        if control and outputs.pop() is not None:
            return ()  # the toolchain or its headers (a missing cuda.h), not the generated code
        control = False
        following = []
        for g, (members, output, probed, w) in enumerate(level):
            mine = [(p, out) for (h, p), out in zip(parts, outputs) if h == g]
            failed = [(p, out) for p, out in mine if out is not None]
            for p, out in failed:
                (found.append((p, out)) if len(p) == 1 else following.append((p, out, True, ways)))
            if not failed and probed and w > 2 and len(members) > 2:
                following.append((members, output, True, 2))  # halves keep entries that fail together in one part
            elif not failed and probed:
                found.append((members, output))  # compiled whole it fails, each half alone compiles: blamed together
            elif not failed and mine != [(members, None)]:
                unsure.append(members)
        level = following
    for members, out in zip(unsure, each([_bound(probe, members) for members in unsure]) if unsure else []):
        if out is not None:
            found.append((members, out))
    found.sort(key=lambda x: x[0][0])
    return tuple(BadCode(tuple(names[i] for i in p), compiler_errors(out), out) for p, out in found)


def _bound(probe: Probe, members: tuple[int, ...]) -> Callable[[], str | None]:
    return lambda: probe(members)


def _parts(members: tuple[int, ...], export_of: Sequence[int], ways: int) -> list[tuple[int, ...]]:
    """``members`` cut into up to ``ways`` parts of about equal size: of whole exports if it spans several, else of single entries."""
    groups: dict[int, list[int]] = {}
    for i in members:
        groups.setdefault(export_of[i], []).append(i)
    items = list(groups.values()) if len(groups) > 1 else [[i] for i in members]
    n = min(ways, len(items))
    cuts = [items[len(items) * k // n : len(items) * (k + 1) // n] for k in range(n)]
    return [tuple(sorted(i for item in cut for i in item)) for cut in cuts]
