"""Placing a built TileLang extension in a package: library, loader, torch glue and companion, all or none.

Files that already hold the content are left alone (their timestamps stay); the rest are staged
and swapped in together (:class:`tl_aot.common.destinations.StagedFiles`), so a fault never leaves a new
library beside an old loader.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..common.destinations import StagedFiles
from ..common.fileutil import atomic_write
from ..common.fs_errors import filesystem_errors
from ..pipeline.image_packs import PACK_SUFFIX

__all__ = [
    "GLUE",
    "companion_of",
    "copy_if_different",
    "packs_of",
    "place_companion",
    "place_together",
    "remove_stale_glue",
    "remove_stale_packs",
]

log = logging.getLogger("tl_aot.frontends.setuptools")

_RUNTIME = Path(__file__).parents[1] / "runtime"
#: The torch glue shipped beside every loader, the package ``_tl_aot_torch``: file in it -> the module of tl_aot it copies.
GLUE = {"__init__.py": _RUNTIME / "torch_ops.py", "torch_fakes.py": _RUNTIME / "torch_fakes.py"}
#: The one-file glue tl_aot shipped before: the package above shadows it on import, and is what a build leaves.
_OLD_GLUE = "_tl_aot_torch.py"


def copy_if_different(src: Path, dst: Path) -> bool:
    """Put ``src`` at ``dst`` in one atomic step (a process using the old library never sees half a file).

    Unchanged content is left alone so its timestamp stays; returns True when ``dst`` was written.
    """
    data = src.read_bytes()
    try:
        if dst.read_bytes() == data:
            return False
    except OSError:
        pass
    atomic_write(dst, data, mode=0o755)
    return True


def companion_of(library: Path) -> Path | None:
    """The native torch companion beside ``library`` (``lib<name>_torch.so``), if one was built."""
    p = library.with_name(library.name.removesuffix(".so") + "_torch.so")
    return p if p.is_file() else None


def packs_of(library: Path) -> list[Path]:
    """The image packs beside ``library`` (``lib<name>.<arch>.tlpack``), built with ``image_packs=True``."""
    return sorted(library.parent.glob(f"{library.stem}.*{PACK_SUFFIX}"))


def remove_stale_packs(library: Path, keep: set) -> None:
    """Remove the packs beside ``library`` not named in ``keep`` (archs no longer built, or images embedded again)."""
    for p in packs_of(library):
        if p.name not in keep:
            with filesystem_errors("remove a stale image pack", p):
                p.unlink()


def place_together(files: list, companion: Path | None) -> None:
    """Put each ``(destination, bytes or a file to copy, role)`` in place, all or none (the first is the library).

    Files that already hold the content are left alone (their timestamps stay); the rest are
    written beside their destinations and swapped in together, so a fault (a full disk, a read-only
    build folder) leaves the library and its loader as they were: never a new library with an old
    loader. A stale torch companion goes first when the library has none.
    """
    library = files[0][0]
    dest = library.with_name(library.name.removesuffix(".so") + "_torch.so")
    if companion is None and os.path.lexists(dest):
        with filesystem_errors("remove the stale torch companion", dest):
            dest.unlink()
    if companion is not None:
        files = [*files, (dest, companion, "torch companion")]
    staged = StagedFiles()
    for path, content, role in files:
        data = content.read_bytes() if isinstance(content, Path) else content
        if staged.stage(path, data=data, role=role, mode=0o755 if path.suffix == ".so" else 0o644, if_changed=True):
            log.info(f"writing {path}")
    staged.publish()


def remove_stale_glue(package: Path) -> None:
    """Remove the one-file torch glue (``_tl_aot_torch.py``) an older tl_aot left in ``package``: its package replaces it."""
    stale = package / _OLD_GLUE
    if os.path.lexists(stale):
        with filesystem_errors("remove the stale torch glue", stale):
            stale.unlink()


def place_companion(companion: Path | None, library: Path) -> None:
    """Ship ``companion`` beside ``library``, where the loader looks for it (none: remove a stale one)."""
    dest = library.with_name(library.name.removesuffix(".so") + "_torch.so")
    if companion is None:
        if os.path.lexists(dest):
            dest.unlink()
    elif copy_if_different(companion, dest):
        log.info(f"copying {companion} -> {dest.parent}")
