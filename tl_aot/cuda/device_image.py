"""TileLang's CUDA source → kernel images (cubin, or fatbin with ``+PTX``), one variant alone or several in one nvcc run.

nvcc spends most of a small kernel's compile parsing the CUDA, CuTe and CUTLASS headers every
TileLang kernel includes (cicc 0.55 s of 0.7 s for an elementwise kernel with nvcc 13.0; a GEMM's
own code adds ~0.45 s). :func:`compile_images` therefore compiles a batch of variants (same arch,
same flags) to PTX in one translation unit, each variant's kernels renamed by a macro so that
their names cannot collide, then makes each variant's image by ptxas from its own PTX
(:func:`tl_aot.cuda.ptx_split.split_variant`). A variant compiled alone goes through the same split,
so its image is byte-identical whether it was built alone, in any batch, or on a cluster worker.
The CUDA source each variant's image comes from is TileLang's, unchanged: the batch file only
``#include`` s it.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..common.arch import Arch
from ..common.errors import CompileError, FailedProcessError, TlAotError
from ..common.fileutil import write_file, write_if_different
from .arch_traps import ArchTrapped, ptx_arch_trap
from .cuda_toolkit import Toolkit, find_toolkit
from .nvcc_command import map_ptx_paths, nvcc_command, nvrtc_options, source_prefix_map
from .nvrtc_compile import compile_ptx, drop_unused_globals
from .ptx_split import entry_names, kernel_prefix, split_variant, split_variants
from .toolchain import compiler_launcher, run

__all__ = ["Unit", "compile_image", "compile_images", "batch_problem", "kernel_names"]

_GLOBAL = re.compile(r'^extern "C" __global__ (.*)$', re.M)
_ATTRIBUTE = re.compile(r"\b__\w+__\s*\([^()]*\)")  # __launch_bounds__(256, 1), __cluster_dims__(2, 1, 1)
_NAME = re.compile(r"^void\s+([A-Za-z_]\w*)\s*\(")
#: TileLang's guard for old MSVC (never true under nvcc on Linux): the one macro block a batchable source may hold.
_MSVC_BLOCK = re.compile(r"^#if defined\(_MSC_VER\)[^\n]*\n(?:(?!#endif).*\n)*?#endif\n", re.M)


@dataclass(frozen=True)
class Unit:
    """One variant's CUDA source to compile: ``stem`` names its files (``<stem>.cu``) and its image; ``what`` its errors."""

    stem: str
    source: str
    what: str


def kernel_names(source: str) -> list[str]:
    """The ``extern "C" __global__`` functions the source declares, in order, each once ("" for one not understood)."""
    names = []
    for rest in _GLOBAL.findall(source):
        m = _NAME.match(_ATTRIBUTE.sub("", rest).strip())
        names.append(m.group(1) if m else "")
    return list(dict.fromkeys(names))


def batch_problem(source: str) -> str:
    """Why ``source`` must be compiled alone ("" if it may share a translation unit).

    Sharing is safe for what TileLang generates: ``#include`` lines (each header guarded) and
    ``extern "C"`` kernels. A macro defined or removed, or any other definition at file scope, could
    change or clash with the next source in the batch: such a source is compiled alone. (A
    ``#pragma unroll`` inside a kernel is its own.)
    """
    names = kernel_names(source)
    if not names:
        return 'no extern "C" __global__ kernel'
    if "" in names:
        return "a kernel whose name is not recognised"
    text = _MSVC_BLOCK.sub("", source)
    if re.search(r"^\s*#\s*(define|undef)\b", text, re.M):
        return "a preprocessor macro of its own"
    depth = 0
    for line in text.splitlines():
        s = line.strip()
        if depth == 0 and re.match(r"#\s*pragma\b", s):
            return f"a file-scope pragma ({s[:40]})"
        if depth == 0 and s and not s.startswith(("#", 'extern "C" __global__', "//", "}")):
            return f"a file-scope definition ({s[:40]})"
        depth += line.count("{") - line.count("}")
    return ""


