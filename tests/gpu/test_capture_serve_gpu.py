"""Capture -> build -> serve on the GPU: tlops' workload served from the library equals the JIT's, with no compile."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from support.helpers import run_ok, tl_aot_argv

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

PACKAGE = Path(__file__).parents[1] / "packages" / "factory_shapes"


def _run(cmd, env=None) -> str:
    return run_ok(cmd, PACKAGE, env).stdout


@pytest.fixture(scope="module")
def captured(tmp_path_factory, cache_dir):
    """The workload run under capture with TileLang's real JIT, then the record built for this GPU."""
    pytest.importorskip("tilelang")
    tmp = tmp_path_factory.mktemp("capture")
    record = tmp / "tlops.capture.json"
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp / "jit-cache"))
    out = _run(tl_aot_argv("capture", "-o", record, "--", sys.executable, "workload.py", "--check", tmp / "jit.pt"), env)
    assert "8 kernels" in out
    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}{minor}{'a' if major >= 9 else ''}"
    _run(tl_aot_argv("build", "--capture", record, "--arch", arch, "-o", tmp / "lib", "--cache-dir", cache_dir, "-q"))
    return tmp


def test_served_results_equal_the_jits_bit_for_bit_with_no_compile(captured):
    empty_cache = captured / "served-cache"
    empty_cache.mkdir()
    env = dict(os.environ, TILELANG_CACHE_DIR=str(empty_cache))
    cmd = tl_aot_argv("run", "--serve", captured / "lib", "--strict", "--")
    _run([*cmd, sys.executable, "workload.py", "--check", captured / "served.pt"], env)
    jit, served = torch.load(captured / "jit.pt"), torch.load(captured / "served.pt")
    assert sorted(jit) == sorted(served) and len(jit) == 8
    for name in jit:
        assert torch.equal(jit[name], served[name]), name
    written = [p for p in empty_cache.rglob("*") if p.is_file()]  # importing TileLang makes its empty folders
    assert not written, f"serving wrote {written} into TileLang's cache (a compile happened)"


def test_in_process_serving_counts_no_compile_and_refuses_a_new_shape(captured):
    import tl_aot
    from tl_aot.serving import active
    from tl_aot.serving.server import KernelNotServed

    for name in [n for n in sys.modules if n == "workload" or n == "tlops" or n.startswith("tlops.")]:
        del sys.modules[name]  # kernels an earlier test compiled with the JIT sit in tlops' own caches
    sys.path.insert(0, str(PACKAGE))
    try:
        import workload
        from tlops import api

        server = tl_aot.serve(captured / "lib", strict=True)
        results = workload.run()
        assert (server.stats.served, server.stats.compiled) == (8, 0)
        assert torch.equal(results["gemm256x256x128"], torch.load(captured / "jit.pt")["gemm256x256x128"])
        with pytest.raises(KernelNotServed, match="nearest prebuilt"):
            api.gemm(torch.randn(96, 128, device="cuda", dtype=torch.float16), torch.randn(128, 256, device="cuda", dtype=torch.float16))
    finally:
        active.stop()
        sys.path.remove(str(PACKAGE))
