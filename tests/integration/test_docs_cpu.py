"""The documentation's commands, run as written (tests/support/doc_blocks.py): every scenario of README.md and docs/, CPU blocks.

One folder per scenario, its blocks in page order, the session's variant cache shared (a kernel two
scenarios build is compiled once). GPU blocks run in tests/gpu/test_docs_gpu.py.
"""

from __future__ import annotations

import pytest
from support.doc_blocks import run_scenario, scenario_blocks, scenario_env

pytest.importorskip("tilelang")

_CPU = sorted(
    name for name, blocks in scenario_blocks().items() if any(b.marker.kind == "run" and "gpu" not in b.marker.flags for b in blocks)
)


@pytest.mark.parametrize("scenario", _CPU)
def test_documented_commands_run_as_written(scenario, tmp_path, cache_dir):
    ran = run_scenario(scenario, tmp_path, scenario_env(cache_dir), gpu=False)
    assert ran, f"scenario {scenario} ran no block"
