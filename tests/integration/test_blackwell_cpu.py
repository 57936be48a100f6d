"""Consumer Blackwell on the CPU: a kernel that needs sm_120a is built for it, and refused for plain sm_120.

``tests/kernels/blackwell.toml`` (our one-tile NVFP4 block-scaled GEMM, the shape of TileLang's
``gemm_sm120`` example) asks for ``sm_120`` and ``sm_120a``. For plain sm_120 TileLang's template
compiles a trap where the ``kind::mxf4nvf4`` MMA should be; that image would build, load and fail at
its first launch on an RTX 5090, so the build leaves it out (``--keep-going``) naming sm_120a, and
the library holds the sm_120a image the GPU runs (TileLang's JIT compiles sm_120a there too).
"""

from __future__ import annotations

import json

import pytest
from support.helpers import KERNELS, ok, tl_aot_here

pytest.importorskip("tilelang")


def test_plain_sm120_is_left_out_naming_sm120a_and_sm120a_is_built(tmp_path, cache_dir):
    import tilelang.language as T

    if not hasattr(T, "mma_gemm_blockscaled"):
        pytest.skip("this TileLang has no SM120 block-scaled MMA")
    out = tmp_path / "out"
    built = ok(tl_aot_here("build", "--spec", KERNELS / "blackwell.toml", "-o", out, "--cache-dir", cache_dir, "--keep-going"))
    assert "left out 1 variant(s) that failed (--keep-going):" in built.stdout + built.stderr
    man = json.loads(ok(tl_aot_here("inspect", "--json", out / "libtl_blackwell.so")).stdout)
    assert [v["arch"] for e in man["entries"] for v in e["variants"]] == ["sm_120a"]
    (left,) = man["left_out"]
    assert (left["entry"], left["arch"]) == ("nvfp4_gemm", "sm_120")
    assert "needs sm_120a" in left["error"] and "Build --arch 120a" in left["error"]
    assert "tl::sm120_mma_sync_blockscaled requires sm_120a" in left["error"]
