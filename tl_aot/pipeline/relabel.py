"""Cached variants of kernel files reached by another tl_aot walk: walked again, kept when they are the same kernel.

A variant's "built from" label (``make_gemm(M=1024) -> kernel(block_m=128)``) is spelled by tl_aot's
factory walk from the user's live objects while lowering, and cached with the variant; the variant
key covers the user's code, not tl_aot's. A hit made by another walk (its
:attr:`~tl_aot.common.metadata.LoweredVariant.walk` is not :func:`~tl_aot.jit.walk_digest.walk_digest`)
is walked again here, in this process, without lowering (:func:`tl_aot.lower.lower.walk_variant`):
reaching the same compile request (its request key) it is the same kernel and keeps its image,
metadata and cache entry with this walk's label; reaching another, or failing, it is lowered again
like any miss (whose lowering then says what is wrong). A captured kernel is never walked: its label
is spelled from its record at each build (:func:`tl_aot.pipeline.plan.plan_build`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ..common.errors import TlAotError
from ..jit.walk_digest import walk_digest
from .plan import Plan, Task

if TYPE_CHECKING:
    from .cache import VariantCache
    from .shared_cache import SharedCache

__all__ = ["stale_walks", "relabelled"]


def stale_walks(plan: Plan) -> list[Task]:
    """The plan's kernel-file hits whose label another tl_aot walk spelled (none in a build whose walk is unchanged)."""
    current = walk_digest()
    return [t for t in plan.tasks if t.spec.capture is None and t.key in plan.hits and plan.hits[t.key][0].walk != current]


def relabelled(plan: Plan, cache: VariantCache | SharedCache, *, native_log: str, log: Callable[[str], object] | None) -> Plan:
    """``plan`` with each stale hit (:func:`stale_walks`) walked again: kept with its new label, or left to be lowered.

    A kept hit is stored again, so the next build finds it current. Runs before the build's
    stages: nothing is walked when tl_aot's walk is the one that made every hit.
    """
    stale = stale_walks(plan)
    if not stale:
        return plan
    from ..lower.lower import walk_variant

    hits = dict(plan.hits)
    again = []
    for t in stale:
        variant, image = hits[t.key]
        try:
            walked = walk_variant(t.spec, t.arch, native_log=native_log)
        except Exception:  # noqa: BLE001 (lowered again like any miss: its lowering reports the error, with where it is)
            walked = None
        if walked is None or not walked.request_key or walked.request_key != variant.request_key or t.sources.changed():
            del hits[t.key]
            again.append(t)
            continue
        hits[t.key] = (replace(variant, resolved=walked.resolved, walk=walked.walk), image)
        with contextlib.suppress(TlAotError):  # a cache that cannot be written: walked again next time
            cache.store(t.key, hits[t.key][0], image, t.project, replace=True)
    if log:
        kept = len(stale) - len(again)
        tail = f"; {len(again)} reached another kernel and are lowered again" if again else ""
        log(f"tl_aot's factory walk changed: {kept} cached variant(s) walked again and kept{tail}")
    return replace(plan, hits=hits)
