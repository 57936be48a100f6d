"""Where a build works and what it writes: the work folder, the outputs, the cache and the lock, checked before any work.

The opening every kind of build shares (a one-machine build, a shard, a cluster build): the same
folders, the same cache (a shared one behind the local one with ``--cache-url``), the same lock,
held while what killed builds left behind is swept away (:meth:`Workspace.held`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..common.destinations import check_file_destination, ensure_folder
from ..common.errors import FilesystemError
from ..common.fileutil import exclusive_lock
from ..common.fs_errors import filesystem_errors, fs_error
from .cache import VariantCache, default_cache_dir
from .options import BuildOptions, Log
from .shared_cache import SharedCache

__all__ = ["Outputs", "Workspace", "workspace"]


@dataclass(frozen=True)
class Outputs:
    """Where a build puts what it publishes."""

    library: Path
    header: Path
    stamp: Path
    depfile: Path | None


@dataclass(frozen=True)
class Workspace:
    """A build's folders: ``work`` (``<out>/.tl_aot/<name>``), the outputs, the variant cache and the lock file.

    ``unwritable``: the error a build raises if it has to write (the output folder is read-only: the
    library may still be up to date); its lock is then taken in the temporary folder.
    ``cache_unwritable``: the error a build raises if it has variants to make (the cache folder
    cannot store them: a build that finds them all in the cache, or an up-to-date one, needs none).
    """

    work: Path
    out: Outputs
    cache: VariantCache | SharedCache
    lock: Path
    unwritable: FilesystemError | None = None
    cache_unwritable: FilesystemError | None = None

    @contextlib.contextmanager
    def held(self, holder: str, log: Log) -> Iterator[Workspace]:
        """Hold the lock (``holder``: how a build waiting for it names this one); sweep what killed builds left, when writable."""
        with exclusive_lock(self.lock, holder=holder, log=log):
            if self.unwritable is None:
                _sweep_debris(self.work, self.out)
            yield self


def workspace(name: str, out_dir: str | os.PathLike, opts: BuildOptions, *, what: str = "output folder") -> Workspace:
    """The workspace of library ``name`` built into ``out_dir`` (``what``: how errors name that folder)."""
    out_dir = ensure_folder(Path(out_dir).resolve(), what)
    work = out_dir / ".tl_aot" / name
    header_dir = ensure_folder(opts.header_dir.resolve(), "header folder") if opts.header_dir else out_dir
    out = Outputs(out_dir / f"lib{name}.so", header_dir / f"{name}.h", work / "stamp.json", opts.depfile)
    check_file_destination(out.library, "library")
    check_file_destination(out.header, "header")
    cache_root = opts.cache_dir or default_cache_dir(out_dir)
    if cache_root.exists() and not cache_root.is_dir():
        msg = f"cache folder {cache_root} is a file, not a folder; remove it or pass another --cache-dir / TL_AOT_CACHE_DIR"
        raise FilesystemError(msg)
    local = VariantCache(cache_root)
    cache = SharedCache(local, opts.cache_url, log=opts.log) if opts.cache_url else local
    cache_problem = _cache_problem(local)
    try:
        ensure_folder(work, "work folder")
        (work / "build.lock").touch()
        return Workspace(work, out, cache, work / "build.lock", cache_unwritable=cache_problem)
    except (FilesystemError, OSError) as e:
        problem = e if isinstance(e, FilesystemError) else fs_error(e, "write in the output folder", out_dir)
        locks = Path(tempfile.gettempdir()) / f"tl_aot-{os.getuid()}" / "locks"
        with filesystem_errors("create the lock folder", locks, "set TMPDIR to a writable folder"):
            locks.mkdir(parents=True, exist_ok=True)
        lock = locks / (hashlib.sha256(str(work).encode()).hexdigest()[:16] + ".lock")
        return Workspace(work, out, cache, lock, unwritable=problem, cache_unwritable=cache_problem)


def _cache_problem(cache: VariantCache) -> FilesystemError | None:
    """Why variants cannot be stored in ``cache`` (probed now, its folder made), or None: raised only by a build with variants to make."""
    try:
        cache.check_writable()
    except FilesystemError as e:
        return e
    return None


def _sweep_debris(work: Path, out: Outputs) -> None:
    """Remove what killed builds of this library left in its work folder and beside what it publishes (the caller holds its lock)."""
    published = (out.library, out.header, out.stamp, *([out.depfile] if out.depfile else []))
    beside = [p for f in published for p in f.parent.glob(f".{f.name}.*") if p.suffix in (".part", ".old")]
    for p in [*work.glob(".lib*.part"), *beside]:
        with contextlib.suppress(OSError):
            p.unlink()
    kernels = work / "kernels"
    if kernels.is_dir():
        for p in kernels.iterdir():
            if p.name.startswith(".") and p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
