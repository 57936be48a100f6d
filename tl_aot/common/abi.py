"""The launcher ABI's version: the one number a library and the runtime loading it must agree on.

Apart from :mod:`tl_aot.common.metadata` (which re-exports it) so that loading a library
(:mod:`tl_aot.runtime.loader`) checks it without importing the metadata's dataclasses: those are
needed only when an entry's record is first parsed.
"""

from __future__ import annotations

__all__ = ["ABI_VERSION"]

#: Version of the launcher ABI (exported symbols, manifest layout, calling convention).
#: Bump whenever a library built by an older tl_aot can no longer be driven by this runtime.
ABI_VERSION = 4
