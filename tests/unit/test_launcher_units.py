"""The launcher cut into translation units (tl_aot/codegen/launcher_units.py): whole exports, deterministic, sized by work."""

from __future__ import annotations

import dataclasses
import re
import subprocess

import pytest
from support.golden import golden_manifest

from tl_aot.codegen.launcher_units import UNIT_WEIGHT, cut, entry_weight, unit_plans
from tl_aot.codegen.render import render_header, render_launcher, render_launcher_sources, render_launcher_units
from tl_aot.common.metadata import Manifest


def _grown(m: Manifest, copies: int) -> Manifest:
    """``m``'s entries repeated ``copies`` times under new names (a bigger library of the same kinds of entry)."""
    entries = []
    for k in range(copies):
        for e in m.entries:
            export = f"{e.export}_{k}" if e.export else ""
            entries.append(dataclasses.replace(e, name=f"{e.name}_{k}", export=export))
    return dataclasses.replace(m, entries=tuple(entries))


def test_cut_keeps_items_whole_in_order_and_closes_runs_at_the_target():
    weights = [12, 12, 30, 5, 12, 12, 12, 40, 12, 3]
    runs = cut(weights, 30)
    assert [i for r in runs for i in r] == list(range(len(weights)))  # every item once, in order
    assert [sum(weights[i] for i in r) for r in runs] == [54, 41, 40, 15]  # 15 is half a target: a run of its own
    assert all(sum(weights[i] for i in r) >= 30 for r in runs[:-1])


def test_a_short_last_run_joins_the_one_before_and_small_libraries_stay_one_unit():
    assert cut([10] * 14, 100) == (range(14),)  # 140 < 1.5 targets: one unit
    assert cut([10] * 12, 50) == (range(5), range(5, 12))  # the 20 left over joins the run before
    assert cut([10] * 18, 50) == (range(5), range(5, 10), range(10, 15), range(15, 18))  # 30 >= half a target: its own
    assert cut([], 50) == (range(0),)


def test_a_library_that_grows_at_its_end_keeps_its_first_units():
    """Bounds depend only on what comes before: adding kernels recompiles the last units, not every one."""
    before = cut([9, 11, 10] * 40, 100)
    after = cut([9, 11, 10] * 40 + [10, 10], 100)
    assert len(before) > 5 and after[: len(before) - 1] == before[:-1]  # only the last unit (with what it took in) moves


def test_unit_plans_keep_an_exports_specialisations_together_and_cover_every_entry_once():
    m = _grown(golden_manifest(), 3)
    plans = unit_plans(m, target=1)  # the smallest units: one export each
    assert len(plans) == len(m.exports())
    assert sorted(i for p in plans for i in p.entries) == list(range(len(m.entries)))
    by_name = {e.name: i for i, e in enumerate(m.entries)}
    for name, members in m.exports().items():
        holding = [p for p in plans if by_name[members[0].name] in p.entries]
        assert len(holding) == 1 and {by_name[e.name] for e in members} <= set(holding[0].entries), name


def test_weights_count_entries_and_their_archs():
    m = golden_manifest()
    assert entry_weight(4) - entry_weight(1) == 3
    assert unit_plans(m) == unit_plans(m)  # the cut depends on the entry list alone
    assert len(unit_plans(m)) == 1  # 12 entries: one unit, as before
    total = sum(entry_weight(len(e.variants)) for e in m.entries)
    copies = 2 * UNIT_WEIGHT // total + 1
    assert len(unit_plans(_grown(m, copies))) == 2


def test_a_small_library_renders_one_unit_the_same_as_render_launcher():
    m = golden_manifest()
    units = render_launcher_units(m, header_name="golden.h")
    assert units == (render_launcher(m, header_name="golden.h"),)
    assert "TL_AOT_DEFINE_LIBRARY(golden, units::library," in units[0]


def test_each_entry_and_export_is_defined_in_exactly_one_unit_the_library_in_the_first():
    m = golden_manifest()
    units = render_launcher_units(m, header_name="golden.h", target=1)
    assert len(units) == len(m.exports()) + 1
    lib, rest = units[0], units[1:]
    assert "TL_AOT_DEFINE_LIBRARY(" in lib and not any("TL_AOT_DEFINE_LIBRARY(" in u for u in rest)
    assert "TL_AOT_EXPORT(" not in lib and "launch_v0" not in lib  # library-wide: the entry table, no entry's code
    table = re.search(r"kEntries\[\] = \{(.*)\};", lib)
    assert table and table.group(1) == ", ".join(f"&units::entry{i}" for i in range(len(m.entries)))
    for i in range(len(m.entries)):
        defined = [u for u in rest if f"const rt::Entry units::entry{i}{{" in u]
        assert len(defined) == 1, i
    for name in m.exports():
        assert sum(f"\nTL_AOT_EXPORT({name}, " in u for u in units) == 1, name
    assert render_launcher_units(m, header_name="golden.h", target=1) == units  # the same bytes each time


def test_editing_one_kernels_launch_changes_only_its_unit():
    """A unit's text is its entries' alone (sources and archs in its first line too): one kernel's edit recompiles one unit."""
    m = golden_manifest()
    before = render_launcher_units(m, header_name="golden.h", target=1)
    e = m.entry("add_one")
    kernel = dataclasses.replace(e.variants[0].kernels[0], block=("64", "1", "1"))
    edited = dataclasses.replace(e, variants=(dataclasses.replace(e.variants[0], kernels=(kernel,)), *e.variants[1:]))
    after = render_launcher_units(
        dataclasses.replace(m, entries=tuple(edited if x.name == "add_one" else x for x in m.entries)), header_name="golden.h", target=1
    )
    changed = [k for k, (a, b) in enumerate(zip(before, after)) if a != b]
    assert len(changed) == 1 and "Entry add_one:" in after[changed[0]]


