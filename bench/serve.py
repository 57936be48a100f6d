"""Serving vs TileLang's JIT on the GPU: first-call latency per kernel and steady-state cost.

For tlops' workload (tests/packages/factory_shapes): capture it, build the record, then time each
operator's first call (kernel construction + compile or lookup) in fresh processes: the JIT with an
empty cache, the JIT with a warm cache, served; and the prim_func construction alone (the floor a
served first call is measured against). Then, in one process, each kernel's launch cost and device
time, served vs JIT (CUDA events over many launches). ``python bench/serve.py [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tests" / "packages" / "factory_shapes"


def _first_calls(mode: str) -> dict:
    """In this process: seconds of each ``*_kernel_for`` first call (``mode`` = jit, served, tir)."""
    sys.path.insert(0, str(PACKAGE))
    import torch
    import workload
    from tlops import api

    if mode == "served":
        import tl_aot

        tl_aot.serve(os.environ["BENCH_LIB"], strict=True)
    calls = [(f"gemm{m}x{n}x{k}", api.gemm_kernel_for, (m, n, k, torch.float16)) for m, n, k in workload.GEMMS]
    calls += [(f"norm{r}x{c}", api.rms_norm_kernel_for, (r, c, torch.float16)) for r, c in workload.NORMS]
    calls += [(f"relu6_{n}_{f}", api.relu6_scale_kernel_for, (n, f)) for n, f in workload.SCALES]
    calls += [(f"relu{r}x{c}", api.relu_kernel_for, (r, c, "float16")) for r, c in workload.RELUS]
    out = {}
    if mode == "tir":  # the prim_func alone, as the library builds it before asking TileLang to compile
        from tl_aot.jit.resolve import intercept_compiles

        with intercept_compiles():
            for name, fn, args in calls:
                t0 = time.perf_counter()
                fn(*args)
                out[name] = time.perf_counter() - t0
        return out
    import tilelang  # noqa: F401  (imported before timing in every mode)

    for name, fn, args in calls:
        t0 = time.perf_counter()
        fn(*args)
        out[name] = time.perf_counter() - t0
    return out


#: Kernels of the steady-state comparison: three small ones, and two that run over 0.1 ms.
BIG = "import sys; sys.path.insert(0, '.'); import torch; from tlops import api; " + (
    "api.gemm_kernel_for(4096, 4096, 4096, torch.float16); api.rms_norm_kernel_for(16384, 1024, torch.float16)"
)


def _makers(api, torch) -> dict:
    return {
        "gemm256x256x128": lambda: api.gemm_kernel_for(256, 256, 128, torch.float16),
        "norm256x256": lambda: api.rms_norm_kernel_for(256, 256, torch.float16),
        "relu6_4096_0.5": lambda: api.relu6_scale_kernel_for(4096, 0.5),
        "gemm4096x4096x4096": lambda: api.gemm_kernel_for(4096, 4096, 4096, torch.float16),
        "norm16384x1024": lambda: api.rms_norm_kernel_for(16384, 1024, torch.float16),
    }


def _steady(lib: str, reps: int = 2000) -> dict:
    """Per kernel: host cost of one launch (us) and device time (us), JIT vs served, in one process."""
    sys.path.insert(0, str(PACKAGE))
    import torch
    import workload

    import tl_aot

    def inputs():
        g = torch.Generator().manual_seed(0)
        r = lambda *s, dt=torch.float16: torch.randn(*s, generator=g).to(dt).cuda()  # noqa: E731
        return {
            "gemm256x256x128": (r(256, 128), r(128, 256)),
            "norm256x256": (r(256, 256),),
            "relu6_4096_0.5": (r(4096, dt=torch.float32),),
            "gemm4096x4096x4096": (r(4096, 4096), r(4096, 4096)),
            "norm16384x1024": (r(16384, 1024),),
        }

    from tlops import api

    makers = _makers(api, torch)
    jit = {k: m() for k, m in makers.items()}
    server = tl_aot.serve(lib, strict=True)
    for name in [n for n in sys.modules if n == "tlops" or n.startswith("tlops.")]:
        del sys.modules[name]  # the library's own caches hold the JIT kernels: import it afresh, served
    from tlops import api as served_api

    served_makers = _makers(served_api, torch)
    served = {k: m() for k, m in served_makers.items()}
    assert server.stats.compiled == 0
    out = {}
    for name, args in inputs().items():
        row = {}
        reps_here = reps if "4096x4096" not in name and "16384" not in name else 200
        for label, kernel in (("jit", jit[name]), ("served", served[name])):
            for _ in range(20):
                kernel(*args)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(reps_here):
                kernel(*args)
            torch.cuda.synchronize()
            row[f"{label}_call_us"] = (time.perf_counter() - t0) / reps_here * 1e6
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps_here):
                kernel(*args)
            end.record()
            torch.cuda.synchronize()
            row[f"{label}_device_us"] = start.elapsed_time(end) / reps_here * 1e3
        row["device_ratio"] = row["served_device_us"] / row["jit_device_us"]
        row["call_ratio"] = row["served_call_us"] / row["jit_call_us"]
        out[name] = row
    _ = workload
    return out


def _sub(mode: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--inner", mode], env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(next(ln for ln in reversed(out.stdout.splitlines()) if ln.startswith("{")))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inner")
    p.add_argument("--json")
    a = p.parse_args(argv)
    if a.inner:
        print(json.dumps(_steady(os.environ["BENCH_LIB"]) if a.inner == "steady" else _first_calls(a.inner)))
        return 0
    import torch

    tmp = Path(tempfile.mkdtemp(prefix="tl_aot_serve_bench_"))
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp / "jit-cache"), PYTHONUNBUFFERED="1")
    record = tmp / "tlops.capture.json"
    for workload in (["workload.py", "--prepare"], ["-c", BIG]):  # the application's kernels, and the big ones timed below
        subprocess.run(
            [sys.executable, "-m", "tl_aot", "capture", "-o", str(record), "--", sys.executable, *workload],
            cwd=PACKAGE,
            env=env,
            check=True,
        )
    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}{minor}{'a' if major >= 9 else ''}"
    subprocess.run(
        [sys.executable, "-m", "tl_aot", "build", "--capture", str(record), "--arch", arch, "-o", str(tmp / "lib"), "-q"],
        check=True,
        env=env,
    )
    env["BENCH_LIB"] = str(tmp / "lib")
    results = {"device": torch.cuda.get_device_name()}
    results["jit_empty_cache_s"] = _sub("jit", dict(env, TILELANG_CACHE_DIR=str(tmp / "empty-cache")))
    results["jit_warm_cache_s"] = _sub("jit", env)
    results["served_s"] = _sub("served", env)
    results["prim_func_only_s"] = _sub("tir", env)
    results["steady"] = _sub("steady", env)
    text = json.dumps(results, indent=1)
    print(text)
    if a.json:
        Path(a.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
