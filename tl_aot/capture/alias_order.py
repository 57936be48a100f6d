"""The ways TileLang may spell a kernel's same-named shared-memory aliases: one device code, written as the process chose.

TileLang merges a kernel's shared buffers into one ``buf_dyn_shmem`` and binds each buffer's
variable to an offset in it (``MergeSharedMemoryAllocations``). Two of its choices are left to the
lowering process when buffers share a name -- the ``workspace`` TileLang gives every ``T.reduce_sum``
/ ``T.reduce_max`` across more than a warp -- because it breaks the ties of its sorts by the order
of maps keyed by the variables' addresses, so by where the process's allocator put them, so by
everything the process did before:

* **which offset each gets** (the arena plan): buffers are packed in (first use, size, name) order;
  two ``workspace`` buffers alive over the same statements (two reductions in one loop body) tie, and
  which one lands at the lower offset is the map's order. TileOPs' gated DeltaNet backward, three
  copies of two reductions, was written with a workspace moved from one offset to another by the JIT
  and by each build process (TileLang 0.1.15; ``tests/kernels/loop_reductions.py`` flips alike);
* **the order of aliases at one offset** (``MakeAliasBindings`` sorts them by (offset, name)): two
  ``workspace`` buffers whose lifetimes do not overlap share an offset, and the order of their
  declarations is the map's (one kernel lowered four times in one process wrote both).

The C code generator names variables in the order they are bound (``workspace``, ``workspace_1``,
...), so the declarations read the same whatever was chosen and only which name each use reads
differs: every choice is a permutation of the uses among the names of same-named aliases.

:func:`alias_orders` gives a kernel source as TileLang would have written it for each such
permutation (the names of each family renamed among themselves in the code that uses them, the
declarations left as they are). The build tries them when its digest is not the captured one
(:func:`tl_aot.capture.device_code.check_against_record`) and ships the one the JIT ran, byte for
byte: the digest, not the permutation, is the proof, so trying more spellings never accepts a
kernel the JIT did not run.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["AliasFamily", "alias_families", "alias_orders", "order_count", "MAX_ORDERS"]

#: The most spellings :func:`alias_orders` gives (8 same-named aliases; a kernel with more is compared in the first ones).
MAX_ORDERS = 40320

# ``  void* workspace_1 = ((void*)((char*)buf_dyn_shmem + 2048));``: an alias into the merged buffer.
_ALIAS = re.compile(r"^(?P<indent>[ \t]*)(?P<type>[A-Za-z_][\w:]*\*)[ \t]+(?P<name>[A-Za-z_]\w*) = (?P<value>.*buf_dyn_shmem.*);$")
_SUFFIX = re.compile(r"_\d+$")


@dataclass(frozen=True)
class AliasFamily:
    """Aliases of one kernel declared with one type and one name (``workspace``, ``workspace_1``, ...).

    ``names``: as declared, first to last; ``offsets``: what each is bound to, in the same order;
    ``first_line`` / ``end_line``: the lines (0-based) of the kernel's alias declarations, the
    first and the one after the last.
    """

    names: tuple[str, ...]
    offsets: tuple[str, ...]
    first_line: int
    end_line: int


def _base(name: str) -> str:
    return _SUFFIX.sub("", name)


def alias_families(source: str) -> tuple[AliasFamily, ...]:
    """The families of same-named aliases (two or more) in a TileLang CUDA source, in the order they are declared."""
    lines = source.split("\n")
    families: list[AliasFamily] = []
    i = 0
    while i < len(lines):
        block: list[re.Match[str]] = []
        while i + len(block) < len(lines) and (m := _ALIAS.match(lines[i + len(block)])):
            block.append(m)
        if not block:
            i += 1
            continue
        groups: dict[tuple[str, str, str], list[re.Match[str]]] = {}
        for m in block:
            groups.setdefault((m["indent"], m["type"], _base(m["name"])), []).append(m)
        for members in groups.values():
            if len(members) > 1:
                names = tuple(m["name"] for m in members)
                families.append(AliasFamily(names, tuple(m["value"] for m in members), i, i + len(block)))
        i += len(block)
    return tuple(families)


def order_count(source: str) -> int:
    """How many spellings ``source`` has: the permutations of each family's uses, multiplied."""
    return math.prod(math.factorial(len(f.names)) for f in alias_families(source))


def _scope_end(lines: list[str], start: int) -> int:
    """The line after the block that holds line ``start`` (its closing brace), or the end of the source."""
    depth = 0
    for k in range(start, len(lines)):
        depth += lines[k].count("{") - lines[k].count("}")
        if depth < 0:
            return k + 1
    return len(lines)


def _template(source: str, families: tuple[AliasFamily, ...]) -> list[str | tuple[int, int]]:
    """``source`` cut where a family's alias is used: text, and (family, declared position) for each use."""
    lines = source.split("\n")
    parts: list[str | tuple[int, int]] = []
    done = 0
    by_block: dict[int, list[int]] = {}
    for n, family in enumerate(families):
        by_block.setdefault(family.end_line, []).append(n)
    for begin, members in sorted(by_block.items()):
        end = _scope_end(lines, begin)
        slot = {name: (n, k) for n in members for k, name in enumerate(families[n].names)}
        word = re.compile(r"\b(" + "|".join(re.escape(name) for name in slot) + r")\b")
        parts.append("\n".join(lines[done:begin]) + ("\n" if begin > done else ""))
        for k, piece in enumerate(word.split("\n".join(lines[begin:end]))):
            parts.append(slot[piece] if k % 2 else piece)
        if end < len(lines):
            parts.append("\n")
        done = end
    parts.append("\n".join(lines[done:]))
    return parts


def alias_orders(source: str, *, limit: int | None = None) -> Iterator[str]:
    """``source`` as TileLang writes it for each permutation of its same-named aliases' uses, itself first.

    At most ``limit`` (default :data:`MAX_ORDERS`); a source without same-named aliases gives itself alone.
    """
    limit = MAX_ORDERS if limit is None else limit
    families = alias_families(source)
    if not families:
        yield source
        return
    parts = _template(source, families)
    choices = [list(itertools.permutations(f.names)) for f in families]
    for n, orders in enumerate(itertools.product(*choices)):
        if n >= limit:
            return
        # the variable declared as order[k] is the one TileLang named names[k]: a use of it reads names[k]
        spelled = [{old: new for old, new in zip(order, f.names)} for f, order in zip(families, orders)]
        yield "".join(p if isinstance(p, str) else spelled[p[0]][families[p[0]].names[p[1]]] for p in parts)
