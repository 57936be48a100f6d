"""The documentation's commands on a GPU: every scenario with a GPU block, run whole (its CPU blocks first, as written)."""

from __future__ import annotations

import pytest
from support.doc_blocks import run_scenario, scenario_blocks, scenario_env

pytestmark = pytest.mark.gpu

_GPU = sorted(name for name, blocks in scenario_blocks().items() if any("gpu" in b.marker.flags for b in blocks))


@pytest.mark.parametrize("scenario", _GPU)
def test_documented_gpu_commands_run_as_written(scenario, tmp_path, cache_dir):
    pytest.importorskip("tilelang")
    ran = run_scenario(scenario, tmp_path, scenario_env(cache_dir), gpu=True)
    assert any("gpu" in b.marker.flags for b, _ in ran)