def compile_image(arch: Arch, workdir: Path, stem: str, source_text: str, options=(), *, what: str, path_map=()) -> bytes:
    """Compile TileLang's CUDA source for one arch into a cubin (or fatbin) and return its bytes.

    The source is kept as ``workdir/<stem>.cu`` (for error messages and debugging). nvcc runs in
    two steps, CUDA → PTX → image (the first through ``TL_AOT_COMPILER_LAUNCHER`` if set), so that
    the PTX's source paths can be made machine-independent
    (:func:`~tl_aot.cuda.nvcc_command.map_ptx_paths`) and the PTX reduced to the variant's own
    (:func:`~tl_aot.cuda.ptx_split.split_variant`, as a batch does); ``path_map`` ((old, new) folder
    pairs) respells more paths (a cluster worker's copy of the sources as the driver's folder). Its
    outputs go to a private temporary folder: a build killed half way, or an nvcc it orphaned,
    never leaves a file a later build could read.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    _sweep_stale(workdir, f".{stem}.")
    cu = f"{stem}.cu"
    write_if_different(workdir / cu, source_text)
    tmp = Path(tempfile.mkdtemp(prefix=f".{stem}.", dir=workdir))
    tk = find_toolkit()
    try:
        if tk.kind == "nvrtc":
            return _nvrtc_image(tk, arch, workdir, tmp, cu, source_text, options, what=what)
        ptx = _ptx(arch, workdir, tmp, cu, stem, options, what=what, path_map=path_map, launcher=compiler_launcher())
        split = split_variant(ptx)
        return _image(arch, tmp, stem, split.text or ptx, options, what=what)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def compile_images(
    arch: Arch, workdir: Path, units: list[Unit], options=(), *, path_map=(), on_done=None, on_batch=None
) -> dict[str, bytes | TlAotError]:
    """Each unit's image (or the error of its compile alone), its CUDA compiled to PTX with the others' in one nvcc run.

    ``on_done(stem, image or error)``, if given, is called as each unit's result is known (the
    build stores each image then, rather than when the whole batch is done). ``on_batch(stems)``,
    if given, is called once with the stems whose images came from the one shared nvcc run (a
    cluster worker reports it, so the driver can say how its variants were compiled).

    Falls back to :func:`compile_image` for each unit where a batch cannot be used (a compiler
    launcher such as sccache keys single files; the CUDA 12 NVRTC compiler; a source that must be
    compiled alone, :func:`batch_problem`), for a unit whose kernels cannot be split out of the
    batch's PTX, and for every unit when the batch fails (each then reports its own error).
    """
    results: dict[str, bytes | TlAotError] = {}

    def done(stem: str, result: bytes | TlAotError) -> None:
        results[stem] = result
        if on_done is not None:
            on_done(stem, result)

    batch = [u for u in units if not _alone(u, workdir)]
    if len(batch) > 1:
        _batch(arch, workdir, batch, options, path_map=path_map, done=done)
        shared = [u.stem for u in batch if u.stem in results]
        if shared and on_batch is not None:
            on_batch(shared)
    for u in [u for u in units if u.stem not in results]:
        try:
            image = compile_image(arch, workdir, u.stem, u.source, options, what=u.what, path_map=path_map)
        except TlAotError as e:
            done(u.stem, e)
        else:
            done(u.stem, image)
    return results


def _alone(unit: Unit, workdir: Path) -> bool:
    return bool(compiler_launcher() or find_toolkit().kind == "nvrtc" or batch_problem(unit.source) or re.search(r'["\\\n]', str(workdir)))


def _batch(arch: Arch, workdir: Path, units: list[Unit], options, *, path_map, done) -> None:
    """The images of ``units`` from one PTX, each passed to ``done(stem, image)``; the caller compiles the others alone."""
    workdir.mkdir(parents=True, exist_ok=True)
    _sweep_stale(workdir, ".batch.")
    tmp = Path(tempfile.mkdtemp(prefix=".batch.", dir=workdir))
    lines = [f"// tl_aot: {len(units)} variant(s) of one arch compiled to PTX together; each image is made from its own part."]
    for i, u in enumerate(units):
        write_if_different(workdir / f"{u.stem}.cu", u.source)
        names = kernel_names(u.source)
        lines += [f"#define {k} {kernel_prefix(i)}{k}" for k in names]
        lines.append(f'#include "{(workdir / u.stem).resolve()}.cu"')
        lines += [f"#undef {k}" for k in names]
    write_file(tmp / "batch.cu", "\n".join(lines) + "\n")
    try:
        try:
            what = f"nvcc (a batch of {len(units)} variants, {arch})"
            ptx = _ptx(arch, tmp, tmp, "batch.cu", "batch", options, what=what, path_map=path_map, prefix_dir=workdir)
        except TlAotError:
            return  # each unit alone, each with its own error
        prefixes = tuple(kernel_prefix(i) for i in range(len(units)))
        if not all(name.startswith(prefixes) for name in entry_names(ptx)):
            return  # a kernel the macros did not rename: each unit alone
        for u, split in zip(units, split_variants(ptx, [kernel_prefix(i) for i in range(len(units))])):
            if split.problem:
                continue
            try:
                done(u.stem, _image(arch, tmp, u.stem, split.text, options, what=u.what))
            except ArchTrapped as e:  # its own PTX's verdict: compiled alone it would say the same
                done(u.stem, e)
            except TlAotError:  # alone it reports its own error
                continue
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _ptx(
    arch: Arch, cwd: Path, tmp: Path, cu: str, stem: str, options, *, what: str, path_map=(), prefix_dir: Path | None = None, launcher=()
) -> str:
    """CUDA → PTX (nvcc's front end, through the compiler ``launcher`` if any), its ``.file`` paths respelled machine-independently.

    Under a launcher (sccache, ccache) only this step goes through it: it is nearly all of nvcc's
    time, sccache caches ``nvcc --ptx`` (its "PTX" hits), and ptxas then runs here on the PTX whose
    paths were respelled, so the image is the same bytes as without a launcher, in any folder.
    """
    ptx = tmp / f"{stem}.ptx"
    # cicc hashes the source's absolute path into internal symbol names (_INTERNAL_<hash>_):
    # name the source by its bare name so the PTX does not depend on the build folder. One argument
    # (``-Xcicc=a,b``): sccache takes the separate form's second value for a second input file.
    stable = [f"-Xcicc=--orig_src_path_name,{cu}"] if "," not in cu else ["-Xcicc", "--orig_src_path_name", "-Xcicc", cu]
    try:
        run([*launcher, *nvcc_command(arch, cu, str(ptx), [*stable, *options], stage="ptx")], what=what, cwd=cwd)
    except FailedProcessError as e:
        if "orig_src_path_name" not in e.stderr + e.stdout:
            raise
        run([*launcher, *nvcc_command(arch, cu, str(ptx), options, stage="ptx")], what=what, cwd=cwd)  # an nvcc without it
    extra = [(old.rstrip("/") + "/", new.rstrip("/") + "/") for old, new in path_map]
    prefixes = sorted([*extra, *source_prefix_map(prefix_dir or cwd)], key=lambda kv: -len(kv[0]))
    return map_ptx_paths(ptx.read_text(), prefixes)


def _image(arch: Arch, tmp: Path, stem: str, ptx_text: str, options, *, what: str) -> bytes:
    """PTX → the image (ptxas; with ``+PTX`` the PTX packed beside it), in ``tmp``.

    A ``+PTX`` image whose PTX holds TileLang's arch trap is refused first (:class:`ArchTrapped`):
    packed in the fatbin, compressed, the trap could not be seen, and the driver's compile of the
    PTX for a newer GPU keeps it.
    """
    if arch.ptx:
        trap = ptx_arch_trap(ptx_text)
        if trap is not None:
            raise ArchTrapped(trap, what)
    ptx = tmp / f"{stem}.ptx"
    write_file(ptx, ptx_text)
    out = f"{stem}.{'fatbin' if arch.ptx else 'cubin'}"
    run(nvcc_command(arch, ptx.name, out, options), what=what, cwd=tmp)
    return (tmp / out).read_bytes()


def _nvrtc_image(tk: Toolkit, arch: Arch, workdir: Path, tmp: Path, cu: str, source_text: str, options, *, what: str) -> bytes:
    """The CUDA 12 pip compiler's image: NVRTC (CUDA C++ → PTX, paths made stable) then ptxas (PTX → cubin)."""
    if arch.ptx:
        msg = (
            f"{what}: {arch} needs a PTX fallback packed with the image (fatbinary), which the CUDA 12 compiler "
            "from PyPI lacks (NVIDIA publishes NVRTC and ptxas for CUDA 12, not nvcc); build "
            f"--arch {arch.sm.removeprefix('sm_')} without +PTX, or with tl_aot[build-cu13] or a CUDA toolkit"
        )
        raise CompileError(msg)
    nv, px = nvrtc_options(arch, options)
    ptx = drop_unused_globals(compile_ptx(tk.nvrtc, source_text, cu, nv, what=f"{what}: {workdir / cu}"))
    write_file(tmp / f"{Path(cu).stem}.ptx", map_ptx_paths(ptx, source_prefix_map(workdir)))
    out = f"{Path(cu).stem}.cubin"
    run([tk.ptxas, *px, f"{Path(cu).stem}.ptx", "-o", out], what=what, cwd=tmp)
    return (tmp / out).read_bytes()


def _sweep_stale(folder: Path, prefix: str, age_s: float = 3600.0) -> None:
    """Remove ``prefix*`` temporary folders older than ``age_s`` (left by a killed build)."""
    now = time.time()
    with contextlib.suppress(OSError):
        for p in folder.iterdir():
            if p.name.startswith(prefix) and p.is_dir():
                with contextlib.suppress(OSError):
                    if now - p.stat().st_mtime > age_s:
                        shutil.rmtree(p, ignore_errors=True)
