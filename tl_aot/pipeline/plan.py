"""The first stage of a build: from specs to variants, their keys, and what the cache already holds.

:func:`plan_build` is where the build reads its :class:`~tl_aot.config.kernel_spec.LibrarySpec`, once:
it turns capture records into entries, binds the archs, finds the CUDA compiler that builds them
(:func:`tl_aot.cuda.compiler_choice.check_toolchain`), reads each entry's Python sources once (a
:class:`~tl_aot.config.user_code.SourceSnapshot`: the keys are made from exactly those bytes, and
the lower stage checks them again), keys every (entry, arch) variant and the library
(:mod:`tl_aot.pipeline.cache`) and looks the keys up in the cache, all without importing TileLang.
Whether the library on disk is still the one these keys make: :mod:`tl_aot.pipeline.stamp`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..capture.record_specs import with_captures
from ..common.arch import Arch
from ..common.metadata import LoweredVariant
from ..common.versions import package_version
from ..config.kernel_spec import KernelSpec, LibrarySpec
from ..config.user_code import SourceSnapshot, snapshot_files, snapshot_sources
from ..cuda.compiler_choice import check_toolchain
from ..jit.walk_digest import walk_digest
from .cache import KeyTools, VariantCache, library_key, variant_key
from .image_packs import ImagePacks

if TYPE_CHECKING:
    from .shared_cache import SharedCache

__all__ = ["Task", "Plan", "shard_of", "plan_build"]


@dataclass(frozen=True)
class Task:
    """One variant to have in the library: an entry built for one arch, and its cache key."""

    spec: KernelSpec
    arch: Arch
    key: str
    sources: SourceSnapshot  # the entry's kernel file and local modules, as read for the key

    @property
    def project(self) -> Path | None:
        """The kernel file's project root, found once per entry with its sources (none for a captured kernel).

        Cache entries store the paths under it relative to it (:func:`~tl_aot.pipeline.cache.relocate`).
        """
        return self.sources.project


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
        values = spec.spelled_values()  # once per entry: every arch's key names them
        # the kernel file and the local modules it imports, read now (none for a captured kernel: the record is its source)
        sources = snapshot_files([]) if spec.capture else snapshot_sources(spec.source, spec.imports)
        deps.update(sources.paths)
        tasks += [
            Task(spec, arch, variant_key(spec, arch, sources, values, nvcc_version=nvcc_version, tools=tools), sources)
            for arch in spec.archs
        ]
    tvm_ffi = package_version("apache-tvm-ffi")
    # every key at once: a shared cache lists its folder and reads what it holds in one batch
    hits = {} if force else _labelled(tasks, cache.load_many([(t.key, t.project) for t in tasks]))
    # what labels variants without their keys: a captured kernel's label, spelled here; the walk that spelled a kernel file's
    labels = [t.spec.capture.kernel.built_from for t in tasks if t.spec.capture]
    labels += [walk_digest()] if any(t.spec.capture is None for t in tasks) else []
    lib_key = library_key(lib.name, [t.key for t in tasks], tvm_ffi_version=tvm_ffi, packs=packs, labels=labels)
    return Plan(lib, tuple(tasks), lib_key, nvcc_version, tvm_ffi, hits, tuple(sorted(deps)))


def _labelled(tasks: Sequence[Task], hits: dict[str, tuple[LoweredVariant, bytes]]) -> dict[str, tuple[LoweredVariant, bytes]]:
    """``hits`` with each captured variant's "built from" label spelled from its record now, not as the cache kept it.

    The variant key covers the record's kernel, not the tl_aot code that spells the label
    (:attr:`~tl_aot.config.capture_ref.CapturedKernel.built_from`): a hit keeps its image and
    metadata and shows this tl_aot's label (the library key covers the labels, so it is relinked).
    A kernel file's label is the walk's, made while lowering: :mod:`tl_aot.pipeline.relabel`.
    """
    for t in tasks:
        hit = hits.get(t.key)
        if hit is not None and t.spec.capture is not None and hit[0].resolved != t.spec.capture.kernel.built_from:
            hits[t.key] = (replace(hit[0], resolved=t.spec.capture.kernel.built_from), hit[1])
    return hits
