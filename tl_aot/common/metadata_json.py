"""Metadata as JSON and back: the one codec of :mod:`tl_aot.common.metadata`'s frozen dataclasses.

What a library embeds, the variant cache keeps, a shard's part holds and a cluster worker answers
is this JSON: dataclasses as objects (keys sorted, so builds are reproducible), tuples as lists,
an :class:`~tl_aot.common.arch.Arch` as ``"arch": "sm_80", "ptx": true``. Reading it back, the
field types say what to rebuild: a ``tuple[Param, ...]`` field holds records, an ``arch: Arch``
field an arch; fields a newer tl_aot added within one ABI version are skipped. Nothing here knows
the dataclasses by name, so the records import this module, never the other way round.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from .arch import Arch, parse_arch
from .escaping import json_text

__all__ = ["ManifestJson", "from_json", "manifest_json", "to_json", "to_plain"]

_T = TypeVar("_T")

_SCALARS = frozenset({str, int, float, bool, type(None)})
_FIELD_NAMES: dict[type, tuple[tuple[str, ...], bool] | None] = {}  # class -> (field names, typed arch), None: not a dataclass


def _typed_arch(fields: tuple[dataclasses.Field[Any], ...]) -> bool:
    """Whether the class's ``arch`` is an :class:`Arch` (``arch.ptx``: a fatbin with a PTX fallback), spelled ``arch`` + ``ptx``."""
    return any(f.name == "arch" and f.type in ("Arch", Arch) for f in fields)


def _field_names(cls: type) -> tuple[tuple[str, ...], bool] | None:
    """``cls``'s field names and whether its ``arch`` is typed, worked out once per class (None: not a dataclass)."""
    try:
        return _FIELD_NAMES[cls]
    except KeyError:
        if dataclasses.is_dataclass(cls):
            fields = dataclasses.fields(cls)
            known: tuple[tuple[str, ...], bool] | None = (tuple(f.name for f in fields), _typed_arch(fields))
        else:
            known = None
        _FIELD_NAMES[cls] = known
        return known


def _to_plain(obj: Any) -> Any:
    """``obj`` as JSON values: dataclasses as dicts, tuples as lists (a build's stamp and manifest: thousands of entries)."""
    cls = obj.__class__
    if cls in _SCALARS:
        return obj
    if cls is tuple or cls is list:
        return [_to_plain(v) for v in obj]
    known = _field_names(cls)
    if known is not None:
        names, typed_arch = known
        plain = {name: _to_plain(getattr(obj, name)) for name in names}
        if typed_arch:  # as variants have always been spelled: "arch": "sm_80", "ptx": true
            arch: Arch = obj.arch
            plain.update(arch=arch.sm, ptx=arch.ptx)
        return plain
    if isinstance(obj, (list, tuple)):
        return [_to_plain(v) for v in obj]
    return obj


def to_plain(obj: Any) -> Any:
    """A metadata dataclass as the JSON values :func:`to_json` writes (for a record that holds it among other values)."""
    return _to_plain(obj)


def _tuplify(value: list[Any]) -> tuple[Any, ...]:
    return tuple([_tuplify(v) if v.__class__ is list else v for v in value])


class _Plan(NamedTuple):
    """How :func:`_from_plain` rebuilds one dataclass, worked out once per class from its fields."""

    names: frozenset[str]
    nested: Mapping[str, type]  # fields holding records: field -> their dataclass
    typed_arch: bool  # ``arch`` is an :class:`Arch`, spelled ``arch`` + ``ptx``
    defaults: Mapping[str, Any] | None  # field -> its default (None when a field has a default factory or the class a __post_init__)
    required: frozenset[str]  # fields without a default


_PLANS: dict[type, _Plan] = {}  # dataclass -> its plan: a class's fields never change, so each is worked out once
_ARCHS: dict[str, Arch] = {}  # "sm_90a" / "sm_80+PTX" -> Arch (frozen: one instance serves every variant)
_ARCHS_LIMIT = 256
_RECORDS = re.compile(r"tuple\[(\w+), \.\.\.\]")  # a field holding records, as its type is spelled


