"""The host side of a library: compile the generated C++ (launcher, manifest), embed the images (one object), link the .so.

Every command runs from an argument list with the working directory set, so that only relative
paths reach the outputs (reproducible builds).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..common.file_names import case_safe_stem
from ..common.fileutil import atomic_write, file_digest, write_if_different
from ..common.versions import __version__
from .image_assembly import ImageSource, image_assembly
from .nvcc_command import source_prefix_map
from .toolchain import RUNTIME_INCLUDE, compiler_launcher, cuda_include_dir, find_cxx, run_making, tvm_ffi_paths

__all__ = ["SMALL_IMAGE", "compile_host", "host_command", "embed_images", "link_command", "link_library", "link_with_images"]


def compile_host(workdir: Path, source: str, obj: str, *, what: str) -> None:
    """Compile a generated host C++ unit (the launcher, the manifest) into an object."""
    run_making([*compiler_launcher(), *host_command(workdir, source, obj)], Path(obj), what=what, cwd=workdir)


def host_command(workdir: Path, source: str, obj: str) -> list[str]:
    """The host compiler command of :func:`compile_host`: cuda.h types, tvm-ffi headers, stable paths."""
    p = tvm_ffi_paths()
    return [
        find_cxx(),
        "-std=c++17",
        "-O2",
        "-fPIC",
        "-fvisibility=hidden",
        "-fno-gnu-unique",
        *[f"-ffile-prefix-map={old.rstrip('/')}={new.rstrip('/') or '.'}" for old, new in source_prefix_map(workdir, host=True)],
        "-I",
        ".",
        "-I",
        str(RUNTIME_INCLUDE),
        "-include",
        "tl_aot/glibc_compat.h",  # pre-2.34 symbol versions: the library loads on older glibc (manylinux)
        "-I",
        p["include"],
        "-I",
        p["dlpack"],
        "-I",
        cuda_include_dir(),
        "-c",
        source,
        "-o",
        obj,
    ]


#: Images up to this size (image packs' references, ~100 bytes) share one file: writing thousands of files cost seconds.
SMALL_IMAGE = 4096


def embed_images(workdir: Path, images: Mapping[str, bytes], out: str, *, what: str) -> bool:
    """Embed ``images`` (image symbol -> bytes) in one object ``out``: ``__tvm_ffi__cubin_<symbol>``, linked beside the launcher.

    Each image is written to ``<symbol>.bin`` in ``workdir`` (left alone when it already holds
    those bytes), images of :data:`SMALL_IMAGE` bytes or fewer (references into image packs) all
    to ``<out>.small.bin``; they are named by one generated assembly file ``<out>.s``
    (:mod:`tl_aot.cuda.image_assembly`) and assembled in one run of the host compiler: linear in
    the images, where merging them into the object one at a time cost their square.
    ``Copy__sm_90a``'s file is ``Copy__sm_90a-<digest>.bin``
    (:func:`~tl_aot.common.file_names.case_safe_stem`). The object holds no path of ``workdir``.

    The object is made again only when the source changed: it names every image's size and
    SHA-256, and ``<out>.from`` records the digest of the source (and the assembler) and the
    object's, so an object made from other images, or damaged since, is never linked. Returns
    whether it was assembled now.
    """
    workdir = Path(workdir)
    assembly = _ImageAssembly.write(workdir, images, out, what=what)
    if assembly.current:
        return False
    run_making(assembly.command, Path(out), what=what, cwd=workdir)
    atomic_write(assembly.record, f"{assembly.made_from} {file_digest(workdir / out)}\n")
    return True


def link_with_images(workdir: Path, images: Mapping[str, bytes], images_obj: str, objs: Sequence[str], output: str, *, what: str) -> None:
    """:func:`embed_images` into ``images_obj``, then :func:`link_library` of ``objs`` with it beside the first: the link stage's tools.

    The images' record is written once the library is linked, so the two tools run back to back;
    a build stopped in between assembles the images again (a record never names an object that
    is not whole).
    """
    workdir = Path(workdir)
    link = link_command([objs[0], images_obj, *objs[1:]], output)
    embedding = f"embedding the images of {output}"
    assembly = _ImageAssembly.write(workdir, images, images_obj, what=embedding)
    if not assembly.current:
        run_making(assembly.command, Path(images_obj), what=embedding, cwd=workdir)
    run_making(link, Path(output), what=what, cwd=workdir, library=True)
    if not assembly.current:
        atomic_write(assembly.record, f"{assembly.made_from} {file_digest(workdir / images_obj)}\n")


@dataclass(frozen=True)
class _ImageAssembly:
    """The assembly source of an images object, written in its folder: the command that assembles it, and whether it is current.

    ``record``: ``<out>.from``, what the object there was made from (``made_from``: the digest of
    the source and of the assembler that reads it) and its digest; ``current``: it says so.
    """

    command: list[str]
    record: Path
    made_from: str
    current: bool

    @classmethod
    def write(cls, workdir: Path, images: Mapping[str, bytes], out: str, *, what: str) -> _ImageAssembly:
        """Write the images and their assembly source (each file left alone when it holds those bytes); read ``<out>.from``."""
        files: dict[str, ImageSource] = {}
        small, at = [], 0
        blob = f"{out}.small.bin"
        for name in sorted(images):
            data = images[name]
            if len(data) <= SMALL_IMAGE:
                files[name] = (blob, data, at)
                small.append(data)
                at += len(data)
            else:
                file = f"{case_safe_stem(name)}.bin"  # Copy and copy: two files on a case-insensitive file system too
                write_if_different(workdir / file, data)
                files[name] = (file, data)
        if small:
            write_if_different(workdir / blob, b"".join(small))
        source = f"{out}.s"
        text = image_assembly(files, header=f"Generated by tl_aot {__version__}: {what}. Do not edit.")
        write_if_different(workdir / source, text)
        made_from = hashlib.sha256(f"{find_cxx()}\0{text}".encode()).hexdigest()
        record = workdir / f"{out}.from"
        try:
            current = record.read_text().split() == [made_from, file_digest(workdir / out)]
        except OSError:
            current = False
        if not current:
            with contextlib.suppress(FileNotFoundError):
                record.unlink()  # gone until the new object is whole: a build killed while assembling leaves no record
        return cls([find_cxx(), "-c", "-x", "assembler", source, "-o", out], record, made_from, current)


def link_library(workdir: Path, objs: list[str], output: str, *, what: str) -> None:
    """Link the shared library ``output`` from ``objs`` in ``workdir`` (:func:`link_command`), checked whole."""
    run_making(link_command(objs, output), Path(output), what=what, cwd=workdir, library=True)


def link_command(objs: Sequence[str], output: str) -> list[str]:
    """The command linking the shared library against libtvm_ffi; libcuda is never linked (dlopen at run time)."""
    p = tvm_ffi_paths()
    return [
        find_cxx(),
        "-shared",
        "-o",
        output,
        *objs,
        "-L" + p["libdir"],
        "-ltvm_ffi",
        # By name and always recorded: on glibc < 2.34 the pre-2.34 dlopen / pthread_once that
        # glibc_compat.h binds to live in these two (on newer glibc they are empty stubs).
        "-Wl,--push-state,--no-as-needed",
        "-l:libdl.so.2",
        "-l:libpthread.so.0",
        "-Wl,--pop-state",
        "-Wl,--no-undefined",
        # Symbols of static archives stay inside: a host whose g++ links libstdc++.a (seen on the H100 host: no
        # libstdc++.so.6 needed, 2,218 std:: symbols exported) must not export a second C++ runtime to the process.
        "-Wl,--exclude-libs,ALL",
        "-Wl,--build-id=sha1",
        # A SONAME, so programs linked against it (CMake's IMPORTED target) record `lib<name>.so`, not a path.
        "-Wl,-soname," + Path(output).name,
        # Find libtvm_ffi next to the library or in an installed tvm_ffi package beside it.
        "-Wl,-rpath,$ORIGIN:$ORIGIN/../tvm_ffi/lib:$ORIGIN/../../tvm_ffi/lib",
    ]
