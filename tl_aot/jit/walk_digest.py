"""The digest of tl_aot's factory walk (:mod:`tl_aot.jit.factory_walk`): which walk reached a cached variant.

The walk from a kernel file's entry to its compile request spells the variant's "built from" label
(``make_gemm(M=1024) -> kernel(block_m=128)``) from the user's live objects, so the label is made
while lowering and cached with the variant. The variant key covers the user's code, not tl_aot's:
each variant records this digest (:attr:`~tl_aot.common.metadata.LoweredVariant.walk`), and a
cache hit made by another walk is walked again (:mod:`tl_aot.pipeline.relabel`) instead of being
lowered again. Read without importing the walk (or TileLang): a build's plan asks for it.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

__all__ = ["walk_digest"]

_WALK = Path(__file__).with_name("factory_walk.py")


@functools.cache
def walk_digest() -> str:
    """The SHA-256 of ``factory_walk.py`` (16 hex digits), read once per process."""
    return hashlib.sha256(_WALK.read_bytes()).hexdigest()[:16]
