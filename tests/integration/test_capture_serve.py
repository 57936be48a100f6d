"""Capture -> build -> serve on the CPU: tlops' workload captured with an H100 profile, built, then served."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from pathlib import Path

import pytest
from support.helpers import ok, run_ok, tl_aot_cli, tl_aot_here

pytest.importorskip("tilelang")

PACKAGE = Path(__file__).parents[1] / "packages" / "factory_shapes"


def _capture(package: Path, record: Path, *workload) -> str:
    return ok(
        tl_aot_cli("capture", "-o", record, "--device", "H100-SXM", "--", sys.executable, "workload.py", *workload, cwd=package)
    ).stdout


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> tuple[Path, Path]:
    """Two installs of tlops in different folders (a build machine and a user's machine)."""
    out = []
    for name in ("a", "b"):
        dest = tmp_path_factory.mktemp(name) / "factory_shapes"
        shutil.copytree(PACKAGE, dest, ignore=shutil.ignore_patterns("build*", "*.so", "_aot.py", "_tl_aot_torch*", "__pycache__"))
        out.append(dest)
    return out[0], out[1]


@pytest.fixture(scope="module")
def record(copies, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("capture") / "tlops.capture.json"
    out = _capture(copies[0], path, "--prepare")
    assert "8 kernels" in out and "(8 new)" in out
    return path


@pytest.fixture(scope="module")
def served_lib(record, tmp_path_factory, cache_dir) -> Path:
    out = tmp_path_factory.mktemp("served")
    cmd = ["build", "--capture", record, "--arch", "90a", "--name", "tlops_served", "-o", out]
    ok(tl_aot_here(*cmd, "--cache-dir", cache_dir, "-q", cwd=out))
    return out / "libtlops_served.so"


def test_capture_records_ir_options_device_and_origin(record):
    kernels = json.loads(record.read_text())["kernels"]
    assert len(kernels) == 8
    jits = sorted({o["jit"].rsplit(".", 1)[-1] for k in kernels.values() for o in k["origins"]})
    assert jits == ["_gemm", "_norm", "fwd", "relu6_scale"]
    for item in kernels.values():
        assert item["devices"] == [{"arch": "sm_90a", "name": "NVIDIA H100 80GB HBM3"}]  # the profile answered
        assert item["ir"].startswith("{") and item["options"]["backend"] == "cuda"
    scale = [k for k in kernels.values() if k["options"]["compile_flags"]]
    assert scale and all(k["headers"] and k["options"]["compile_flags"][0] == "-include" for k in scale)
    gemm_configs = sorted(o["args"]["block_m"] for k in kernels.values() for o in k["origins"] if o["jit"].endswith("_gemm"))
    assert gemm_configs == ["128", "128", "64"]  # the config the operator picked from the shape and the SM count


def test_captures_merge_and_keys_do_not_depend_on_the_install_path(copies, record, tmp_path):
    again = tmp_path / "again.json"
    shutil.copy(record, again)
    assert "(0 new)" in _capture(copies[0], again, "--prepare")  # duplicates collapse
    other = tmp_path / "other.json"
    _capture(copies[1], other, "--prepare")  # the same workload from another folder
    assert sorted(json.loads(other.read_text())["kernels"]) == sorted(json.loads(record.read_text())["kernels"])


def test_build_from_the_record_has_one_entry_per_kernel_with_its_key(record, served_lib):
    man = json.loads(ok(tl_aot_here("inspect", "--json", served_lib)).stdout)
    assert sorted(e["capture_key"] for e in man["entries"]) == sorted(json.loads(record.read_text())["kernels"])
    gemm = [e for e in man["entries"] if e["capture_name"].endswith("_gemm")]
    assert len(gemm) == 3 and all(e["variants"][0]["arch"] == "sm_90a" for e in gemm)


@pytest.fixture
def serving(served_lib, copies, monkeypatch):
    """The workload's module from the *second* install, with serving on and an H100 answering device queries."""
    import tl_aot
    from tl_aot.gpu.device import emulate, find_profile
    from tl_aot.serving import active

    monkeypatch.syspath_prepend(str(copies[1]))
    for name in [n for n in sys.modules if n == "tlops" or n.startswith("tlops.") or n == "workload"]:
        monkeypatch.delitem(sys.modules, name)
    server = tl_aot.serve(served_lib, strict=True)
    with emulate(find_profile("H100-SXM")):
        yield server, __import__("workload")
    active.stop()


def test_strict_serving_answers_every_captured_request_with_no_compile(serving):
    server, workload = serving
    workload.prepare()
    assert (server.stats.served, server.stats.compiled, server.stats.refused) == (8, 0, 0)
    import torch
    from tlops import api

    kernel = api.gemm_kernel_for(512, 256, 256, torch.float16)
    assert type(kernel).__name__ == "ServedKernel" and kernel.entry.startswith("gemm_")


def test_a_changed_kernel_is_never_served(serving):
    import tilelang
    import torch
    from tlops import api

    from tl_aot.serving.server import KernelNotServed

    server, _ = serving
    with pytest.raises(KernelNotServed, match=r"_gemm\(block_m=64, num_stages=2\).*nearest prebuilt: gemm_"):
        api.gemm_kernel_for(96, 256, 128, torch.float16)  # a shape the workload never ran
    func = api.gemm_kernel(64, 256, 128, torch.float16).get_tir(block_m=64, num_stages=2)  # a captured IR...
    with pytest.raises(KernelNotServed):
        tilelang.compile(func, out_idx=[-1], pass_configs={"tl.disable_tma_lower": True})  # ...with other options
    assert server.stats.refused == 2


def test_fallback_compiles_a_miss_with_the_jit_and_warns_once(served_lib, serving, monkeypatch, tmp_path, caplog):
    import tilelang

    import tl_aot
    from tl_aot.serving import active

    active.stop()
    server = tl_aot.serve(served_lib, strict=False)
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", '{"kind": "cuda", "arch": "sm_90a"}')
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "tlcache"))
    from tlops.ops.elementwise import negate

    with caplog.at_level(logging.WARNING, logger="tl_aot.serving.active"):
        kernel = tilelang.compile(negate(256, "float32"), out_idx=[-1])
        tilelang.compile(negate(256, "float32"), out_idx=[-1])
    assert type(kernel).__name__ == "JITKernel"
    assert server.stats.compiled == 2 and server.stats.served == 0
    assert len([r for r in caplog.records if "not in the served libraries" in r.message]) == 1


