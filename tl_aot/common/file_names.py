"""File names made from entry names, distinct on a case-insensitive file system.

Entry names are case-sensitive C identifiers: one library may export ``Copy`` and ``copy``. The
build's working files are named after them (``kernels/<entry>__sm_90a.cu``, ``<entry>__sm_90a.bin``),
and on a case-insensitive file system (macOS, Windows, a WSL ``/mnt/c`` folder, some network shares)
those two names are one file: the second entry's image would silently replace the first's. A name
holding an upper-case letter therefore gets a short digest of its exact spelling; an all-lower-case
name, the usual case, is kept as it is.
"""

from __future__ import annotations

import hashlib

__all__ = ["case_safe_stem"]


def case_safe_stem(name: str) -> str:
    """``name`` as a file stem no other name folds onto: ``copy`` -> ``copy``, ``Copy`` -> ``Copy-1a2b3c4d``.

    The ``-`` cannot occur in an identifier, so a digested stem never equals a kept one, and two
    names differing only by case get digests of different spellings.
    """
    if name == name.lower():
        return name
    return f"{name}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
