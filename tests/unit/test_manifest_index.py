"""The manifest's compact index: every entry reachable, each record the eager parse's, nothing parsed that is not used."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
from support.golden import golden_manifest

from tl_aot.common.errors import LibraryError
from tl_aot.common.manifest_index import index_of, index_text, parse_index
from tl_aot.common.metadata import ABI_VERSION, Call, LoweredEntry, Tuning
from tl_aot.common.metadata_json import from_json, to_json
from tl_aot.runtime import loader
from tl_aot.runtime.elf import ElfInfo
from tl_aot.runtime.loader import Library, read_index, read_manifest
from tl_aot.serving.server import Server


def _manifest(copies: int = 3):
    """The golden manifest (plain entries, a specialised export, several archs), copied, with tunings and calls."""
    m = golden_manifest()
    entries = tuple(
        dataclasses.replace(e, name=f"{e.name}_{k}", export=f"{e.export}_{k}" if e.export else "", capture_key=f"ck{k}{e.name}")
        for k in range(copies)
        for e in m.entries
    )
    tunings = tuple(Tuning(key=f"t{i}", function="ops.gemm", args=f"(M={i})", request_key=e.capture_key) for i, e in enumerate(entries[:4]))
    calls = tuple(Call(key=f"c{i}", request_key=e.capture_key) for i, e in enumerate(entries))
    return dataclasses.replace(m, abi_version=ABI_VERSION, entries=entries, tunings=tunings, calls=calls)


class _Module:
    """What ``tvm_ffi.load_module`` gives for a library embedding ``manifest``: its exports by name, each call counted."""

    def __init__(self, manifest, *, index: str | None = None, text: str | None = None) -> None:
        self.text = to_json(manifest) if text is None else text
        self.index = index_text(manifest, to_json(manifest)) if index is None else index
        self.looked_up: list = []
        self.exports = {
            "tl_aot_manifest": lambda: self.text,
            "tl_aot_manifest_index": lambda: self.index,
            "tl_aot_manifest_part": lambda offset, length: self.text[offset : offset + length],
            "cleanup_module": lambda: 0,
            "tl_aot_prepare": lambda device: None,
            **{name: (lambda *a, name=name: ("ran", name, a)) for name in manifest.exports()},
        }

    def __getitem__(self, name: str):
        self.looked_up.append(name)
        try:
            return self.exports[name]
        except KeyError:
            raise AttributeError(name) from None


def _library(manifest, **kw) -> tuple[Library, _Module]:
    module = _Module(manifest, **kw)
    return Library(Path("/libs/libgolden.so"), module, parse_index(module.index)), module


def test_every_entry_is_reachable_and_its_record_is_the_eager_parse():
    m = _manifest()
    text = to_json(m)
    index = index_of(m)
    assert [e.name for e in index.entries] == [e.name for e in m.entries]
    assert index.manifest_bytes == len(text) and index.abi_version == ABI_VERSION
    for row, entry in zip(index.entries, m.entries):
        part = text[row.span.offset : row.span.offset + row.span.length]
        assert from_json(LoweredEntry, part) == entry
        assert [(v.request_key, v.arch) for v in row.variants] == [(v.request_key or entry.capture_key, v.arch) for v in entry.variants]
        assert row.exported == entry.exported and row.origin == (entry.capture_name or entry.function)
    t = index.tunings
    assert tuple(from_json(Tuning, x) for x in json.loads(text[t.offset : t.offset + t.length])) == m.tunings
    assert index.tuning_keys == tuple(x.key for x in m.tunings) and index.calls == tuple((c.key, c.request_key) for c in m.calls)
    assert {k: [e.name for e in v] for k, v in index.exports().items()} == {k: [e.name for e in v] for k, v in m.exports().items()}


def test_a_library_parses_only_the_records_it_is_asked_for():
    m = _manifest()
    lib, module = _library(m)
    assert lib.records_parsed == 0 and set(module.looked_up) == {"cleanup_module", "tl_aot_prepare"}  # nothing of any entry
    assert lib.signature("gemm_1") == m.entry("gemm_1") and lib.records_parsed == 1
    assert lib.specialisations("norm_2") == m.exports()["norm_2"] and lib.records_parsed == 1 + len(m.exports()["norm_2"])
    assert lib.add_one_0(1, 2) == ("ran", "add_one_0", (1, 2)) and lib.records_parsed == 2 + len(m.exports()["norm_2"])
    assert [n for n in module.looked_up if not n.startswith(("tl_aot", "cleanup"))] == ["add_one_0"]
    assert lib.tunings == m.tunings and lib.manifest == m
    assert "gemm_0" in dir(lib) and "gemm_0" in repr(lib)
    with pytest.raises(AttributeError, match="no attribute or entry 'nope'"):
        lib.nope  # noqa: B018


def test_serving_indexes_every_variant_without_parsing_a_record():
    m = _manifest()
    lib, module = _library(m)
    server = Server([lib])
    plain = [e for e in m.entries if not e.export]
    assert set(server.index) == {v.request_key or e.capture_key for e in plain for v in e.variants}
    assert server.calls == {c.key: c.request_key for c in m.calls}
    assert lib.records_parsed == 0 and not [n for n in module.looked_up if n in m.exports()]
    lib_of, i = server.tunings["t2"]
    assert lib_of is lib and lib.tunings[i] == m.tunings[2]


def test_the_index_carries_the_gpu_models_the_library_was_captured_on_and_an_older_index_none():
    m = _manifest(1)
    on = ("NVIDIA H100 80GB HBM3",), ("NVIDIA H200", "NVIDIA H100 80GB HBM3"), ()
    m = dataclasses.replace(m, entries=tuple(dataclasses.replace(e, captured_on=on[i % 3]) for i, e in enumerate(m.entries)))
    assert index_of(m).captured_on == ("NVIDIA H100 80GB HBM3", "NVIDIA H200")  # each model once, sorted
    lib, _ = _library(m)
    assert lib.index.captured_on == ("NVIDIA H100 80GB HBM3", "NVIDIA H200") and lib.records_parsed == 0
    older = json.loads(index_text(m, to_json(m)))
    del older["captured_on"]  # built before the field: nothing is claimed, nothing refused
    assert parse_index(older).captured_on == ()


def test_call_keys_answer_only_on_the_gpu_models_the_library_was_captured_on():
    """A call key does not see the GPU's model (an H100 SXM and an H200 report the same traits): a factory choosing by
    name would be answered the other model's kernel. On a model the library was not captured on, each call is traced."""
    from types import SimpleNamespace

    from tl_aot.gpu.device import emulate, find_profile
    from tl_aot.jit.seam import JitCall

    m = _manifest(1)
    m = dataclasses.replace(m, entries=tuple(dataclasses.replace(e, captured_on=("NVIDIA H100 80GB HBM3",)) for e in m.entries))
    gemm = next(e for e in m.entries if e.name.startswith("gemm"))  # sm_90a
    call = next(c for c in m.calls if c.request_key == gemm.capture_key)
    jit = SimpleNamespace(out_idx=None, pass_configs={}, compile_flags=[], target=None)

    def answer(profile):
        lib, _ = _library(m)
        server = Server([lib])
        server._call_key = lambda *_: (call.key, "")  # the call the capture recorded (keyed_call: key, why none)
        with emulate(find_profile(profile)):
            return server.answer_call(JitCall(jit, (), {})), server.stats

    served, stats = answer("H100-SXM")
    assert served is not None and served.entry == gemm.name and stats.other_model == ""
    served, stats = answer("H200")  # same traits, another model: left to the trace and its request key
    assert served is None and stats.other_model == "NVIDIA H200" and stats.call_lookups == 1
    older = dataclasses.replace(m, entries=tuple(dataclasses.replace(e, captured_on=()) for e in m.entries))
    lib, _ = _library(older)
    server = Server([lib])
    server._call_key = lambda *_: (call.key, "")
    with emulate(find_profile("H200")):  # a library that does not say where it was captured: answered as ever
        assert server.answer_call(JitCall(jit, (), {})) is not None


