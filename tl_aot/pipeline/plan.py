"""The first stage of a build: from specs to variants, their keys, and what the cache already holds.

:func:`plan_build` is where the build reads its :class:`~tl_aot.config.kernel_spec.LibrarySpec`, once:
it turns capture records into entries, binds the archs, finds the CUDA compiler
(:func:`check_toolchain`), reads each entry's Python sources once (a :class:`~tl_aot.config.user_code.SourceSnapshot`:
the keys are made from exactly those bytes, and the lower stage checks them again), keys every
(entry, arch) variant and looks the keys up in the cache, all without importing TileLang. Whether
the library on disk is still the one these keys make: :mod:`tl_aot.pipeline.stamp`.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..capture.record_specs import with_captures
from ..common.arch import Arch
from ..common.errors import SpecError, ToolchainNotFound
from ..common.metadata import ABI_VERSION, LoweredVariant
from ..common.versions import __version__, package_version
from ..config.kernel_spec import KernelSpec, LibrarySpec
from ..config.user_code import SourceSnapshot, display_path
from ..cuda.cuda_toolkit import find_toolkit, pin_toolkit, pip_toolkits
from ..cuda.host_identity import host_compiler
from ..cuda.toolchain import compiler_description, nvcc_version, point_tilelang_at_toolkit, supported_archs_of
from ..gpu.cuda_compat import COMPUTE_CAPABILITIES, min_cuda_for_arch
from .cache import KeyTools, VariantCache, variant_key
from .image_packs import ImagePacks
from .inputs import generator_files, project_of, sources_of

if TYPE_CHECKING:
    from .shared_cache import SharedCache

__all__ = ["Task", "Plan", "shard_of", "plan_build", "check_toolchain", "generator_files"]


@dataclass(frozen=True)
class Task:
    """One variant to have in the library: an entry built for one arch, and its cache key."""

    spec: KernelSpec
    arch: Arch
    key: str
    sources: SourceSnapshot  # the entry's kernel file and local modules, as read for the key


@dataclass(frozen=True)
class Plan:
    """Every variant of the library, its key, and what the cache holds already."""

    lib: LibrarySpec
    tasks: tuple[Task, ...]
    lib_key: str  # changes with any variant key, the generator files, the versions
    nvcc_version: str
    tvm_ffi_version: str
    hits: dict[str, tuple[LoweredVariant, bytes]]  # key -> (variant, image) found valid in the cache
    deps: tuple[Path, ...]  # every kernel file and local module: what the depfile lists

    @property
    def todo(self) -> list[Task]:
        """The tasks to lower and compile in this build."""
        return [t for t in self.tasks if t.key not in self.hits]

    def shard(self, k: int, n: int) -> Plan:
        """The plan of shard ``k`` of ``n``: its share of the tasks (:func:`shard_of`) and of the cache hits.

        The library key stays the whole library's: every shard's part names the one library it is of.
        """
        mine = tuple(shard_of(self.tasks, k, n))
        return replace(self, tasks=mine, hits={t.key: self.hits[t.key] for t in mine if t.key in self.hits})


def shard_of(tasks: Sequence[Task], k: int, n: int) -> list[Task]:
    """The K-th of N shares of ``tasks`` (plan order): round robin, so every shard gets a mix of entries and archs."""
    return [t for i, t in enumerate(tasks) if i % n == k - 1]


def check_toolchain(lib: LibrarySpec) -> str:
    """Find the CUDA compiler, check it builds every arch asked for, point TileLang at it; returns its version.

    The compiler is found by :func:`tl_aot.cuda.cuda_toolkit.find_toolkit`'s one search order. When it is
    a pip-installed one and both CUDA 12 and 13 are installed (and ``TL_AOT_CUDA`` does not choose),
    the oldest that builds every arch is used: its libraries load on the most drivers. Errors name
    the entry, the arch, the compiler and the CUDA release the arch needs. The version returned
    (``13.0.88``, or ``12.9.86 (NVRTC)`` for the CUDA 12 pip compiler) keys the cache.
    """
    pin_toolkit(None)
    try:
        tk = find_toolkit()
    except ToolchainNotFound as e:
        msg = f"{_what(lib)}: {e}"
        raise ToolchainNotFound(msg) from None
    wanted = {arch.number for spec in lib.entries for arch in spec.archs}
    ptx = any(arch.ptx for spec in lib.entries for arch in spec.archs)
    if tk.origin == "pip" and not os.environ.get("TL_AOT_CUDA", "").strip():
        fits = (t for t in pip_toolkits() if wanted <= supported_archs_of(t) and not (ptx and t.kind == "nvrtc"))
        tk = next(fits, tk)
    pin_toolkit(tk)  # this build's compiler, whatever CUDA_HOME says next (point_tilelang_at_toolkit sets it)
    point_tilelang_at_toolkit()
    version = nvcc_version()
    known = supported_archs_of(tk)
    for spec in lib.entries:
        for arch in spec.archs:
            if known and arch.number not in known:
                msg = (
                    f"entry {spec.name!r} ({arch}) in {display_path(spec.source)}: {compiler_description()} cannot build "
                    f"{arch.sm}; it targets sm_{', sm_'.join(str(n) for n in sorted(known))}. {_why_not(arch, version, tk.origin)}"
                )
                raise SpecError(msg)
            if arch.ptx and tk.kind == "nvrtc":
                msg = (
                    f"entry {spec.name!r} ({arch}) in {display_path(spec.source)}: {compiler_description()} cannot pack "
                    "a PTX fallback with the image (NVIDIA publishes no fatbinary for CUDA 12 on PyPI); build "
                    f"--arch {arch.sm.removeprefix('sm_')} without +PTX, or with tl_aot[build-cu13] or a CUDA toolkit"
                )
                raise SpecError(msg)
    return version if tk.kind == "nvcc" else f"{version} (NVRTC)"


def _why_not(arch, version: str, origin: str) -> str:
    """Why a compiler lacks ``arch``: too old (naming the CUDA that has it), or no CUDA release targets it (a typo)."""
    need = min_cuda_for_arch(arch.number)
    have = tuple(int(x) for x in re.findall(r"\d+", version)[:2])
    if arch.number not in COMPUTE_CAPABILITIES:
        return f"{arch.sm} is no compute capability NVIDIA has released: check the spelling (e.g. sm_90a, 100a)"
    if len(have) == 2 and have >= need:
        return f"CUDA {have[0]}.{have[1]} no longer targets {arch.sm}: build it with an older CUDA (e.g. tl_aot[build-cu12])"
    hint = " (pip install 'tl_aot[build-cu13]')" if origin == "pip" and need >= (13, 0) else ""
    return f"{arch.sm} needs CUDA {'.'.join(map(str, need))} or newer{hint}"


def plan_build(lib: LibrarySpec, cache: VariantCache | SharedCache, *, force: bool = False, packs: ImagePacks | None = None) -> Plan:
    """The plan of ``lib``: its capture records' kernels as entries, the compiler checked, every variant keyed and looked up.

    Each entry's sources are read once and every key is looked up in the cache (none with
    ``force``). ``packs``: how the images are kept beside the library, which the library key covers.
    """
    lib = with_captures(lib).bound()
    nvcc_version = check_toolchain(lib)
    tasks: list[Task] = []
    deps: set[Path] = set()
    tools = KeyTools.here()  # once: every variant's key names the same tools
    for spec in lib.entries:
        sources = sources_of(spec)
        deps.update(sources.paths)
        tasks += [
            Task(spec, arch, variant_key(spec, arch, sources, nvcc_version=nvcc_version, tools=tools), sources) for arch in spec.archs
        ]
    tvm_ffi = package_version("apache-tvm-ffi")
    # every key at once: a shared cache lists its folder and reads what it holds in one batch
    hits = {} if force else cache.load_many([(t.key, project_of(t.spec)) for t in tasks])
    lib_key = _lib_key(lib, [t.key for t in tasks], tvm_ffi, packs)
    return Plan(lib, tuple(tasks), lib_key, nvcc_version, tvm_ffi, hits, tuple(sorted(deps)))


def _what(lib: LibrarySpec) -> str:
    """``library 'x' (entries a, b for sm_80, sm_90a)``: the subject of errors raised before any entry runs."""
    archs = sorted({str(a) for e in lib.entries for a in e.archs})
    names = ", ".join(e.name for e in lib.entries)
    return f"library {lib.name!r} (entr{'y' if len(lib.entries) == 1 else 'ies'} {names} for {', '.join(archs)})"


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()


def _lib_key(lib: LibrarySpec, keys: list[str], tvm_ffi_version: str, packs: ImagePacks | None) -> str:
    """The key of the whole library: every variant key, the generator files, the versions, the compilers, the image packs."""
    templates = "".join(sorted(_digest(f.name, f.read_text()) for f in generator_files()))
    try:  # which compiler (and from where) is recorded in the manifest: another one relinks, from cached images
        compiler = find_toolkit().describe
    except ToolchainNotFound:
        compiler = ""
    # the launcher's and runtime's compiler: another one (CXX changed) relinks, its objects keyed by it
    key = _digest(__version__, str(ABI_VERSION), lib.name, tvm_ffi_version, templates, compiler, host_compiler(), *keys)
    # the choice of image packs (and their hint) is embedded in the library
    return key if packs is None else hashlib.sha256(f"{key}\0{packs!r}".encode()).hexdigest()
