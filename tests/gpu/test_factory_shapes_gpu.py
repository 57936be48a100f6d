"""tlops' kernels from the tl_aot library equal TileLang's JIT bit for bit, every factory shape."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from support.helpers import tl_aot_argv

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

PACKAGE = Path(__file__).parents[1] / "packages" / "factory_shapes"
ENTRIES = ("gemm", "relu6_scale", "relu6_half", "rms_norm", "act_fwd", "act_bwd", "negate", "fill_like")


@pytest.fixture(scope="module")
def tlops(tmp_path_factory, cache_dir):
    """The tlops library: prebuilt (``TL_AOT_TEST_LIBDIR``) or built now from tlops.toml."""
    import tl_aot

    prebuilt = os.environ.get("TL_AOT_TEST_LIBDIR")
    if prebuilt:
        return tl_aot.load(Path(prebuilt) / "libtlops_aot.so")
    from tl_aot.pipeline.library import build_library
    from tl_aot.spec import load_spec_file

    out = tmp_path_factory.mktemp("tlops")
    return tl_aot.load(build_library(load_spec_file(PACKAGE / "tlops.toml"), out_dir=out, cache_dir=cache_dir, log=None).library)


@pytest.fixture(scope="module")
def reference():
    """The library's own calls through TileLang's JIT (compiled here, on the GPU)."""
    pytest.importorskip("tilelang")
    spec = importlib.util.spec_from_file_location("tlops_jit_reference", PACKAGE / "jit_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def jit_kernels(reference):
    return reference.jit_kernels()


@pytest.mark.parametrize("entry", ENTRIES)
def test_results_equal_the_jits_bit_for_bit(tlops, reference, jit_kernels, entry):
    args = reference.inputs(entry)
    want = jit_kernels[entry](*args)
    got = getattr(tlops, entry)(*args)
    torch.cuda.synchronize()
    assert got.shape == want.shape and got.dtype == want.dtype
    assert torch.equal(got, want), f"{entry}: max diff {(got.float() - want.float()).abs().max().item()}"


def test_the_included_header_is_what_runs(tlops, reference):
    x = torch.tensor([-3.0, 0.5, 7.0] + [0.0] * 997, device="cuda")
    y = tlops.relu6_scale(x)
    assert y[:3].tolist() == [0.0, 1.0, 12.0]  # relu6 from tlops_helpers.h, times factor 2


SERVED_CHECK = """
import sys, torch, tl_aot, jit_reference
from tl_aot.serving.active import active_server
kernels = jit_reference.jit_kernels()  # the library's own JIT calls, served
lib = tl_aot.load(sys.argv[1])
for entry, k in kernels.items():
    assert type(k).__name__ == "ServedKernel", (entry, k)
    args = jit_reference.inputs(entry)
    assert torch.equal(k(*args), getattr(lib, entry)(*args)), entry
profiled = 0
for entry, k in kernels.items():  # TileLang's examples check and time a kernel through its profiler
    p = k.get_profiler()
    if all(q.shape and all(isinstance(d, int) for d in q.shape) for q in p.params):  # inputs TileLang can supply
        p.assert_allclose(lambda *ins, e=entry: getattr(lib, e)(*ins), atol=0, rtol=0)
        assert p.do_bench(n_warmup=1, n_repeat=3) > 0, entry
        profiled += 1
stats = active_server().stats
print("served", stats.served, "compiled", stats.compiled, "profiled", profiled)
"""


def test_the_spec_built_library_serves_the_librarys_own_jit_calls(tlops, tmp_path):
    """No capture needed: a library built from tlops.toml answers tlops' JIT calls (strict: zero compiles)."""
    import subprocess
    import sys

    lib = str(tlops.path)
    cmd = tl_aot_argv("run", "--serve", lib, "--strict", "--", sys.executable, "-c", SERVED_CHECK, lib)
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp_path / "tilelang-cache"))
    proc = subprocess.run(cmd, cwd=PACKAGE, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"served {len(ENTRIES)} compiled 0 profiled " in proc.stdout and " profiled 0" not in proc.stdout
    assert not any(p.is_file() for p in (tmp_path / "tilelang-cache").rglob("*"))
