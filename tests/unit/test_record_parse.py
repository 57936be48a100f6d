"""A manifest record parsed back (an entry's first use while serving) is exactly the record written, however it is built."""

from __future__ import annotations

import dataclasses
import json

import pytest
from support.golden import golden_manifest

from tl_aot.common.arch import parse_arch
from tl_aot.common.metadata import ArchVariant, DeviceKernel, LoweredEntry, Manifest, Param
from tl_aot.common.metadata_json import from_json, to_json


def _through_init(cls, data):
    """The reference: every record built by its ``__init__``, every list a tuple (what ``from_json`` always gave)."""

    def plain(v):
        return tuple(plain(x) for x in v) if isinstance(v, list) else v

    nested = {"params": Param, "variants": ArchVariant, "kernels": DeviceKernel}
    kwargs = {}
    for k, v in data.items():
        if k in ("ptx",):
            continue
        if k == "arch":
            kwargs[k] = parse_arch(v + ("+PTX" if data.get("ptx") else ""))
        elif k in nested and cls in (LoweredEntry, ArchVariant):
            kwargs[k] = tuple(_through_init(nested[k], x) for x in v)
        else:
            kwargs[k] = plain(v)
    return cls(**{k: v for k, v in kwargs.items() if k in {f.name for f in dataclasses.fields(cls)}})


def test_every_golden_entry_parses_back_equal_hashable_and_frozen():
    m = golden_manifest()
    again = from_json(Manifest, to_json(m))
    assert again == m and to_json(again) == to_json(m)
    for entry in again.entries:
        assert hash(entry) == hash(next(e for e in m.entries if e.name == entry.name))
        with pytest.raises(dataclasses.FrozenInstanceError):
            entry.name = "other"  # type: ignore[misc]
        assert all(isinstance(v.arch.ptx, bool) and v.arch == parse_arch(str(v.arch)) for v in entry.variants)


def test_a_record_is_the_one_its_init_would_build_defaults_included():
    entry = golden_manifest().entries[0]
    raw = json.loads(to_json(entry))
    raw["variants"][0].pop("kernels")  # an older record without a field that has a default
    parsed = from_json(LoweredEntry, raw)
    assert parsed.variants[0].kernels == ()  # the default, as __init__ gives it
    variant = raw["variants"][0]
    assert parsed.variants[0] == _through_init(ArchVariant, variant)
    assert parsed.params == tuple(_through_init(Param, p) for p in raw["params"])


def test_a_record_missing_a_required_field_is_refused_by_name():
    raw = json.loads(to_json(golden_manifest().entries[0]))
    del raw["name"]
    with pytest.raises(TypeError, match="name"):
        from_json(LoweredEntry, raw)


def test_a_changed_value_or_arch_spelling_is_read_as_written():
    raw = json.loads(to_json(golden_manifest().entries[0]))
    first = from_json(LoweredEntry, raw)
    raw["variants"][0]["ptx"] = True
    raw["variants"][0]["arch"] = "sm_80"
    raw["params"][0]["name"] = "renamed"
    second = from_json(LoweredEntry, raw)
    assert second.variants[0].arch == parse_arch("sm_80+PTX") and second.variants[0].arch.ptx
    assert second.params[0].name == "renamed" and first.params[0].name != "renamed"
    raw["variants"][0]["ptx"] = False
    assert from_json(LoweredEntry, raw).variants[0].arch == parse_arch("sm_80")  # the same spelling, the same Arch