def _with_entry(m: Manifest, name: str, **changes) -> Manifest:
    return dataclasses.replace(m, entries=tuple(dataclasses.replace(e, **changes) if e.name == name else e for e in m.entries))


def test_a_units_own_header_declares_its_exports_as_the_librarys_header_does():
    """What a user includes is what was compiled: each export's declaration block in a unit's header is the library header's."""
    m = golden_manifest()
    units = render_launcher_sources(m, header_name="golden.h", target=1)
    assert units[0].header_name == "golden.h" and units[0].header_text == render_header(m)
    whole = render_header(m)
    for k, unit in enumerate(units[1:], 1):
        assert unit.header_name == f"golden.unit{k}.h" and f'#include "golden.unit{k}.h"' in unit.text
        declared = re.findall(r"^TL_AOT_GOLDEN_API .*\((?:.|\n)*?\);$", unit.header_text, re.M)
        exported = re.findall(r"^TL_AOT_EXPORT\((\w+),", unit.text, re.M)
        assert declared and exported
        assert all(d in whole for d in declared)
        assert all(f" {name}(" in unit.header_text for name in exported)


def test_a_changed_signature_recompiles_its_unit_and_the_librarys_only():
    """A unit's object is keyed by its text and its header's: another entry's new signature leaves it, and its key, alone."""
    m = golden_manifest()
    e = m.entry("add_one")
    widened = tuple(dataclasses.replace(p, dtype="float64") if p.kind == "tensor" else p for p in e.params)
    after_m = _with_entry(m, "add_one", params=widened)
    assert render_header(after_m) != render_header(m)  # the library's header changed: once, every unit recompiled
    before = render_launcher_sources(m, header_name="golden.h", target=1)
    after = render_launcher_sources(after_m, header_name="golden.h", target=1)
    changed = [k for k, (a, b) in enumerate(zip(before, after)) if a != b]
    assert changed[0] == 0 and len(changed) == 2  # the library-wide unit (its header) and add_one's
    assert "Entry add_one:" in after[changed[1]].text and after[changed[1]].header_text != before[changed[1]].header_text
    assert "float64" in after[changed[1]].header_text  # never a stale declaration: the unit holding it is recompiled


def test_an_entry_added_at_the_end_leaves_the_earlier_units_alone():
    """Units are not numbered "of N" and bounds depend on what comes before: a grown library recompiles its tail and unit 1."""
    m = _grown(golden_manifest(), 6)
    grown = dataclasses.replace(m, entries=(*m.entries, dataclasses.replace(m.entries[0], name="added", export="")))
    before = render_launcher_sources(m, header_name="golden.h", target=100)
    after = render_launcher_sources(grown, header_name="golden.h", target=100)
    assert len(before) > 3
    same = [k for k, (a, b) in enumerate(zip(before, after)) if a == b]
    assert same == list(range(1, len(before) - 1))  # all but the library-wide unit and the last


def test_units_compile_and_join_into_one_object_with_every_entry(tmp_path):
    """A cut launcher's units compile as a build compiles them (warnings as errors) and join into one object, nothing unresolved."""
    pytest.importorskip("tvm_ffi")
    from tl_aot.codegen.render import render_header, render_launcher_sources
    from tl_aot.cuda.host_compile import host_command
    from tl_aot.cuda.host_objects import combined_object

    m = dataclasses.replace(golden_manifest(), entries=tuple(e for e in golden_manifest().entries if e.name in ("add_one", "two")))
    units = render_launcher_sources(m, header_name="golden.h", target=1)
    assert units[0].header_name == "golden.h" and units[0].header_text == render_header(m)
    objs = []
    for k, unit in enumerate(units):  # each with the header it includes: the library's, or its own exports'
        (tmp_path / unit.header_name).write_text(unit.header_text)
        (tmp_path / f"u{k}.cc").write_text(unit.text)
        cmd = host_command(tmp_path, f"u{k}.cc", f"u{k}.o")
        proc = subprocess.run([cmd[0], "-Wall", "-Wextra", "-Werror", *cmd[1:]], cwd=tmp_path, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        objs.append(tmp_path / f"u{k}.o")
    joined, made = combined_object(tmp_path / "cache", objs, "golden.launcher.o", extra_key="test", what="joining")
    assert made and combined_object(tmp_path / "cache", objs, "golden.launcher.o", extra_key="test", what="joining") == (joined, False)
    symbols = subprocess.run(["nm", str(joined)], capture_output=True, text=True, check=True).stdout.splitlines()
    defined = {s.split()[-1] for s in symbols if len(s.split()) == 3}
    undefined = {s.split()[-1] for s in symbols if len(s.split()) == 2}
    shared = {s for s in defined if "tl_aot_units" in s}
    assert len(shared) == 3  # the library and its two entries, each defined once
    assert not {s for s in undefined if "tl_aot_units" in s}
    assert {"__tvm_ffi_add_one", "__tvm_ffi_two", "__tvm_ffi_tl_aot_prepare"} <= defined


def test_in_threads_keeps_the_order_of_results():
    from tl_aot.pipeline.job_slots import in_threads

    assert in_threads(3)([lambda i=i: i * i for i in range(7)]) == [i * i for i in range(7)]
    assert in_threads(1)([lambda: "one"]) == ["one"]
