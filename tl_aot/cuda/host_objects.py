"""Host objects kept in the variant cache, keyed by content: the launcher runtime, each library's launcher and manifest.

An object's key covers everything that goes into it: the bytes of the source and of every file it
includes that tl_aot writes or ships (the generated header, the runtime's headers), the compile
command (compiler, flags, include folders, spelled for a fixed placeholder folder so the key does
not depend on where the build runs), the compiler's version line and the versions the caller names
(tl_aot, tvm-ffi, nvcc). The objects carry no build-machine path (``-ffile-prefix-map``), so the
one stored for a key serves every output folder: a fresh CMake build tree, an isolated ``pip``
build or a CI job with a warm cache links without compiling.

Objects live in ``<cache>/.objects/<key>/`` (a dot folder: never read as a variant entry). Each is
compiled in a private temporary folder beside it, its SHA-256 stored beside it, then renamed into
place (so an object in the cache always has its digest) and checked on every read: a damaged,
truncated or half-written object is compiled again, never linked. Builds sharing the cache take
turns on a key (``<cache>/.objects/<key>.lock``): one compiles it, the others find it made; builds
on machines sharing a network folder whose locks do not hold agree anyway (the object is
reproducible).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from ..common.fileutil import (
    exclusive_lock,
    file_digest,
    install_verified,
    sweep_dead_temporaries,
    verified_file,
    write_file,
    write_if_different,
)
from ..common.fs_errors import filesystem_errors
from .host_compile import compile_host, host_command
from .toolchain import RUNTIME_SOURCES, RUNTIME_UNITS, compiler_id, compiler_launcher, find_cxx, run, run_making

__all__ = ["OBJECTS_FOLDER", "combined_object", "compile_apart", "generated_object", "runtime_object"]

#: The cache's folder of host objects.
OBJECTS_FOLDER = ".objects"

#: The folder host commands are spelled for in keys: every real compile maps its own folder away.
_PLACEHOLDER = Path("/tl_aot-object")

#: What a user does about a cache folder that cannot be written.
_FIX = "free some space there, or pass a writable --cache-dir / TL_AOT_CACHE_DIR"

#: The runtime's object file name, and the name of the generated unit that includes its sources.
_RUNTIME = "launcher_runtime.o"
_RUNTIME_UNIT = "launcher_runtime.cc"


def generated_object(
    cache_root: Path,
    files: dict[str, str],
    source: str,
    obj: str,
    *,
    extra_key: str,
    what: str,
    force: bool = False,
    shown_in: Path | None = None,
) -> tuple[Path, bool]:
    """The object of generated host code ``files[source]`` (with the other ``files`` beside it), from the cache or compiled now.

    ``files`` maps file names to their text: the unit to compile and what it includes by name (the
    launcher's ``<lib>.h``). Returns the cached object's path and whether it was compiled now;
    ``force`` compiles it again whatever the cache holds. ``shown_in``: a folder where ``files``
    are also written first, to be read (a build's work folder), each left alone when unchanged.
    """
    names = sorted(files)
    if shown_in is not None:
        for name in names:
            write_if_different(shown_in / name, files[name])
    key = _key(host_command(_PLACEHOLDER, source, obj), [*names, *(files[n] for n in names)], extra_key)

    def compile_in(folder: Path, out: str) -> None:
        for name in names:
            write_file(folder / name, files[name])
        compile_host(folder, source, out, what=what)

    return _cached(Path(cache_root), key, obj, compile_in, force, what)


def compile_apart(files: dict[str, str], source: str, *, what: str) -> None:
    """Compile generated host code ``files[source]`` as :func:`generated_object` would, in a temporary folder, keeping nothing.

    Whether it compiles, and if not the compiler's :class:`~tl_aot.common.errors.FailedProcessError`:
    what finding the entries of a failing launcher unit asks of parts of it
    (:mod:`tl_aot.pipeline.launcher_faults`), whose objects no build links, so none enters the cache.
    """
    with tempfile.TemporaryDirectory(prefix="tl_aot-apart-") as tmp:
        folder = Path(tmp)
        for name, text in files.items():
            write_file(folder / name, text)
        run([*compiler_launcher(), *host_command(folder, source, Path(source).stem + ".o")], what=what, cwd=folder)


def combined_object(
    cache_root: Path, parts: Sequence[Path], obj: str, *, extra_key: str, what: str, force: bool = False
) -> tuple[Path, bool]:
    """One relocatable object holding ``parts`` (objects of this cache), linked by ``c++ -r``, from the cache or made now.

    A launcher compiled as several units (:func:`tl_aot.codegen.render.render_launcher_units`)
    stays one object for whatever links it, keyed by its parts' digests in order (each part is
    already keyed by its text and toolchain). Nothing is resolved or dropped: the partial link
    only concatenates the parts' sections, so linking it is linking the parts. Returns the object
    and whether it was made now.
    """
    digests = [file_digest(p) for p in parts]

    def command(folder: Path, out: str) -> list[str]:
        return [find_cxx(), "-r", "-nostdlib", "-o", out, *(f"{i}.o" for i in range(len(parts)))]

    key = _key(command(_PLACEHOLDER, obj), digests, extra_key)

    def link_in(folder: Path, out: str) -> None:
        for i, part in enumerate(parts):  # copied under fixed names: nothing of the cache's path reaches the object
            shutil.copyfile(part, folder / f"{i}.o")
        run_making(command(folder, out), Path(out), what=what, cwd=folder)

    return _cached(Path(cache_root), key, obj, link_in, force, what)


def runtime_object(cache_root: Path, *, extra_key: str = "", force: bool = False) -> tuple[Path, bool]:
    """tl_aot's launcher runtime (``src/*.cc``, :data:`RUNTIME_UNITS`) compiled once per toolchain, kept in the cache.

    Every library links the same object; a library build pays for it only the first time. The
    units compile as one translation unit (a generated file including each in order, as the single
    source they were split from): the runtime's headers (tvm-ffi, cuda.h) are parsed once, which
    takes a third of the CPU time of compiling each unit on its own. Returns the object and whether
    it was compiled now; ``force`` compiles it again.
    """
    pkg = Path(__file__).parents[1]
    # No build-machine path in the object (reproducible libraries): the package is spelled tl_aot/.
    remap = [f"-ffile-prefix-map={pkg}=tl_aot", f"-ffile-prefix-map={pkg.resolve()}=tl_aot"]
    unity = "".join(f'#include "{unit}"\n' for unit in RUNTIME_UNITS)

    def command(folder: Path, out: str) -> list[str]:
        cmd = host_command(folder, _RUNTIME_UNIT, out)
        cmd[1:1] = remap
        return cmd

    key = _key(command(_PLACEHOLDER, _RUNTIME), [unity], extra_key)

    def compile_in(folder: Path, out: str) -> None:
        write_file(folder / _RUNTIME_UNIT, unity)
        run_making([*compiler_launcher(), *command(folder, out)], Path(out), what="compiling the tl_aot launcher runtime", cwd=folder)

    return _cached(Path(cache_root), key, _RUNTIME, compile_in, force, "compiling the tl_aot launcher runtime")


def _key(command: list[str], texts: list[str], extra_key: str) -> str:
    """The digest of a compile: its command, its inputs' text, the runtime's sources, the compiler and ``extra_key``."""
    h = hashlib.sha256()
    runtime = [f.read_text() for f in RUNTIME_SOURCES]  # every host unit includes the runtime's headers
    for part in [*command, "\1", *texts, "\1", *runtime, extra_key, compiler_id(command[0])]:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _cached(cache_root: Path, key: str, name: str, compile_in: Callable[[Path, str], None], force: bool, what: str) -> tuple[Path, bool]:
    """``<cache>/.objects/<key>/<name>`` if intact, else made by ``compile_in(folder, name)`` in a private folder and moved in.

    ``compile_in`` runs its tool through :func:`~tl_aot.cuda.toolchain.run_making`, so what it leaves
    is a complete ELF object (a compiler on a full disk may exit 0 with a file cut short) before its
    digest is recorded and it enters the cache (:func:`~tl_aot.common.fileutil.install_verified`).
    """
    folder = cache_root / OBJECTS_FOLDER / key
    obj = folder / name
    if not force and verified_file(obj):
        return obj, False
    tmp = folder / f".{name}.{os.getpid()}.{threading.get_ident()}"
    # A full or read-only cache (the sources written into tmp, the object renamed, its digest) is one line naming the file.
    with filesystem_errors("write", None, f"{what} needs room in the object cache {cache_root / OBJECTS_FOLDER}: {_FIX}"):
        folder.mkdir(parents=True, exist_ok=True)
        # One build compiles a key at a time: builds started together (a CMake project's libraries under ninja -j, two
        # pip builds) wait for the first to compile the runtime instead of each compiling the same object beside it.
        # The lock sits beside the key's folder (whose files are only objects, digests and a writer's temporaries).
        with exclusive_lock(folder.parent / f"{key}.lock", holder=what, unsupported_ok=True):
            if not force and verified_file(obj):  # compiled by the build this one waited for
                return obj, False
            sweep_dead_temporaries(folder, f".{name}.")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            try:
                compile_in(tmp, name)
                install_verified(tmp / name, obj)  # machines sharing the cache (a network folder without locks) agree
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return obj, True
