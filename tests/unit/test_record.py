"""Tuning records: the file round-trips, builds pick the right item, stale records warn."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tl_aot.common.errors import SpecError
from tl_aot.spec import KernelSpec, LibrarySpec
from tl_aot.tune.tuning_record import Candidate, Item, TuningRecord, apply_record, record_path_for, source_digest

KERNELS = Path(__file__).parents[1] / "kernels"


def spec(**kw) -> KernelSpec:
    base = dict(name="gemm", source=KERNELS / "tuned.py", function="gemm", args={"M": 64, "N": 64, "K": 64}, archs=["90a", "80"])
    return KernelSpec.create(**{**base, **kw})


def item(gpu="NVIDIA H100 80GB HBM3", arch="sm_90a", block_M=128, digest=None, ms=0.5, **kw) -> Item:
    return Item(
        entry="gemm",
        function="gemm",
        source="tuned.py",
        args=(("K", "64"), ("M", "64"), ("N", "64")),
        arch=arch,
        gpu=gpu,
        chosen=(("block_M", repr(block_M)), ("stages", "3")),
        ms=ms,
        candidates=(Candidate((("block_M", "64"), ("stages", "2")), 0.7), Candidate((("block_M", "256"),), None, "build failed")),
        source_digest=source_digest(spec()) if digest is None else digest,
        versions=(("tilelang", "0.1.15"),),
        **kw,
    )


def test_record_round_trips_and_merges(tmp_path):
    r = TuningRecord().merged([item(), item(gpu="NVIDIA H100 PCIe", block_M=64)])
    path = tmp_path / "k.tune.json"
    r.save(path)
    text = path.read_text()
    assert text.startswith("{\n") and '"format": "tl_aot tuning record"' in text  # readable, stable key order
    back = TuningRecord.load(path)
    assert back == r
    again = back.merged([item(block_M=256)])  # the same (entry, args, arch, GPU): replaced
    assert len(again.items) == 2 and {i.config()["block_M"] for i in again.items} == {64, 256}


def test_a_build_takes_the_recorded_config_per_arch():
    lib = apply_record(LibrarySpec("l", (spec(),)), TuningRecord((item(),)))
    (s,) = lib.entries
    assert s.tuned_config("sm_90a") == ({"block_M": 128, "stages": 3}, "NVIDIA H100 80GB HBM3, 0.5 ms")
    assert s.tuned_config("sm_80") is None  # no record for that arch: explicit, default or the listing
    other = apply_record(LibrarySpec("l", (spec(args={"M": 128, "N": 64, "K": 64}),)), TuningRecord((item(),)))
    assert not other.entries[0].tuned  # other arguments: not this record's


def test_several_gpus_of_one_arch_the_device_picks_and_the_note_names_the_others():
    record = TuningRecord((item(), item(gpu="NVIDIA H100 PCIe", block_M=64, ms=0.6)))
    (s,) = apply_record(LibrarySpec("l", (spec(device="H100-PCIe"),)), record).entries
    config, note = s.tuned_config("sm_90a")
    assert config["block_M"] == 64 and note == "NVIDIA H100 PCIe, 0.6 ms; also tuned: NVIDIA H100 80GB HBM3"
    (s,) = apply_record(LibrarySpec("l", (spec(),)), record).entries
    assert s.tuned_config("sm_90a")[1].startswith("NVIDIA H100 80GB HBM3")  # no device named: the first, by name


def test_a_record_older_than_the_source_warns_or_fails_when_strict(caplog):
    record = TuningRecord((item(digest="0" * 16, tuned_at="2026-01-01 10:00 UTC"),))
    with caplog.at_level(logging.WARNING, logger="tl_aot"):
        apply_record(LibrarySpec("l", (spec(),)), record, where="k.tune.json")
    assert "k.tune.json: entry 'gemm' (sm_90a) was tuned on 2026-01-01 10:00 UTC from a different tuned.py" in caplog.text
    with pytest.raises(SpecError, match="re-run python -m tl_aot tune"):
        apply_record(LibrarySpec("l", (spec(),)), record, strict=True)


def test_not_a_record_is_a_clear_error(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"items": []}')
    with pytest.raises(SpecError, match="not a tl_aot tuning record"):
        TuningRecord.load(bad)
    assert record_path_for("a/kernels.toml") == Path("a/kernels.tune.json")


def test_the_tune_table_of_a_plain_factory(tmp_path):
    from tl_aot.spec import load_spec_file

    (tmp_path / "k.py").write_text("")
    (tmp_path / "s.toml").write_text(
        '[[entry]]\nname = "n"\nsource = "k.py"\nfunction = "f"\narchs = ["90a"]\ntune = [{ threads = 128 }, { threads = 256 }]\n'
    )
    (s,) = load_spec_file(tmp_path / "s.toml").entries
    assert s.tune == ((("threads", 128),), (("threads", 256),))
    (tmp_path / "s.toml").write_text('[[entry]]\nname = "n"\nsource = "k.py"\nfunction = "f"\narchs = ["90a"]\ntune = []\n')
    with pytest.raises(SpecError, match="tune must be a non-empty list of configs"):
        load_spec_file(tmp_path / "s.toml")
