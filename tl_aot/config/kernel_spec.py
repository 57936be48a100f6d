"""KernelSpec: one entry of a library (which function of which file, with which arguments), checked once when made.

Every front end (a spec file, setup.py, the CLI, CMake through the CLI, a capture record) makes
its entries with :meth:`KernelSpec.create` or :func:`entry_specs`, which validate each value once.
An entry may be made before its archs are known (``archs=None``: arch-free, as setup.py declares
it); :meth:`KernelSpec.for_archs` binds the archs :func:`tl_aot.config.arch_choice.resolve_archs` chose.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common.arch import Arch
from ..common.errors import SpecError
from ..common.keycheck import check_keys
from ..common.metadata import NamedRepr
from .arch_choice import Given, parse_given
from .capture_ref import CaptureRef
from .entry_checks import (
    BACKENDS,
    Levels,
    TuneConfigs,
    When,
    check_args,
    check_backend,
    check_device,
    check_levels,
    check_loose,
    check_out_idx,
    check_tune,
    check_when,
)
from .entry_keys import ENTRY_KEYS, create_keywords
from .function_path import is_function_path
from .spec_names import check_entry_name, check_identifier, check_library_name
from .values import NamedValues, spell

#: Field name -> its (name, spelled value) pairs: :meth:`KernelSpec.spelled_values`.
SpelledValues = dict[str, list[list[str]]]

#: A tuning record's choice for one arch: ``(arch, ((name, repr), ...), note)``.
TunedConfig = tuple[str, tuple[NamedRepr, ...], str]

__all__ = [
    "BACKENDS",
    "TunedConfig",
    "CaptureSource",
    "KernelSpec",
    "LibrarySpec",
    "check_backend",
    "check_out_idx",
    "entry_specs",
]


@dataclass(frozen=True)
class KernelSpec:
    """One entry of a library: ``function(**args)`` from ``source``, built for ``archs``, exported as ``name``."""

    name: str
    source: Path
    function: str
    args: NamedValues = ()  # (name, value) pairs, in the order given
    archs: tuple[Arch, ...] = ()  # empty: not bound yet (an arch-free entry, see for_archs)
    pass_configs: tuple[tuple[str, Any], ...] = ()  # extra TileLang pass configs as (key, value) pairs
    compile_flags: tuple[str, ...] = ()  # extra nvcc flags
    device: str = ""  # GPU profile answering device queries while lowering (tl_aot.gpu.device); "" = per-arch default
    out_idx: tuple[int | str, ...] | None = None  # outputs (indices, negative from the end, or names); None: the kernel's own out_idx
    export: str = ""  # the exported function this is one specialisation of ("": the entry is exported as itself)
    when: When = ()  # (symbol, lo, hi): dynamic dims this specialisation covers (inclusive)
    fallback: bool = False  # tried after every other specialisation of its export
    tune: TuneConfigs = ()  # candidate configs ((name, value) pairs each) of a plain factory, for python -m tl_aot tune
    tuned: tuple[TunedConfig, ...] = ()  # (arch, ((name, repr), ...), note) from a tuning record: the config built per arch
    factory_args: NamedValues = ()  # (name, value): only for the function named (level 0), never routed further
    jit_args: NamedValues = ()  # (name, value): only for the @tilelang.jit function the factory returns
    select: str = ""  # which kernel, when the factory gives several (a tuple index or dict key)
    imports: tuple[str, ...] = ()  # modules imported before the kernel file (registries they fill)
    capture: CaptureRef | None = None  # a kernel from a capture record, lowered from its IR (the record read once, by the build)
    backend: str = ""  # "cuda" (CUDA C++ through nvcc), "cutedsl" (TileLang's CuTeDSL backend); "": as the kernel file asks

    def __post_init__(self) -> None:
        if self.export:  # a specialisation: '<export>__s<i>' (no user name holds '__')
            check_identifier(self.export, "entry name")
        else:
            check_identifier(self.name, "entry name")
        if not is_function_path(self.function):
            msg = f"entry {self.name!r}: function {self.function!r} is not a Python function name (or Class.method)"
            raise SpecError(msg)

    def for_archs(self, archs: Iterable[Arch]) -> KernelSpec:
        """The entry bound to ``archs`` (Arch objects, as :func:`~tl_aot.config.arch_choice.resolve_archs` chose them).

        Only what depends on the archs is decided again: the device profile that fits them.
        """
        bound = tuple(archs)
        if not bound:
            msg = f"entry {self.name!r}: no arch given"
            raise SpecError(msg)
        return dataclasses.replace(self, archs=bound, device=check_device(self.device, bound, self.name))

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.args)

    def spelled_values(self) -> SpelledValues:
        """Its argument values and pass configs in their one spelling (:func:`~tl_aot.config.values.spell`), by field.

        What a cache key names of them (:func:`~tl_aot.pipeline.cache.variant_key`): a plan spells
        them once per entry, not once per arch.
        """
        fields = {"args": self.args, "factory_args": self.factory_args, "jit_args": self.jit_args, "pass_configs": self.pass_configs}
        return {field: [[k, spell(v)] for k, v in pairs] for field, pairs in fields.items()}

    def tuned_config(self, arch: str) -> tuple[dict[str, Any], str] | None:
        """The recorded config for ``arch`` (``sm_90a``) and where it came from, if a tuning record has one."""
        for a, chosen, note in self.tuned:
            if a == arch:
                return {k: ast.literal_eval(v) for k, v in chosen}, note
        return None

    @property
    def exported(self) -> str:
        """The library function this spec is called through."""
        return self.export or self.name

    def keywords(self) -> dict[str, Any]:
        """The :meth:`create` keywords that make this spec again: every key an entry declares (archs included).

        ``export``, ``when`` and ``fallback`` (a specialisation's), ``tuned`` (from a tuning record) and
        ``capture`` (from a capture record) are not declared by an entry's keys.
        """
        return {
            "name": self.name,
            "source": self.source,
            "function": self.function,
            "args": dict(self.args),
            "factory_args": dict(self.factory_args),
            "jit_args": dict(self.jit_args),
            "select": self.select or None,
            "imports": list(self.imports) or None,
            "archs": self.archs,
            "pass_configs": dict(self.pass_configs),
            "compile_flags": list(self.compile_flags),
            "device": self.device or None,
            "out_idx": self.out_idx,
            "tune": [dict(c) for c in self.tune] or None,
            "backend": self.backend or None,
        }

    @classmethod
    def create(
        cls,
        *,
        name: str,
        source: str | os.PathLike[str],
        function: str,
        args: Any = None,
        archs: Any = None,
        pass_configs: Any = None,
        compile_flags: Any = None,
        device: Any = None,
        out_idx: Any = None,
        specialisations: Any = None,
        tune: Any = None,
        factory_args: Any = None,
        jit_args: Any = None,
        select: Any = None,
        imports: Any = None,
        backend: Any = None,
    ) -> KernelSpec | tuple[KernelSpec, ...]:
        """Build a spec from loose user values (dicts, arch strings), validating each.

        ``archs`` None (or empty): an arch-free entry, bound later with :meth:`for_archs`.

        With ``specialisations`` (a list of ``{"args": {...}, "when": {...}, "fallback": bool}``)
        the result is a tuple of specs, one per specialisation, all exported as ``name``: their
        ``args`` update the shared ``args``. Without, a single :class:`KernelSpec`.
        """
        levels = check_levels(name, factory_args, jit_args, select, imports)
        if specialisations is not None:
            made = _specialised(name, source, function, args, archs, pass_configs, compile_flags, device, out_idx, specialisations, levels)
            shared = check_backend(backend, f"entry {name!r}")
            return tuple(dataclasses.replace(m, tune=check_tune(tune, name), backend=m.backend or shared) for m in made)
        args = check_args(args, name, "args")
        source, pass_configs, compile_flags = check_loose(name, source, pass_configs, compile_flags)
        given = Given(f"entry {name!r} ({source})", archs)
        parsed_archs = parse_given(given) if given.given else ()
        return cls(
            name=name,
            source=Path(source),
            function=function,
            args=tuple(args or ()),
            archs=parsed_archs,
            pass_configs=tuple(sorted((pass_configs or {}).items())),
            compile_flags=tuple(compile_flags or ()),
            device=check_device(device, parsed_archs, name),
            out_idx=check_out_idx(out_idx, name),
            tune=check_tune(tune, name),
            backend=check_backend(backend, f"entry {name!r}"),
            **levels,
        )


_SPECIALISATION_KEYS = frozenset({"args", "when", "fallback", "factory_args", "jit_args", "backend"})


def _specialised(
    name: str,
    source: str | os.PathLike[str],
    function: str,
    args: Any,
    archs: Any,
    pass_configs: Any,
    compile_flags: Any,
    device: Any,
    out_idx: Any,
    items: Any,
    levels: Levels,
) -> tuple[KernelSpec, ...]:
    """One :class:`KernelSpec` per specialisation of entry ``name``, exported under that one name."""
    check_identifier(name, "entry name")
    if isinstance(items, dict) or not isinstance(items, (list, tuple)) or not items:
        msg = f"entry {name!r}: specialisations must be a non-empty list of tables ({{args = {{...}}, when = {{...}}, fallback = true}})"
        raise SpecError(msg)
    if len(items) > 64:
        msg = f"entry {name!r}: {len(items)} specialisations; at most 64 per entry"
        raise SpecError(msg)
    base = dict(args.items() if isinstance(args, dict) else (args or ()))
    out = []
    for i, item in enumerate(items):
        where = f"entry {name!r}: specialisation #{i + 1}"
        if not isinstance(item, dict) or set(item) - _SPECIALISATION_KEYS:
            extra = sorted(set(item) - _SPECIALISATION_KEYS) if isinstance(item, dict) else [type(item).__name__]
            msg = f"{where}: expected a table with args, factory_args, jit_args, backend, when, fallback; got {', '.join(map(str, extra))}"
            raise SpecError(msg)
        own = item.get("args") or {}
        if not isinstance(own, dict):
            msg = f"{where}: args must be a table"
            raise SpecError(msg)
        own_levels = {key: {**dict(levels[key]), **dict(check_args(item.get(key), name, key))} for key in ("factory_args", "jit_args")}
        spec = KernelSpec.create(
            name=f"{name}__s{i}",
            source=source,
            function=function,
            args={**base, **own},
            archs=archs,
            pass_configs=pass_configs,
            compile_flags=compile_flags,
            device=device,
            out_idx=out_idx,
            select=levels["select"] or None,
            imports=levels["imports"],
            backend=check_backend(item.get("backend"), where) or None,
            **own_levels,
        )
        assert isinstance(spec, KernelSpec)  # no specialisations given: one spec
        fallback = item.get("fallback", False)
        if not isinstance(fallback, bool):
            msg = f"{where}: fallback must be true or false"
            raise SpecError(msg)
        out.append(dataclasses.replace(spec, export=name, when=check_when(item.get("when"), where), fallback=fallback))
    return tuple(out)


@dataclass(frozen=True)
class LibrarySpec:
    """A shared library to build: its name, its entries, and whether it gets native torch ops (a companion)."""

    name: str
    entries: tuple[KernelSpec, ...] = field(default=())
    torch_ops: bool = False  # also build lib<name>_torch.so: the entries as native torch operators
    captures: tuple[CaptureSource, ...] = ()  # records whose kernels become entries (tl_aot.capture.record_specs.with_captures)

    def bound(self) -> LibrarySpec:
        """The library itself, refused if an entry is still arch-free (never bound with :meth:`KernelSpec.for_archs`)."""
        for e in self.entries:
            if not e.archs:
                msg = f"library {self.name!r}: entry {e.name!r}: no arch given"
                raise SpecError(msg, entry=e.name)
        return self

    @property
    def exports(self) -> tuple[str, ...]:
        """The library's function names, in order (specialisations of one entry share one)."""
        return tuple(dict.fromkeys(e.exported for e in self.entries))

    def __post_init__(self) -> None:
        check_library_name(self.name)
        seen = set()
        exports: dict[str, bool] = {}  # exported name -> is it specialised
        for e in self.entries:
            check_entry_name(e.exported, self.name)
            if e.name in seen or (e.exported in exports and not (e.export and exports[e.exported])):
                msg = f"library {self.name!r}: entry {e.exported!r} is listed twice"
                raise SpecError(msg)
            seen.add(e.name)
            exports[e.exported] = bool(e.export)
        if not self.entries and not self.captures:
            msg = f"library {self.name!r} has no entries"
            raise SpecError(msg)


@dataclass(frozen=True)
class CaptureSource:
    """A capture record whose kernels a library builds (``[library] capture``), expanded by the build layer.

    The spec layer never reads a record: :func:`tl_aot.capture.record_specs.with_captures` turns each into entries.
    """

    record: Path
    archs: tuple[Arch, ...]
    device: str = ""


#: Entry keys whose values are required.
_REQUIRED = ("name", "source", "function")


def entry_specs(
    table: Mapping[str, Any], where: str, *, named: str | None = None, base: Path | None = None, device: str | None = None
) -> tuple[KernelSpec, ...]:
    """The KernelSpec(s) an entry table declares (a spec file's ``[[entry]]``, a setup.py dict), each value checked once.

    ``where`` prefixes every error (``TileLangExtension('pkg._k')``), ``named`` those past the
    required keys (default ``<where>: entry '<name>'``; a spec file gives ``spec.toml: entry #2
    (gemm)``). A relative ``source`` is taken from ``base`` when given; ``device`` (a library-wide
    override) beats the entry's. The entry's own ``archs`` are kept (checked now); without them the
    specs are arch-free, for the front end to bind with :meth:`KernelSpec.for_archs`.
    """
    missing = [k for k in _REQUIRED if k not in table]
    label = named or where + (f": entry {table['name']!r}" if isinstance(table.get("name"), str) else "")
    check_keys(table, ENTRY_KEYS, label)
    if missing:
        msg = f"{where}: missing key(s) {', '.join(missing)}"
        raise SpecError(msg)
    given = create_keywords(table)
    if isinstance(given["source"], str) and base is not None:
        given["source"] = base / given["source"]
    own = Given(label, given.get("archs"))
    given["archs"] = parse_given(own) if own.given else None
    given["device"] = device or given.get("device")
    try:
        made = KernelSpec.create(**given)
    except SpecError as e:
        msg = f"{named or where}: {e}"
        raise SpecError(msg) from None
    return made if isinstance(made, tuple) else (made,)
