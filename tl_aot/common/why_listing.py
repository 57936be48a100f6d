"""A report's list of what was left behind and why: one indented ``name: why`` line each, the rest counted."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["why_lines"]


def why_lines(pairs: Iterable[tuple[str, str]], shown: int = 8) -> list[str]:
    """``  name: why`` for the first ``shown`` pairs, then ``  ... and N more`` when there are others."""
    pairs = list(pairs)
    lines = [f"  {name}: {why}" for name, why in pairs[:shown]]
    if len(pairs) > shown:
        lines.append(f"  ... and {len(pairs) - shown} more")
    return lines
