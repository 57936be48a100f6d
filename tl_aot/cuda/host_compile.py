"""The host side of a library: compile the generated C++ (launcher, manifest), embed the images, link the .so.

Every command runs from an argument list with the working directory set, so that only relative
paths reach the outputs (reproducible builds).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ..common.errors import CompileError, ToolchainNotFound
from .nvcc_command import source_prefix_map
from .toolchain import RUNTIME_INCLUDE, check_output_file, compiler_launcher, cuda_include_dir, find_cxx, run, tvm_ffi_paths

__all__ = ["compile_host", "host_command", "embed_images", "link_library"]


def compile_host(workdir: Path, source: str, obj: str, *, what: str) -> None:
    """Compile a generated host C++ unit (the launcher, the manifest) into an object."""
    run([*compiler_launcher(), *host_command(workdir, source, obj)], what=what, cwd=workdir)
    check_output_file(Path(workdir) / obj, what=what)


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


def embed_images(workdir: Path, obj: str, images: dict[str, Path], out: str) -> None:
    """Embed each image into the launcher object with tvm-ffi's cubin embedding (``__tvm_ffi__cubin_<name>``)."""
    try:
        from tvm_ffi.utils.embed_cubin import embed_cubin
    except ImportError:
        msg = "apache-tvm-ffi is needed to embed images: pip install apache-tvm-ffi"
        raise ToolchainNotFound(msg) from None
    current = workdir / obj
    for i, (name, path) in enumerate(sorted(images.items())):
        nxt = workdir / (f"{out}.{i}.o" if i < len(images) - 1 else out)
        try:
            embed_cubin(Path(path), current, nxt, name)
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            msg = f"embedding image {name} into {obj} failed: {e}"
            raise CompileError(msg) from e
        if current != workdir / obj:
            current.unlink()
        current = nxt
    if not images:
        shutil.copyfile(workdir / obj, workdir / out)
    check_output_file(workdir / out, what=f"embedding the images into {obj}")


def link_library(workdir: Path, objs: list[str], output: str, *, what: str) -> None:
    """Link the shared library against libtvm_ffi; libcuda is never linked (dlopen at run time)."""
    p = tvm_ffi_paths()
    cmd = [
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
        "-Wl,--build-id=sha1",
        # A SONAME, so programs linked against it (CMake's IMPORTED target) record `lib<name>.so`, not a path.
        "-Wl,-soname," + Path(output).name,
        # Find libtvm_ffi next to the library or in an installed tvm_ffi package beside it.
        "-Wl,-rpath,$ORIGIN:$ORIGIN/../tvm_ffi/lib:$ORIGIN/../../tvm_ffi/lib",
    ]
    run(cmd, what=what, cwd=workdir)
    check_output_file(Path(workdir) / output, what=what, library=True)
