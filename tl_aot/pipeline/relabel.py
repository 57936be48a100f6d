"""Cached variants of kernel files reached by another tl_aot walk: walked again, kept when they are the same kernel.

A variant's "built from" label (``make_gemm(M=1024) -> kernel(block_m=128)``) is spelled by tl_aot's
factory walk from the user's live objects while lowering, and cached with the variant; the variant
key covers the user's code, not tl_aot's. A hit made by another walk (its
:attr:`~tl_aot.common.metadata.LoweredVariant.walk` is not :func:`~tl_aot.jit.walk_digest.walk_digest`)
is lowering's to make again (:func:`walk_again`: the plan's todo), and lowering's first step is
to walk it again without lowering (:func:`walked_again`, from :meth:`tl_aot.pipeline.stages.Stages.lower`):
reaching the same compile request (its request key) it is the same kernel and keeps its image,
metadata and cache entry with this walk's label; reaching another, or failing, it is lowered like
any miss (whose lowering then says what is wrong). On a cluster the workers lower it again. A
captured kernel is never walked: its label is spelled from its record at each build
(:func:`tl_aot.pipeline.plan.plan_build`).
"""

from __future__ import annotations

from dataclasses import replace

from ..common.metadata import LoweredVariant
from ..jit.walk_digest import walk_digest
from .plan import Plan, Task

__all__ = ["Hit", "walk_again", "walked_again"]

#: a cache hit: the variant and its image
Hit = tuple[LoweredVariant, bytes]


def walk_again(plan: Plan) -> tuple[Plan, dict[str, Hit]]:
    """``plan`` with its kernel-file hits another tl_aot walk labelled moved to its todo, and those hits by key.

    None in a build whose walk made every hit: the plan is returned as it is.
    """
    current = walk_digest()
    stale = {
        t.key: plan.hits[t.key] for t in plan.tasks if t.spec.capture is None and t.key in plan.hits and plan.hits[t.key][0].walk != current
    }
    if not stale:
        return plan, {}
    return replace(plan, hits={k: v for k, v in plan.hits.items() if k not in stale}), stale


def walked_again(task: Task, hit: Hit, *, native_log: str) -> LoweredVariant | None:
    """``hit``'s variant labelled by this walk when walking ``task``'s entry again reaches its request; None: lower it."""
    from ..lower.lower import walk_variant

    variant = hit[0]
    try:
        walked = walk_variant(task.spec, task.arch, native_log=native_log)
    except Exception:  # noqa: BLE001 (lowered like any miss: its lowering reports the error, with where it is)
        return None
    if not walked.request_key or walked.request_key != variant.request_key or task.sources.changed():
        return None
    return replace(variant, resolved=walked.resolved, walk=walked.walk)
