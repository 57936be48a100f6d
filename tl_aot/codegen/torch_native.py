"""Build a library's torch companion: ``lib<name>_torch.so``, native torch operators over the LibTorch Stable ABI.

The companion holds one boxed kernel per exported entry calling the entry's C++ function (the
library's header), and registers them with the schemas :func:`tl_aot.runtime.torch_ops.schema_of` writes,
so the native and the Python registration define the same ops. It is compiled against torch's
headers only, targeting torch 2.10's stable ABI: torch symbols stay undefined until torch (any
release from 2.10) has loaded, and nothing ties it to the torch it was built with.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import CompileError
from ..common.fileutil import atomic_write
from ..common.fs_errors import filesystem_errors
from ..common.metadata import Manifest
from ..common.metadata_json import to_plain
from ..cuda.toolchain import RUNTIME_INCLUDE, find_cxx, run, tvm_ffi_paths
from ..runtime import torch_ops
from .launcher_context import LibraryCode, library_code
from .render import _env

__all__ = [
    "CompanionOp",
    "companion_path",
    "companion_source",
    "companion_source_name",
    "companion_ops",
    "render_companion",
    "build_companion",
    "update_companion",
    "torch_include_dir",
]

#: The C++ type of a scalar parameter → how the kernel reads it from torch's stack.
_READ = {"float": "c.real({i})", "double": "c.real({i})", "bool": "c.boolean({i})"}
_TENSOR = "::tvm::ffi::TensorView"


@dataclass(frozen=True)
class CompanionOp:
    """One op of a companion: the schema torch sees and how its kernel calls the entry's C++ function."""

    name: str
    cpp_name: str
    schema: str
    args: tuple[str, ...]  # C++ expressions reading each input from the stack
    returns: bool  # the entry returns outputs (else it writes its tensors in place)
    tensorless: bool  # no input tensor: the op serves every dispatch key


def companion_path(library: str | os.PathLike) -> Path:
    """Where the companion of ``lib<name>.so`` lives: ``lib<name>_torch.so`` beside it."""
    p = Path(library)
    return p.with_name(p.name.removesuffix(".so") + "_torch.so")


def companion_source(library: str | os.PathLike) -> Path:
    """Where the companion's translation unit of ``lib<name>.so`` is: ``.tl_aot/<name>/<name>_torch.cc`` beside it.

    The launcher stage writes it with the launcher (:meth:`tl_aot.pipeline.stages.Stages.launcher_of`),
    from the same pieces, whether torch ops are wanted or not: a build that finds the library up to
    date compiles it as it is, with no launcher code made again.
    """
    p = Path(library)
    name = p.name.removeprefix("lib").removesuffix(".so")
    return p.parent / ".tl_aot" / name / companion_source_name(name)


def companion_source_name(name: str) -> str:
    """The file name of library ``name``'s companion source in its work folder: ``<name>_torch.cc``."""
    return f"{name}_torch.cc"


def _read(i: int, declared: str) -> str:
    ctype, name = declared.rsplit(" ", 1)
    if ctype == _TENSOR:
        return f"c.tensor({i})"
    if ctype in _READ:
        return _READ[ctype].format(i=i)
    return f'c.integer<{ctype}>({i}, "{name}")'


def companion_ops(manifest: Manifest, code: LibraryCode | None = None) -> tuple[CompanionOp, ...]:
    """The ops of ``manifest``'s companion, one per exported entry, in library order.

    ``code``: the launcher's pieces (:func:`~tl_aot.codegen.launcher_context.library_code`) as the
    launcher stage made them, whose exports each op calls; made from ``manifest`` when not given.
    """
    code = code or library_code(manifest, f"{manifest.library}.h")
    ops = []
    for x, members in zip(code.exports, manifest.exports().values()):
        entry = to_plain(members[0])  # the JSON values of its record, as the runtime reads them
        form = x.first.inputs_only if x.alloc else x.first.every
        ops.append(
            CompanionOp(
                name=x.name,
                cpp_name=x.cpp_name,
                schema=torch_ops.schema_of(entry),
                args=tuple(_read(i, d) for i, d in enumerate(form.declared)),
                returns=x.alloc is not None,
                tensorless=torch_ops.takes_no_tensor(entry),
            )
        )
    return tuple(ops)


