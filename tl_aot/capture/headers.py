"""The headers a recorded kernel's compile flags name: copied into the record, or named as TileLang's.

A kernel may pass ``compile_flags=["-include", "helper.h", "-I", "include/"]``. nvcc reads
those files when it compiles the kernel, so they are part of what the capture records. Each is
found as nvcc finds it (:func:`tl_aot.config.options.resolve_include`: the working directory,
then TileLang's include path, then the ``-I`` folders). A header of the user's project is copied
into the record (``headers``: base64 by path); a header of TileLang's own include path
(``-include tl_templates/cuda/gemm.h``) is not: the record names it (``tilelang_headers``: the
include folder, the path under it, its SHA-256 and the TileLang release), and a build from the
record uses the installed TileLang's copy, refusing one whose contents differ.

A header found nowhere makes the kernel unrecordable (:class:`HeaderNotFound`): the capture says
so, by kernel, and counts it; it is never left out of the record without a word.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable
from pathlib import Path

from ..common.errors import LoweringError, TlAotError
from ..common.fileutil import file_digest
from ..common.json_types import JsonMapping, JsonObject
from ..common.tilelang_compat import header_dirs, installed_version
from ..config.options import flag_inputs, include_files, map_flag_paths, tilelang_relative

__all__ = ["HeaderNotFound", "record_headers", "tilelang_header"]


class HeaderNotFound(TlAotError, FileNotFoundError):
    """A header a kernel's compile flags name is nowhere nvcc would look: the kernel cannot be recorded."""


def record_headers(flags: Iterable[str]) -> tuple[dict[str, str], dict[str, JsonObject]]:
    """``(headers, tilelang_headers)`` of a kernel's compile flags, as a record item stores them.

    ``headers``: the project's headers, base64 by the path the flags spell (an ``-include`` as
    written; a file under an ``-I`` folder by its path). ``tilelang_headers``: TileLang's, by the
    same keys, each ``{"dir", "path", "sha256", "tilelang"}`` (an ``-I`` folder of TileLang's has no
    ``sha256``). Raises :class:`HeaderNotFound` naming a header found nowhere.
    """
    flags = list(flags)
    version = installed_version()
    headers: dict[str, str] = {}  # path as spelled -> its bytes in base64
    tilelang: dict[str, JsonObject] = {}
    read_via: dict[str, str] = {}  # the file read -> the -include value that names it
    for value, found in include_files(flags):
        if found is None:
            searched = [os.getcwd(), *map(str, header_dirs()), *_folders(flags)]
            msg = f"its compile flags name the header {value!r} (-include), found in none of: " + ", ".join(searched)
            raise HeaderNotFound(msg)
        read_via[str(found)] = value
    for path, digest in flag_inputs(flags):
        key = read_via.get(path, path)
        owner = tilelang_relative(path)
        if owner is not None:
            tilelang[key] = {"dir": owner[0], "path": owner[1], "sha256": digest, "tilelang": version}
        elif digest != "missing":
            headers[key] = base64.b64encode(Path(path).read_bytes()).decode()
    for folder in _folders(flags):
        owner = tilelang_relative(folder)
        if owner is not None:
            tilelang[folder] = {"dir": owner[0], "path": owner[1], "tilelang": version}
    return headers, tilelang


def _folders(flags: Iterable[str]) -> list[str]:
    """The ``-I``-like folders the flags name, as spelled."""
    out: list[str] = []

    def note(value: str, folder: bool) -> str:
        if folder:
            out.append(value)
        return value

    map_flag_paths(flags, note)
    return out


def tilelang_header(value: str, info: JsonMapping, where: str) -> str:
    """The installed TileLang's copy of a recorded TileLang header (or folder), checked against the record's digest."""
    dirs = header_dirs()
    try:
        local = Path(dirs[int(info["dir"])]) / str(info["path"])
    except (IndexError, KeyError, TypeError, ValueError):
        local = None
    have = installed_version() or "none installed"
    if local is None or not local.exists() or ("sha256" in info and file_digest(local) != info["sha256"]):
        msg = (
            f"{where}: the kernel's compile flags name {value!r}, TileLang {info.get('tilelang', '?')}'s "
            f"{info.get('path', '?')}; this machine's TileLang ({have}) has "
            f"{'another' if local is not None and local.exists() else 'no such header'}: "
            f"build it with tilelang=={info.get('tilelang', '?')}, the release it was captured with"
        )
        raise LoweringError(msg)
    return str(local)
