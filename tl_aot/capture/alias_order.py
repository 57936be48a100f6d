"""The orders TileLang may write a kernel's tied shared-memory aliases in: the same device code, spelled other ways.

TileLang merges a kernel's shared buffers into one ``buf_dyn_shmem`` and binds each buffer's
variable to an offset in it (``MergeSharedMemoryAllocations``, ``MakeAliasBindings``). It collects
the bindings from a map keyed by the variables' addresses and sorts them by (offset, name); two
buffers at the same offset with the same name -- the ``workspace`` of two ``T.reduce_sum`` across
more than a warp, whose lifetimes do not overlap -- tie, and their order is that of the map: it
depends on where the process's allocator put the two variables, so on everything the process did
before (TileLang 0.1.15 wrote both orders for one kernel lowered four times in one process). The
C code generator names variables in the order they are bound (``workspace``, ``workspace_1``), so
the two orders give two texts, and two digests, of one program: each alias is bound to the same
address, only which name each ``AllReduce`` reads differs.

:func:`alias_orders` gives a kernel source as TileLang would have written it for every order of its
tied aliases: the names of each tie renamed among themselves in the code that uses them, the
declarations (identical but for the name) left as they are. The build tries them when its digest
is not the captured one (:func:`tl_aot.capture.device_code.check_against_record`) and ships the
one the JIT ran, byte for byte.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["TiedAliases", "tied_aliases", "alias_orders", "MAX_ORDERS"]

#: The most orders :func:`alias_orders` gives (a kernel with more ties is compared in the first ones).
MAX_ORDERS = 720

# ``  void* workspace_1 = ((void*)((char*)buf_dyn_shmem + 2048));``: an alias into the merged buffer.
_ALIAS = re.compile(r"^(?P<indent>[ \t]*)(?P<type>[A-Za-z_][\w:]*\*)[ \t]+(?P<name>[A-Za-z_]\w*) = (?P<value>.*buf_dyn_shmem.*);$")
_SUFFIX = re.compile(r"_\d+$")


@dataclass(frozen=True)
class TiedAliases:
    """Aliases TileLang declares on consecutive lines at one offset with one name: their order is the process's.

    ``names``: as declared, first to last; ``first_line``: the line (0-based) of the first declaration.
    """

    names: tuple[str, ...]
    first_line: int


def _base(name: str) -> str:
    return _SUFFIX.sub("", name)


def tied_aliases(source: str) -> tuple[TiedAliases, ...]:
    """The groups of tied aliases in a TileLang CUDA source, in the order they appear."""
    lines = source.split("\n")
    groups: list[TiedAliases] = []
    i = 0
    while i < len(lines):
        first = _ALIAS.match(lines[i])
        names = [first["name"]] if first else []
        while first and i + len(names) < len(lines):
            m = _ALIAS.match(lines[i + len(names)])
            if not m or (m["indent"], m["type"], m["value"], _base(m["name"])) != (
                first["indent"],
                first["type"],
                first["value"],
                _base(first["name"]),
            ):
                break
            names.append(m["name"])
        if len(names) > 1:
            groups.append(TiedAliases(tuple(names), i))
        i += max(len(names), 1)
    return tuple(groups)


def _scope_end(lines: list[str], start: int) -> int:
    """The line after the block that holds line ``start`` (its closing brace), or the end of the source."""
    depth = 0
    for k in range(start, len(lines)):
        depth += lines[k].count("{") - lines[k].count("}")
        if depth < 0:
            return k + 1
    return len(lines)


def _renamed(lines: list[str], group: TiedAliases, order: tuple[str, ...]) -> list[str]:
    """``lines`` with the variable declared as ``order[i]`` named ``group.names[i]`` where it is used."""
    mapping = {old: new for old, new in zip(order, group.names) if old != new}
    if not mapping:
        return lines
    word = re.compile(r"\b(" + "|".join(re.escape(n) for n in mapping) + r")\b")
    begin = group.first_line + len(group.names)
    end = _scope_end(lines, begin)
    body = [word.sub(lambda m: mapping[m.group(1)], line) for line in lines[begin:end]]
    return [*lines[:begin], *body, *lines[end:]]


def alias_orders(source: str, *, limit: int = MAX_ORDERS) -> Iterator[str]:
    """``source`` as TileLang writes it for each order of its tied aliases, the given order first; at most ``limit``.

    A source with no ties gives itself alone.
    """
    groups = tied_aliases(source)
    lines = source.split("\n")
    choices = [list(itertools.permutations(g.names)) for g in groups]
    for n, orders in enumerate(itertools.product(*choices)):
        if n >= limit:
            return
        out = lines
        for group, order in zip(groups, orders):
            out = _renamed(out, group, order)
        yield "\n".join(out)