def _records_held(cls: type) -> dict[str, type]:
    """The fields of ``cls`` typed ``tuple[<a dataclass>, ...]`` (field -> that dataclass): the ones holding records.

    A type spelled as text (``from __future__ import annotations``) is read, not evaluated: the
    first record an entry's first use parses pays for every class it holds.
    """
    names = vars(sys.modules[cls.__module__])
    held: dict[str, type] = {}
    for f in dataclasses.fields(cls):
        if isinstance(f.type, str):
            spelled = _RECORDS.fullmatch(f.type)
            item = names.get(spelled[1]) if spelled else None
        else:
            args = typing.get_args(f.type)
            item = args[0] if typing.get_origin(f.type) is tuple and len(args) == 2 and args[1] is Ellipsis else None
        if isinstance(item, type) and dataclasses.is_dataclass(item):
            held[f.name] = item
    return held


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        fields = dataclasses.fields(cls)
        names = frozenset(f.name for f in fields)
        defaults: dict[str, Any] | None = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
        if hasattr(cls, "__post_init__") or any(f.default_factory is not dataclasses.MISSING for f in fields):
            defaults = None  # built through its __init__
        required = frozenset(f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
        plan = _PLANS[cls] = _Plan(names, _records_held(cls), _typed_arch(fields), defaults, required)
    return plan


def _arch(spelled: str) -> Arch:
    arch = _ARCHS.get(spelled)
    if arch is None:
        arch = parse_arch(spelled)
        if len(_ARCHS) < _ARCHS_LIMIT:
            _ARCHS[spelled] = arch
    return arch


def _from_plain(cls: type[_T], data: Mapping[str, Any]) -> _T:
    """``cls`` rebuilt from its JSON object: lists become tuples, nested records their dataclasses.

    An entry's record is parsed on its first use while serving (:mod:`tl_aot.runtime.loader`), so
    this runs per entry in a user's process: the per-class facts come from :func:`_plan`, and a
    scalar value (most of them) is passed on without a call, and the frozen object is filled as its
    ``__init__`` would fill it (defaults, then the fields given) without a ``setattr`` per field;
    a record missing a required field goes through ``__init__``, which says which.
    """
    names, nested, typed_arch, defaults, required = _plan(cls)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in names:
            continue  # tolerate fields added by newer tl_aot within one ABI version
        sub = nested.get(key)
        if sub is not None:
            kwargs[key] = tuple([_from_plain(sub, v) for v in value])
        elif value.__class__ is list:
            kwargs[key] = _tuplify(value)
        else:
            kwargs[key] = value
    if typed_arch:  # read back as _to_plain wrote it
        kwargs["arch"] = _arch(str(data["arch"]) + ("+PTX" if data.get("ptx") else ""))
    if defaults is None or not required <= kwargs.keys():
        return cls(**kwargs)
    obj = object.__new__(cls)
    obj.__dict__.update(defaults)
    obj.__dict__.update(kwargs)
    return obj


def to_json(obj: Any, *, indent: int | None = None) -> str:
    """Serialise a metadata dataclass to JSON with stable key order (reproducible builds)."""
    return json_text(_to_plain(obj), indent=indent)


@dataclass(frozen=True)
class ManifestJson:
    """A manifest's :func:`to_json` text and each entry's, as the text holds it (what the index's spans are found by)."""

    text: str
    entries: tuple[str, ...]


def manifest_json(manifest: object) -> ManifestJson:
    """``to_json(manifest)`` and ``to_json(entry)`` of every entry of a ``Manifest``, from one conversion of the dataclasses.

    The link stage spells a whole library's manifest (tens of MB) once for the build id, the
    manifest unit, its index and the stamp: converting the dataclasses is most of the cost, so it
    is done once and only the JSON encoder runs per entry.
    """
    plain = _to_plain(manifest)
    return ManifestJson(json_text(plain), tuple(json_text(e) for e in plain["entries"]))


def from_json(cls: type[_T], text: str | Mapping[str, Any]) -> _T:
    """Rebuild a metadata dataclass (and everything nested in it) from :func:`to_json` output."""
    data = json.loads(text) if isinstance(text, str) else text
    return _from_plain(cls, data)
