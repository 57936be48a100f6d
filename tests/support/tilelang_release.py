"""Which TileLang release is installed, for tests whose kernel that release itself refuses.

tl_aot supports several TileLang releases (``tl_aot.common.tilelang_compat.TESTED_TILELANG``). A
kernel an older release cannot lower under its own ``tilelang.lower`` is TileLang's limit, not
tl_aot's: the test builds the rest and expects that release's refusal, naming it and its error.
"""

from __future__ import annotations

import re

from tl_aot.common.tilelang_compat import installed_version

__all__ = ["tilelang_at_least"]


def tilelang_at_least(release: str) -> bool:
    """Whether the installed TileLang is ``release`` or newer (``0.1.14+cu130`` counts as 0.1.14); False if none."""
    version = installed_version()
    return bool(version) and _release(version) >= _release(release)


def _release(version: str) -> tuple[int, ...]:
    """``(0, 1, 14)`` for ``0.1.14``, ``0.1.14+cu130`` and ``0.1.14.post1``: the release, as TileLang numbers them."""
    found = re.match(r"\d+(?:\.\d+){0,2}", version)
    return tuple(int(p) for p in found.group().split(".")) if found else ()