def render_companion(manifest: Manifest, *, header_name: str, code: LibraryCode | None = None) -> str:
    """The companion's translation unit (only what varies per library; the rest is ``tl_aot/torch_native.h``)."""
    ops = companion_ops(manifest, code)
    return (
        _env()
        .get_template("torch_companion.cc.j2")
        .render(lib=manifest.library, tl_aot_version=manifest.tl_aot_version, header_name=header_name, ops=ops)
    )


def torch_include_dir() -> Path:
    """The folder of torch's C++ headers, found without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        msg = "torch ops: building the torch companion needs torch's headers (pip install torch)"
        raise CompileError(msg)
    inc = Path(next(iter(spec.submodule_search_locations))) / "include"
    if not (inc / "torch" / "csrc" / "stable" / "library.h").is_file():
        msg = f"torch ops: {inc} has no LibTorch Stable ABI headers (torch >= 2.10 is needed to build the companion)"
        raise CompileError(msg)
    return inc


def _command(source: Path, output: Path, library: Path, header_dir: Path) -> list[str]:
    p = tvm_ffi_paths()
    lib_name = library.name.removeprefix("lib").removesuffix(".so")
    return [
        find_cxx(),
        "-std=c++17",
        "-O2",
        "-fPIC",
        "-shared",
        "-fvisibility=hidden",
        "-Wall",
        "-Werror",
        *("-isystem", str(torch_include_dir())),
        *("-isystem", p["include"], "-isystem", p["dlpack"]),
        *("-I", str(RUNTIME_INCLUDE), "-I", str(header_dir)),
        str(source),
        "-o",
        str(output),
        *("-L" + str(library.parent), "-l" + lib_name, "-L" + p["libdir"], "-ltvm_ffi", "-ldl"),
        "-Wl,-rpath,$ORIGIN:$ORIGIN/../tvm_ffi/lib:$ORIGIN/../../tvm_ffi/lib",
    ]


def build_companion(manifest: Manifest, library: str | os.PathLike, header: str | os.PathLike, *, log=print) -> Path:
    """Compile ``library``'s companion beside it (kept when its source and command are unchanged); returns its path.

    Its source is the one the launcher stage wrote (:func:`companion_source`).
    """
    library, header = Path(library).resolve(), Path(header).resolve()
    output = companion_path(library)
    source = companion_source(library)
    cmd = _command(source, output, library, header.parent)
    with filesystem_errors("read the torch companion's source", source, "build again: the launcher stage writes it"):
        text = source.read_text()
    runtime = (RUNTIME_INCLUDE / "tl_aot" / "torch_native.h").read_bytes()
    key = hashlib.sha256("\0".join([text, *cmd]).encode() + runtime + library.read_bytes()).hexdigest()
    stamp = source.with_name("torch_companion.stamp")
    if output.is_file() and stamp.is_file() and stamp.read_text() == key:
        return output
    run(cmd, what=f"compiling the torch companion of {library.name}", cwd=source.parent)
    atomic_write(stamp, key)
    if log:
        log(f"{output.name}: native torch ops ({len(manifest.exports())})")
    return output


def update_companion(manifest: Manifest, library: Path, header: Path, *, wanted: bool, log=print) -> Path | None:
    """The companion of ``library`` as a build leaves it: built (or kept) when ``wanted``, else a stale one removed; its path or None."""
    output = companion_path(library)
    if wanted:
        return build_companion(manifest, library, header, log=log)
    if os.path.lexists(output):  # a stale one; never touch a read-only folder (an up-to-date build there) for nothing
        with filesystem_errors("remove the stale torch companion", output):
            output.unlink()
    return None