def test_an_altered_record_or_index_is_refused_and_an_old_library_is_named(monkeypatch):
    m = _manifest(1)
    digest = hashlib.sha256(index_text(m, to_json(m)).encode()).hexdigest()  # what the library's ELF section holds
    monkeypatch.setattr(loader, "_checked", lambda path: ElfInfo("", digest, True))
    text = to_json(m)
    row = index_of(m).entries[1]
    bad = text[: row.span.offset] + text[row.span.offset :].replace('"float16"', '"float32"', 1)
    lib, _ = _library(m, text=bad)
    lib.signature(m.entries[0].name)  # an untouched record reads as ever
    with pytest.raises(LibraryError, match="altered after the build"):
        lib.signature(row.name)
    old = _Module(m)
    del old.exports["tl_aot_manifest_index"]
    old.text = to_json(dataclasses.replace(m, abi_version=3))
    with pytest.raises(LibraryError, match=f"with launcher ABI 3; this tl_aot understands ABI {ABI_VERSION}. Rebuild the library"):
        read_index(old, Path("/libs/libold.so"))
    assert read_manifest(_Module(m), Path("/libs/libgolden.so")) == m
    with pytest.raises(LibraryError, match="altered after the build"):
        read_index(_Module(m, index=index_text(m, to_json(m)).replace('"gemm_0"', '"gemm_9"')), Path("/libs/libgolden.so"))
    with pytest.raises(LibraryError, match="altered after the build"):
        read_manifest(_Module(m, text=bad), Path("/libs/libgolden.so"))


