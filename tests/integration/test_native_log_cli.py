"""``python -m tl_aot build`` on a kernel TileLang's C++ refuses: its "Fatal:" line only with -v, the reason always.

tests/kernels/broken/warp_partition.py: a T.gemm over 3 warps; TileLang's C++ logger writes
``[hh:mm:ss] : Fatal: No valid warp partition ...`` to fd 2 before raising. Run as processes, as a
user runs them: fd 2 is what the terminal shows.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.helpers import fails, tl_aot_cli

pytest.importorskip("tilelang")

KERNEL = Path(__file__).parents[1] / "kernels" / "broken" / "warp_partition.py"
REASON = "No valid warp partition for T.gemm"


def _build(tmp_path, cache_dir, *flags):
    out = tmp_path / "-".join(f.strip("-") for f in flags)
    return tl_aot_cli("build", f"{KERNEL}:odd_warps", "--arch", "90a", "-o", out, "--cache-dir", cache_dir, *flags)


def test_build_quiet_prints_no_fatal_line_and_the_error_names_the_reason_once(tmp_path, cache_dir):
    err = fails(_build(tmp_path, cache_dir, "-q"), "entry 'odd_warps' (sm_90a): TileLang failed to lower odd_warps", REASON)
    assert "Fatal:" not in err and "Warning:" not in err
    assert err.count(REASON) == 1


def test_build_verbose_prints_tilelangs_own_log_raw(tmp_path, cache_dir):
    err = fails(_build(tmp_path, cache_dir, "-v"), REASON)
    assert f": Fatal: {REASON}" in err
    assert ": Warning: Buffer read before initialization" in err
