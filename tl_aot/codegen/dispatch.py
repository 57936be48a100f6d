"""One exported entry, several specialisations: the rules that pick one from the call's tensors.

A specialisation matches when each input tensor has its dtype and rank, each static dim its value,
and each dynamic dim named in its ``when`` lies in that range. Specialisations are tried in the
order written, fallbacks last; two that can match the same call (both fallbacks, or neither) are a
build error, so the order never decides silently. codegen spells the tests in C++ (an integer
if-chain: no strings, maps or allocation); :mod:`tl_aot.runtime.torch_ops` repeats them for fake tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..common.errors import LoweringError
from ..common.metadata import LoweredEntry

__all__ = ["UNBOUNDED", "TensorRule", "Rule", "plan", "describe"]

UNBOUNDED = 2**63 - 1


@dataclass(frozen=True)
class TensorRule:
    """What one input tensor must be: dtype, rank and, per dim, an inclusive value range."""

    name: str
    dtype: str
    dims: tuple[tuple[int, int], ...]  # (lo, hi) per dim; (1, UNBOUNDED) for a dynamic dim no ``when`` narrows
    narrowed: tuple[bool, ...] = ()  # per dim: whether ``when`` set its range (the specialisation's own checks cannot test it)


@dataclass(frozen=True)
class Rule:
    """The match rule of one specialisation (by position in its export's list)."""

    index: int
    fallback: bool
    tensors: tuple[TensorRule, ...]  # one per input tensor in parameter order

    def overlaps(self, other: Rule) -> bool:
        """Whether some call could match both (symbols shared between dims are ignored: conservative)."""
        for a, b in zip(self.tensors, other.tensors):
            if a.dtype != b.dtype or len(a.dims) != len(b.dims):
                return False
            if any(max(lo1, lo2) > min(hi1, hi2) for (lo1, hi1), (lo2, hi2) in zip(a.dims, b.dims)):
                return False
        return True


def describe(e: LoweredEntry) -> str:
    """``A: float16[m, 4096], B: float16[4096, 4096] (m in [1, 64])``: one specialisation, for errors."""
    parts = ", ".join(p.spelled() for p in e.inputs if p.is_tensor)
    return parts + (f" ({e.when_spelled()})" if e.when else "") + (" (fallback)" if e.fallback else "")


def _structure(e: LoweredEntry) -> tuple[tuple[str, str, bool, str], ...]:
    return tuple((p.name, p.kind, p.output, p.dtype if not p.is_tensor else "") for p in e.params)


def _rule(e: LoweredEntry, index: int, where: str) -> Rule:
    symbols = {s.name for s in e.symbols}
    when = {s: (lo, hi) for s, lo, hi in e.when}
    unknown = sorted(set(when) - symbols)
    if unknown:
        msg = (
            f"{where}: when names {', '.join(repr(u) for u in unknown)}, which is not a dynamic dim of this "
            f"specialisation (its dynamic dims: {', '.join(sorted(symbols)) or 'none'})"
        )
        raise LoweringError(msg)
    solved = sorted(s.spelled() for s in e.symbols if s.derived and s.name in when)
    if solved:
        msg = (
            f"{where}: when names {', '.join(solved)}, solved from a dim expression; a `when` range applies only "
            "to a variable that is itself a dim of an input tensor"
        )
        raise LoweringError(msg)
    tensors = []
    for p in e.inputs:
        if not p.is_tensor:
            continue
        dims = [(d, d) if isinstance(d, int) else when.get(d, (1, UNBOUNDED)) for d in p.shape]
        narrowed = tuple(not isinstance(d, int) and d in when for d in p.shape)
        tensors.append(TensorRule(p.name, p.dtype, tuple(dims), narrowed))
    return Rule(index, e.fallback, tuple(tensors))


def plan(members: Sequence[LoweredEntry]) -> tuple[Rule, ...]:
    """The match rules of one export's specialisations, in the order to try them; raises on overlaps.

    Every specialisation must take the same parameters (names, kinds, outputs, scalar dtypes): the
    export has one signature, only dtypes and sizes differ.
    """
    export = members[0].exported
    where = f"entry {export!r}"
    first = _structure(members[0])
    for i, m in enumerate(members[1:], start=2):
        if _structure(m) != first:
            msg = (
                f"{where}: specialisation #{i} takes ({m.signature()}), #1 takes ({members[0].signature()}); "
                "the specialisations of one entry must take the same parameters (dtypes and sizes may differ)"
            )
            raise LoweringError(msg)
    if not any(p.is_tensor and not p.output for p in members[0].params):
        msg = f"{where}: specialisations are picked by the input tensors, and this entry takes none"
        raise LoweringError(msg)
    packed = sorted({f"{p.name}: {p.dtype}" for m in members for p in m.inputs if p.packing is not None}) if len(members) > 1 else []
    if packed:
        msg = (
            f"{where}: specialisations are picked by their input tensors' dtypes and sizes, and {', '.join(packed)} "
            "is a sub-byte tensor passed packed, which tl_aot does not pick by; export each specialisation under its own name"
        )
        raise LoweringError(msg)
    rules = [_rule(m, i, f"{where}: specialisation #{i + 1}") for i, m in enumerate(members)]
    for group in ([r for r in rules if not r.fallback], [r for r in rules if r.fallback]):
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                if a.overlaps(b):
                    msg = (
                        f"{where}: specialisations #{a.index + 1} ({describe(members[a.index])}) and #{b.index + 1} "
                        f"({describe(members[b.index])}) can both take the same call; make their dtypes, sizes or "
                        "`when` ranges disjoint, or mark the general one `fallback = true`"
                    )
                    raise LoweringError(msg)
    return tuple([r for r in rules if not r.fallback] + [r for r in rules if r.fallback])