def test_serving_joins_an_entrys_images_under_a_key_they_share_and_the_first_entry_keeps_a_key():
    from tl_aot.common.arch import parse_arch
    from tl_aot.gpu.image_select import image_of, runs_on

    m = _manifest(1)
    add_one = m.entry("add_one_0")  # sm_80 and sm_90a images
    shared = dataclasses.replace(add_one, variants=tuple(dataclasses.replace(v, request_key="") for v in add_one.variants))
    twin = dataclasses.replace(shared, name="add_one_twin", capture_key=shared.capture_key)  # answers the same request
    m = dataclasses.replace(m, entries=(shared, twin, *[e for e in m.entries if e.name != "add_one_0"]))
    lib, _ = _library(m)
    server = Server([lib])
    held_by, name, images = server.index[shared.capture_key]
    assert held_by is lib and name == "add_one_0"  # the first entry answers it; the twin adds nothing
    assert sorted(images) == sorted(image_of(v.arch) for v in add_one.variants) and len(images) == len(add_one.variants)
    assert runs_on(images, "86") and runs_on(images, "90")  # sm_80's image runs on sm_86, sm_90a's on sm_90
    assert images == tuple(image_of(parse_arch(str(v.arch))) for v in add_one.variants)
    assert [n for _, n in server.by_name[add_one.capture_name or add_one.function]][:2] == ["add_one_0", "add_one_twin"]


def test_a_malformed_index_row_is_refused_as_parse_index_promises():
    m = _manifest(1)
    good = json.loads(index_text(m, to_json(m)))
    short_variant = json.loads(json.dumps(good))
    short_variant["entries"][0][7][0] = short_variant["entries"][0][7][0][:2]
    short_entry = json.loads(json.dumps(good))
    short_entry["entries"][0] = short_entry["entries"][0][:7]
    for bad in (short_variant, short_entry):
        with pytest.raises(ValueError, match="not enough values to unpack"):
            parse_index(bad)
    row = parse_index(good).entries[0]
    assert (
        row.name == good["entries"][0][0]
        and row.span.length == good["entries"][0][5]
        and row.variants[0].arch.sm == good["entries"][0][7][0][1]
    )


def test_loading_imports_no_metadata_and_serving_no_lookup_modules_until_tilelangs_jit():
    import subprocess
    import sys

    later = ["tl_aot.common.metadata", "tl_aot.common.metadata_json", "tl_aot.runtime.torch_ops", "tl_aot.runtime.torch_fakes"]
    later += ["tl_aot.jit.seam", "tl_aot.call_keys.key", "tl_aot.jit.request_key"]
    code = (
        "import sys, tl_aot.runtime.loader, tl_aot.serving.active, tl_aot.serving.server as s\n"
        f"print(sorted(m for m in {later!r} if m in sys.modules))\n"
        "s.Server([]).prepare_lookups()\n"
        f"print(sorted(m for m in {later!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "[]"  # what every load pays before its first call: none of these
    ready = set(later) - {"tl_aot.runtime.torch_ops", "tl_aot.runtime.torch_fakes"}
    assert out[1] == str(sorted(ready))  # made ready before any request, not by the first
