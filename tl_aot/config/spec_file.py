"""A TOML/JSON spec file: a library's entries, read into a :class:`~tl_aot.config.kernel_spec.LibrarySpec`.

The file's tables are checked for type and keys here; each entry is made (and checked) by
:func:`~tl_aot.config.kernel_spec.entry_specs`, the same as a setup.py entry, and its archs chosen by
:func:`~tl_aot.config.arch_choice.resolve_archs`. ``[library] capture`` records are handed on as
:class:`~tl_aot.config.kernel_spec.CaptureSource` for the build layer to expand (the spec layer never reads
a record).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ..common.arch import Arch
from ..common.errors import SpecError
from ..common.fileutil import StrPath
from ..common.json_types import JsonObject
from ..common.keycheck import check_keys, expect, expect_str, expect_str_list, expect_table
from .arch_choice import ArchChoice, Given, env_archs, parse_given, resolve_archs
from .kernel_spec import CaptureSource, KernelSpec, LibrarySpec, entry_specs
from .values import from_spec_value

__all__ = ["load_spec_file", "archs_at", "archs_from_env", "TOP_KEYS", "LIBRARY_KEYS"]

#: Entry keys whose tables may spell values as ``{_expr_ = "..."}`` / ``{_target_ = "..."}``.
_VALUE_KEYS = frozenset({"args", "factory_args", "jit_args", "specialisations", "specializations"})
#: Keys of a spec file's top level and of its ``[library]`` table.
TOP_KEYS = ("library", "entry", "entries")
LIBRARY_KEYS = ("name", "archs", "device", "capture", "torch_ops")


def load_spec_file(
    path: StrPath,
    *,
    archs: object = None,
    name: str | None = None,
    device: str | None = None,
    log: Callable[[str], None] | None = None,
) -> LibrarySpec:
    """Read a TOML or JSON spec file listing entries (paths in it are relative to the file).

    ``[library] name / archs`` set defaults; each ``[[entry]]`` has ``name``, ``source``,
    ``function``, optional ``args`` (a table), ``archs``, ``pass_configs``, ``compile_flags`` and
    ``device`` (the GPU profile device queries see while lowering; also a ``[library]`` default).
    ``archs`` (from the command line) and ``TL_AOT_ARCHS`` override the file, as ``device`` does;
    ``log`` is told when ``TL_AOT_ARCHS`` decides. ``[library] torch_ops = true`` also builds the
    native torch companion (:mod:`tl_aot.codegen.torch_native`). ``[library] capture`` records are left
    in the result's ``captures`` (:func:`tl_aot.capture.record_specs.with_captures` expands them).
    """
    path = Path(path)
    lib, entries_data, captures = _spec_tables(path, _read_spec_data(path))
    if not entries_data and not captures:
        msg = f"{path}: no [[entry]] tables (and no [library] capture records)"
        raise SpecError(msg)
    override = resolve_archs(Given("--arch", archs), env_archs(), log=log)  # an explicit --arch beats TL_AOT_ARCHS
    library_archs = Given(f"{path}: [library] archs", lib.get("archs"))
    entries: list[KernelSpec] = []
    for i, ed in enumerate(entries_data):
        where = f"{path}: entry #{i + 1}"
        named = where + (f" ({ed['name']})" if isinstance(ed.get("name"), str) else "")
        table = {k: (from_spec_value(v, k) if k in _VALUE_KEYS else v) for k, v in ed.items()}
        made = entry_specs(table, where, named=named, base=path.parent, device=device or ed.get("device", lib.get("device")))
        chosen = resolve_archs(Given(override.origin, override.archs), declared=(Given(named, made[0].archs), library_archs))
        if not chosen.archs:
            msg = f"{named}: no archs (set [library] archs, the entry's archs, --arch or TL_AOT_ARCHS)"
            raise SpecError(msg)
        entries.extend(_bound(m, chosen.archs, named) for m in made)
    torch_ops = lib.get("torch_ops", False)
    if not isinstance(torch_ops, bool):
        msg = f"{path}: [library] torch_ops must be true or false, got {torch_ops!r}"
        raise SpecError(msg)
    return LibrarySpec(
        name=name or lib.get("name") or path.stem,
        entries=tuple(entries),
        torch_ops=torch_ops,
        captures=_capture_sources(path, captures, override, library_archs, device or lib.get("device", "")),
    )


def _bound(spec: KernelSpec, archs: tuple[Arch, ...], where: str) -> KernelSpec:
    """``spec`` bound to ``archs``; an error (a device no arch fits) names the entry table."""
    try:
        return spec.for_archs(archs)
    except SpecError as e:
        msg = f"{where}: {e}"
        raise SpecError(msg) from None


def _capture_sources(
    path: Path, records: tuple[str, ...], override: ArchChoice, library_archs: Given, device: str
) -> tuple[CaptureSource, ...]:
    """The ``[library] capture`` records with the archs (``--arch``, ``TL_AOT_ARCHS``, ``[library] archs``) they build for."""
    if not records:
        return ()
    chosen = resolve_archs(Given(override.origin, override.archs), declared=library_archs)
    if not chosen.archs:
        msg = f"{path}: [library] capture needs archs ([library] archs, --arch or TL_AOT_ARCHS)"
        raise SpecError(msg)
    return tuple(CaptureSource(path.parent / str(r), chosen.archs, device or "") for r in records)


def archs_from_env(default: tuple[Arch, ...] | None = None) -> tuple[Arch, ...] | None:
    """Archs from ``TL_AOT_ARCHS`` (``"80;90a"``), else ``default`` parsed, else None (kept for callers of tl_aot.spec)."""
    return resolve_archs(env=env_archs(), default=default).archs or None


def _spec_tables(path: Path, data: object) -> tuple[JsonObject, list[JsonObject], tuple[str, ...]]:
    """The ``[library]`` table, the entry tables and the capture records of a spec file, each checked for type and keys."""
    if not isinstance(data, dict):
        msg = f"{path}: the top level must be a table holding [library] and [[entry]] tables, got {type(data).__name__}"
        raise SpecError(msg)
    check_keys(data, TOP_KEYS, str(path))
    lib = expect_table(data.get("library", {}), "[library]", str(path), '[library] name = "mylib"')
    check_keys(lib, LIBRARY_KEYS, f"{path}: [library]")
    where = f"{path}: [library]"
    if "name" in lib:
        expect_str(lib["name"], "name", where, '"mylib"')
    if "archs" in lib:
        lib = {**lib, "archs": archs_at(lib["archs"], where)}
    if lib.get("device") is not None:
        expect_str(lib["device"], "device", where, '"H100-SXM"')
    captures = expect_str_list(lib.get("capture", ()), "capture", where, '["ops.capture.json"]')
    key = "entries" if "entries" in data and "entry" not in data else "entry"
    entries = data.get(key, [])
    if isinstance(entries, dict):
        entries = [entries]
    expect(entries, list, f"[[{key}]]", str(path), "a list of tables ([[entry]] blocks)")
    for i, ed in enumerate(entries):
        expect_table(ed, "each entry", f"{path}: entry #{i + 1}", '{name = "add", source = "k.py", function = "add"}')
    return lib, entries, captures


def archs_at(value: object, where: str) -> tuple[Arch, ...]:
    """Archs parsed now, so a wrong type names where they were given (a file and key, a setup.py argument)."""
    return parse_given(Given(where, value))


def _read_spec_data(path: Path) -> object:
    """The spec file's tables (TOML, or JSON for a ``.json`` file); errors name the file."""
    try:
        text = path.read_text()
    except OSError as e:
        msg = f"cannot read spec file {path}: {e.strerror}"
        raise SpecError(msg) from None
    try:
        if path.suffix == ".json":
            return json.loads(text)
        import tomllib  # type: ignore[import-not-found,unused-ignore]  # Python 3.11+: a TOML spec file needs it, a JSON one does not

        return tomllib.loads(text)
    except ValueError as e:  # JSONDecodeError and TOMLDecodeError are ValueErrors
        msg = f"{path}: not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {e}"
        raise SpecError(msg) from None