def test_a_package_ships_its_served_library_from_a_record(copies, record, cache_dir):
    """setup.py builds ``capture=[record]`` into tlops/lib_served.so; tlops serves it when imported."""
    pkg = copies[0]
    shutil.copy(record, pkg / "tlops.capture.json")
    env = dict(os.environ, TL_AOT_CACHE_DIR=str(cache_dir))
    run_ok([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], pkg, env)
    lib = pkg / "tlops" / "lib_served.so"
    man = json.loads(ok(tl_aot_cli("inspect", "--json", lib, cwd=PACKAGE.parent)).stdout)
    assert len(man["entries"]) == 8 and all(e["capture_key"] for e in man["entries"])
    probe = (
        "import tlops; from tl_aot.serving.active import active_server; s = active_server(); "
        "print(len(s.index), [l.path.name for l in s.libraries])"
    )
    out = run_ok([sys.executable, "-c", probe], pkg).stdout
    assert out.strip() == "8 ['lib_served.so']"


def test_a_served_kernel_gives_tilelangs_profiler_over_the_params_its_jit_kernel_has(serving):
    """``kernel.get_profiler()`` (TileLang's examples check and time kernels so): the JIT kernel's params and outputs."""
    import tilelang
    import torch
    from tilelang import tvm
    from tilelang.profiler import Profiler
    from tlops import api

    _, workload = serving
    workload.prepare()
    kernel = api.gemm_kernel_for(512, 256, 256, torch.float16)
    profiler = kernel.get_profiler()
    assert isinstance(profiler, Profiler) and profiler.adapter is kernel  # its launches go through the library
    with tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}) as target:
        jit = tilelang.lower(kernel.prim_func, target=target)  # its params are what JITKernel.params reads
    spelled = lambda params: [(str(p.dtype), [int(d) if isinstance(d, int) else str(d) for d in p.shape]) for p in params]  # noqa: E731
    assert spelled(profiler.params) == spelled(jit.params) == spelled(kernel.params)
    assert profiler.result_idx == [len(jit.params) - 1]  # out_idx=[-1], as TileLang's adapter legalises it


def test_a_relink_from_cached_variants_shows_the_built_from_label_this_tl_aot_spells(record, served_lib, cache_dir, tmp_path, monkeypatch):
    """The label is spelled from the record at each build, not kept by the variant cache (whose key does not cover tl_aot's code)."""
    from tl_aot.build import build_library
    from tl_aot.common.arch import parse_arch
    from tl_aot.config.capture_ref import CapturedKernel
    from tl_aot.config.kernel_spec import CaptureSource, LibrarySpec

    lib = LibrarySpec("tlops_labels", captures=(CaptureSource(record, (parse_arch("90a"),)),))

    def build():
        result = build_library(lib, out_dir=tmp_path, cache_dir=cache_dir, jobs=2, log=lambda _: None)
        return result, {v.resolved for e in result.manifest.entries for v in e.variants}

    first, labels = build()
    assert first.rebuilt == () and len(first.manifest.entries) == 8  # every variant from the cache served_lib filled
    assert all(label.startswith("capture ") and label.endswith(" -> main") for label in labels)
    monkeypatch.setattr(CapturedKernel, "built_from", property(lambda k: f"relabelled {k.name}"))
    again, labels = build()
    assert not again.up_to_date and again.rebuilt == ()  # relinked for the new label, nothing lowered or compiled
    assert labels == {"relabelled main"}
