"""The library's manifest: each entry's head from its spec, its variants from what was lowered, the driver floor.

What a one-machine build (:func:`manifest_of`, from specs) and ``python -m tl_aot link`` (:func:`manifest_from`,
from the shards' entry heads) both embed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import TYPE_CHECKING

from ..capture.record_specs import choices_of, recorded_calls, recorded_tunings
from ..common.errors import LoweringError, ToolchainNotFound
from ..common.metadata import ABI_VERSION, ArchVariant, LoweredEntry, LoweredVariant, Manifest, NamedRepr
from ..common.versions import __version__, package_version
from ..config.kernel_spec import KernelSpec, LibrarySpec
from ..config.user_code import display_path
from ..config.values import spell
from ..cuda.toolchain import compiler_description
from ..gpu.cuda_compat import image_floor, library_floor

if TYPE_CHECKING:
    pass

__all__ = ["manifest_of", "entry_head", "manifest_from", "compiler_or_none"]


def manifest_of(
    lib: LibrarySpec, tasks, lowered: Mapping[str, LoweredVariant], nvcc_version: str, image_sizes: Mapping[str, int] | None = None
) -> Manifest:
    """The library's manifest from each task's lowered variant; image sizes are 0 until nvcc is done."""
    by_entry: dict[int, list] = {}  # id(spec) -> its (arch, key)s: one pass over the tasks, whatever the entry count
    for t in tasks:
        by_entry.setdefault(id(t.spec), []).append((t.arch, t.key))
    heads = [(entry_head(spec), by_entry.get(id(spec), [])) for spec in lib.entries]
    manifest = manifest_from(lib.name, heads, lowered, nvcc_version, package_version("tilelang"), image_sizes)
    records = choices_of(lib.entries)  # as read with the entries: the records are not read again
    if records:  # the autotuner's recorded choices and the served call keys whose kernels the library holds
        held = {e.capture_key for e in manifest.entries}
        manifest = replace(manifest, tunings=recorded_tunings(records, held), calls=recorded_calls(records, held))
    return manifest


def entry_head(spec: KernelSpec) -> LoweredEntry:
    """The part of an entry's manifest record its spec decides (no params, symbols or variants yet)."""
    return LoweredEntry(
        name=spec.name,
        source=display_path(spec.source),
        function=spec.function,
        args=_spelled_args(spec),
        params=(),
        symbols=(),
        variants=(),
        export=spec.export,
        when=spec.when,
        fallback=spec.fallback,
        capture_key=spec.capture.key if spec.capture else "",
        capture_name=spec.capture.jit if spec.capture else "",
        captured_on=spec.capture.kernel.device_names if spec.capture else (),
    )


def manifest_from(
    name: str,
    heads,
    lowered: Mapping[str, LoweredVariant],
    nvcc_version: str,
    tilelang_version: str,
    image_sizes: Mapping[str, int] | None = None,
    *,
    compiler: str | None = None,
) -> Manifest:
    """The manifest of library ``name``: ``heads`` are (:func:`entry_head`, [(arch, key), ...]) in the library's order.

    Also what ``python -m tl_aot link`` makes from build shards, which hold heads and variants, not
    specs; ``compiler`` (default: this machine's) is then the one the shards recorded.
    """
    entries = []
    for head, arch_keys in heads:
        first = lowered[arch_keys[0][1]]
        for _, key in arch_keys[1:]:
            v = lowered[key]
            if (v.params, v.symbols) != (first.params, first.symbols):
                msg = (
                    f"entry {head.name!r}: its signature differs between {first.arch} and {v.arch} "
                    f"({_sig(first)} vs {_sig(v)}); one entry must take the same arguments on every arch"
                )
                raise LoweringError(msg)
        sizes = image_sizes or {}
        variants = tuple(_arch_variant(arch, lowered[key], sizes.get(key, 0), nvcc_version) for arch, key in arch_keys)
        entries.append(replace(head, params=first.params, symbols=first.symbols, variants=variants))
    floor = library_floor(_pair(v.min_driver_cuda) for e in entries for v in e.variants)
    return Manifest(
        abi_version=ABI_VERSION,
        library=name,
        entries=tuple(entries),
        tl_aot_version=__version__,
        tilelang_version=tilelang_version,
        nvcc_version=nvcc_version,
        compiler=compiler_or_none() if compiler is None else compiler,
        driver_min_cuda=floor.min_cuda,
        driver_min_version=floor.min_version,
    )


def compiler_or_none() -> str:
    """The compiler's description, or "" where none is found (a manifest made without building images)."""
    try:
        return compiler_description()
    except ToolchainNotFound:
        return ""


def _pair(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


#: What an image's record takes from its lowered variant as it is: every field the two share by name
#: but ``arch`` (the task's, the one it was lowered for); the rest is the image's own.
_AS_LOWERED = tuple(f.name for f in fields(ArchVariant) if f.name in {g.name for g in fields(LoweredVariant)} and f.name != "arch")


def _arch_variant(arch, v: LoweredVariant, image_bytes: int, compiler_version: str) -> ArchVariant:
    cuda = compiler_version.split()[0] if v.backend == "cuda" else ""  # CuTeDSL images come from its own compiler
    floor = image_floor(cuda or "12.0", ptx=arch.ptx, backend=v.backend)
    return ArchVariant(
        **{name: getattr(v, name) for name in _AS_LOWERED},
        arch=arch,
        image_bytes=image_bytes,
        image_kind="fatbin" if arch.ptx else "cubin",
        cuda_version=cuda,
        min_driver_cuda=f"{floor[0]}.{floor[1]}",
    )


def _spelled_args(spec: KernelSpec) -> tuple[NamedRepr, ...]:
    """The entry's arguments as the manifest shows them; pinned ones as ``factory_args.x`` / ``jit_args.x``."""
    if spec.capture:
        return spec.capture.args  # the captured call's arguments, as recorded
    out = [(k, spell(v)) for k, v in spec.args]
    out += [(f"factory_args.{k}", spell(v)) for k, v in spec.factory_args]
    out += [(f"jit_args.{k}", spell(v)) for k, v in spec.jit_args]
    if spec.select:
        out.append(("select", repr(spec.select)))
    return tuple(out)


def _sig(v: LoweredVariant) -> str:
    return ", ".join(f"{p.name}:{p.dtype}{list(p.shape) if p.is_tensor else ''}" for p in v.params)
