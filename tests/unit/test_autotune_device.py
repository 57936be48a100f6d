"""Config choice for @autotune'd functions and the build-time device profiles (no GPU, no build)."""

import inspect
import logging
import types

import pytest

from tl_aot.common.arch import parse_arch
from tl_aot.common.errors import LoweringError, SpecError
from tl_aot.gpu.device import PROFILES, default_profile, find_profile
from tl_aot.tune.config_choice import choose_config


def _autotuned(configs, **defaults):
    """An object shaped like TileLang's AutoTuneImpl over a function with these keyword defaults."""
    params = [inspect.Parameter("M", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=v) for k, v in defaults.items()]
    jit = types.SimpleNamespace(signature=inspect.Signature(params), get_tir=lambda **kw: None)
    return types.SimpleNamespace(jit_impl=jit, configs=configs)


CONFIGS = [{"bm": 64, "st": 1}, {"bm": 128, "st": 2, "pass_configs": {"tl.disable_tma_lower": True}}]


def test_explicit_config_wins_and_brings_its_pass_configs():
    c = choose_config(_autotuned(CONFIGS, bm=None, st=None), {"M": 1, "bm": 128, "st": 2}, function="f", where="e")
    assert (c.source, c.config, c.pass_configs) == ("explicit", {"bm": 128, "st": 2}, {"tl.disable_tma_lower": True})


def test_partial_explicit_config_needs_defaults_for_the_rest():
    with pytest.raises(LoweringError, match="sets bm but not st, which have no default"):
        choose_config(_autotuned(CONFIGS, bm=None, st=None), {"M": 1, "bm": 64}, function="f", where="e")
    c = choose_config(_autotuned(CONFIGS, bm=None, st=3), {"M": 1, "bm": 64}, function="f", where="e")
    assert c.config == {"bm": 64, "st": 3}


def test_defaults_are_used_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="tl_aot"):
        c = choose_config(_autotuned(CONFIGS, bm=64, st=1), {"M": 1}, function="f", where="entry 'e' (sm_90a)")
    assert c.source == "default" and c.kwargs == {"M": 1, "bm": 64, "st": 1}
    assert "building its defaults (bm=64, st=1)" in caplog.text


def test_no_config_and_no_defaults_lists_every_candidate():
    with pytest.raises(LoweringError) as e:
        choose_config(_autotuned(CONFIGS, bm=None, st=None), {"M": 1}, function="f", where="e")
    assert "over 2 configs and none was chosen" in str(e.value)
    assert "--arg bm=64 --arg st=1" in str(e.value) and "--arg bm=128 --arg st=2" in str(e.value)


def test_callable_configs_get_the_build_args():
    seen = {}

    def configs(M):
        seen["M"] = M
        return [{"bm": M}]

    with pytest.raises(LoweringError, match="--arg bm=32"):
        choose_config(_autotuned(configs, bm=None), {"M": 32}, function="f", where="e")
    assert seen == {"M": 32}


def test_record_is_used_when_nothing_explicit():
    c = choose_config(_autotuned(CONFIGS, bm=None, st=None), {"M": 1}, function="f", where="e", record={"bm": 128, "st": 2})
    assert c.source == "record" and c.pass_configs == {"tl.disable_tma_lower": True}


@pytest.mark.parametrize("arch,name,sms", [("90a", "H100-SXM", 132), ("80", "A100-SXM", 108), ("89", "L40S", 142), ("100a", "B200", 148)])
def test_default_profile_per_arch(arch, name, sms):
    p = default_profile(parse_arch(arch))
    assert (p.name, p.sm_count) == (name, sms)


def test_named_profile_must_fit_the_arch():
    assert find_profile("h100_pcie", parse_arch("90a")).sm_count == 114
    with pytest.raises(SpecError, match="sm_90; it cannot be the GPU of an sm_80 build"):
        find_profile("H100-PCIe", parse_arch("80"))
    with pytest.raises(SpecError, match="unknown device 'H900'"):
        find_profile("H900")
    assert all(p.smem_per_block_optin >= 48 * 1024 for p in PROFILES.values())


def test_emulated_driver_answers_tilelang_queries():
    pytest.importorskip("tilelang")
    from tilelang.carver.arch import driver

    from tl_aot.gpu.device import emulate

    with emulate(find_profile("H100-PCIe")):
        assert driver.get_num_sms() == 114
        assert driver.get_max_dynamic_shared_size_bytes() == 233472
    assert driver.get_cuda_device_properties.__module__ == "tilelang.carver.arch.driver.cuda_driver"


def test_emulated_tilelang_compute_version_answers_without_a_target_and_defers_to_one_with_an_arch():
    pytest.importorskip("tilelang")
    from tilelang.contrib import nvcc
    from tvm.target import Target

    from tl_aot.gpu.device import emulate

    real = nvcc.get_target_compute_version
    with emulate(find_profile("H100-PCIe")):
        assert nvcc.get_target_compute_version() == "9.0"  # as an example asks before its first compile
        assert nvcc.get_target_compute_version(Target({"kind": "cuda", "arch": "sm_80"})) == "8.0"
        with Target({"kind": "cuda", "arch": "sm_100a"}):
            assert nvcc.get_target_compute_version() == "10.0"
    assert nvcc.get_target_compute_version is real


def test_emulated_torch_cuda_answers_device_queries_and_is_restored():
    torch = pytest.importorskip("torch")
    from tl_aot.gpu.device import emulate

    real = (torch.cuda.is_available, torch.cuda.get_device_capability, torch.cuda.get_device_properties)
    with emulate(find_profile("H100-PCIe")):
        assert torch.cuda.is_available() and torch.cuda.device_count() == 1 and torch.cuda.current_device() == 0
        assert torch.cuda.get_device_capability() == (9, 0)
        assert torch.cuda.get_device_name(0) == "NVIDIA H100 PCIe"  # as the real GPU reports it
        props = torch.cuda.get_device_properties(0)
        assert props.multi_processor_count == 114 and props.shared_memory_per_block_optin == 232448
    assert (torch.cuda.is_available, torch.cuda.get_device_capability, torch.cuda.get_device_properties) == real
