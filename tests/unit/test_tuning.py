"""Tuning keys, the record's tunings and what a library ships of them (no GPU, nothing compiled)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from tl_aot.capture.record import CaptureRecord
from tl_aot.capture.record_specs import recorded_tunings
from tl_aot.common.metadata import Manifest
from tl_aot.common.metadata_json import from_json, to_json
from tl_aot.tune.runtime_choice import spelled_config

KERNELS = Path(__file__).parents[1] / "kernels"


def _tuning(index: int = 0) -> dict:
    return {"function": "pkg.gemm", "args": "[[64],[]]", "config": spelled_config({"block": 64 * (index + 1)}), "index": index}


def test_a_record_keeps_its_first_choice_and_survives_a_round_trip(tmp_path):
    rec = CaptureRecord(tmp_path / "r.json", {})
    rec.merge({"k1": {"name": "main", "ir": "{}"}}, {"t1": {**_tuning(), "request_key": "k1"}})
    rec.merge({}, {"t1": {**_tuning(1), "request_key": "k2"}})  # tuned again: noise must not change what is served
    rec.save()
    back = CaptureRecord.load(tmp_path / "r.json")
    assert back.tunings["t1"]["request_key"] == "k1" and back.kernels == {"k1": {"name": "main", "ir": "{}"}}
    (tmp_path / "old.json").write_text(json.dumps({"schema": 1, "kernels": {}}))  # a record from before tunings
    assert CaptureRecord.load(tmp_path / "old.json").tunings == {}


def test_a_library_ships_the_tunings_whose_kernel_it_holds(tmp_path):
    rec = CaptureRecord(tmp_path / "r.json", {})
    rec.merge({}, {"t1": {**_tuning(), "request_key": "k1", "cc": "90"}, "t2": {**_tuning(), "request_key": "k2"}})
    rec.save()
    (t,) = recorded_tunings({str(tmp_path / "r.json")}, {"k1", "k3"})  # k2 was left out of the build
    assert (t.key, t.request_key, t.cc, t.config) == ("t1", "k1", "90", '{"block": 64}')
    manifest = Manifest(abi_version=3, library="x", tunings=(t,))
    assert from_json(Manifest, to_json(manifest)).tunings == (t,)
    raw = json.loads(to_json(manifest))
    del raw["tunings"]  # a manifest of a library built before tunings shipped
    assert from_json(Manifest, raw).tunings == ()


@pytest.fixture
def tuner_keys(monkeypatch):
    """``tuning_key`` of each ``AutoTuner`` TileLang is about to run for ``tuned.gemm(...)`` (the run itself is skipped)."""
    pytest.importorskip("tilelang")
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", '{"kind": "cuda", "arch": "sm_90a"}')
    monkeypatch.syspath_prepend(str(KERNELS))
    from tilelang.autotuner.param import AutotuneResult

    from tl_aot.jit import seam as jit_seam
    from tl_aot.tune.runtime_choice import tuning_key

    keys = []

    def on_tune(tuner, proceed):
        keys.append(tuning_key(tuner, "90")[0])
        return AutotuneResult(config={}, kernel=object())

    def ask(*args, configs=None):
        import tuned

        fn = tuned.gemm
        if configs is not None:
            from tilelang.autotuner import autotune

            fn = autotune(configs=configs)(tuned.gemm.jit_impl)
        with jit_seam.intercepting(jit_seam.Interception(lambda r, c, p: jit_seam.CompiledStandIn(r), on_tune=on_tune)):
            dataclasses.replace(fn)(*args)  # a fresh @autotune object: its own cache does not answer
        return keys[-1]

    yield ask
    sys.modules.pop("tuned", None)


def test_the_tuning_key_follows_arguments_and_candidates_only(tuner_keys):
    import tuned

    a = tuner_keys(512, 512, 512)
    assert tuner_keys(512, 512, 512) == a  # the same tuning asked for again
    assert tuner_keys(512, 512, 256) != a  # other arguments
    assert tuner_keys(512, 512, 512, configs=tuned._configs()[:3]) != a  # other candidates


def test_the_seam_puts_the_tuner_back(tuner_keys):
    from tilelang.autotuner.tuner import AutoTuner

    from tl_aot.jit import seam as jit_seam

    real = AutoTuner.run
    with jit_seam.intercepting(jit_seam.Interception(lambda r, c, p: p(), on_tune=lambda t, p: p())):
        assert AutoTuner.run is not real
    assert AutoTuner.run is real


def test_a_capture_without_a_gpu_says_it_cannot_record_a_tuning(tmp_path, monkeypatch):
    pytest.importorskip("tilelang")
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", '{"kind": "cuda", "arch": "sm_90a"}')
    monkeypatch.syspath_prepend(str(KERNELS))
    import tuned

    from tl_aot.capture.recorder import Capturer
    from tl_aot.common.errors import TlAotError
    from tl_aot.jit import seam as jit_seam

    def no_gpu_tuner(tuner, proceed):  # what TileLang's tuner ends with when no candidate can be timed
        raise RuntimeError("Auto-tuning failed: No configuration successfully compiled and passed benchmarking/validation.")

    cap = Capturer(tmp_path / "r.json", compile_for_real=False)
    stand_in = jit_seam.Interception(lambda r, c, p: jit_seam.CompiledStandIn(r), on_tune=no_gpu_tuner)
    with jit_seam.intercepting(stand_in), jit_seam.intercepting(jit_seam.Interception(cap._on_request, on_tune=cap._on_tune)):
        with pytest.raises(TlAotError, match=r"tl_aot capture --device: tuned\.gemm\(\[\[128,128,128\],\[\]\]\) over 15 configs is tuned"):
            dataclasses.replace(tuned.gemm)(128, 128, 128)
    assert cap.tunings == {}


def test_a_capture_without_a_gpu_given_the_config_passes_on_the_calls_own_error_not_a_tuning_one(tmp_path, monkeypatch):
    """Given every tunable (``gdn/example_chunk_delta_h.py``'s driver), TileLang compiles once and times nothing:
    what fails next is the kernel's own use (its source asked of the stand-in), which must not read "tuned at run time"."""
    pytest.importorskip("tilelang")
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", '{"kind": "cuda", "arch": "sm_90a"}')
    monkeypatch.syspath_prepend(str(KERNELS))
    import tuned

    from tl_aot.capture.recorder import Capturer
    from tl_aot.jit import seam as jit_seam
    from tl_aot.jit.seam import StandInUsed
    from tl_aot.tune.runtime_choice import tunables_given

    cap = Capturer(tmp_path / "r.json", compile_for_real=False)
    asked = []

    def tuner_as_is(tuner, proceed):
        asked.append(tunables_given(tuner))
        return proceed()

    stand_in = jit_seam.Interception(lambda r, c, p: jit_seam.CompiledStandIn(r), on_tune=tuner_as_is)
    with jit_seam.intercepting(stand_in), jit_seam.intercepting(jit_seam.Interception(cap._on_request, on_tune=cap._on_tune)):
        with pytest.raises(StandInUsed, match=r"\.get_kernel_source was used"):
            dataclasses.replace(tuned.gemm)(128, 128, 128, block_M=64, block_N=128, block_K=32, stages=2, threads=128)
    assert asked == [True] and len(cap.kernels) == 1 and cap.tunings == {}
