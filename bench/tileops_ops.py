"""TileOPs operators served by tl_aot vs TileLang's JIT on the GPU: first call and steady state.

Each operator (TileOPs' own ``*FwdOp`` classes, called as its tests call them) is timed in fresh
processes: the JIT with an empty TileLang cache, the JIT with a warm cache, and served strictly from
a library built from a capture of the same workload. Per operator and shape: the first call
(construct + first forward + sync), the host cost of a call and the device time of a call (CUDA
events over many calls, best of five rounds), and the time up to TileLang's compile request with the
compile intercepted (the prim_func construction the library does anyway: a served first call's
floor). Needs TileOPs (its repository's ``src``) and TileLang importable, and a
GPU. ``python bench/tileops_ops.py --json OUT [--jobs 16]``.
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

#: (name, operator, shape, dtype): a test-sized call and one whose kernel runs over 0.1 ms on an H100.
CASES = [
    (f"{op}_{'x'.join(map(str, shape))}", op, shape)
    for op in ("rms_norm", "layer_norm", "softmax", "relu", "gelu")
    for shape in ((1024, 4096), (32768, 4096))
]


def _make(op: str, shape: tuple, torch):
    """The operator and its arguments, as TileOPs' tests build them (fp16 on the GPU)."""
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(*shape, device="cuda", dtype=torch.float16, generator=g)
    n = shape[-1]
    w = torch.randn(n, device="cuda", dtype=torch.float16, generator=g)
    if op == "rms_norm":
        from tileops.ops.norm.rms_norm import RMSNormFwdOp

        return lambda: RMSNormFwdOp(normalized_shape=(n,)), (x, w)
    if op == "layer_norm":
        from tileops.ops.norm.layer_norm import LayerNormFwdOp

        b = torch.randn(n, device="cuda", dtype=torch.float16, generator=g)
        return lambda: LayerNormFwdOp(normalized_shape=(n,)), (x, w, b)
    if op == "softmax":
        from tileops.ops.reduction.softmax import SoftmaxFwdOp

        return lambda: SoftmaxFwdOp(dim=-1), (x,)
    from tileops.ops.elementwise import GeluFwdOp, ReluFwdOp

    return (ReluFwdOp if op == "relu" else GeluFwdOp), (x.flatten(),)


def _inner(mode: str) -> dict:
    """In this process: every case's first call, host cost and device time (``mode``: jit, served or tir).

    ``tir`` times each case up to TileLang's compile request, with the compile intercepted: the
    prim_func construction and op logic the library runs anyway, the floor of a served first call.
    """
    import contextlib

    import tilelang  # noqa: F401  (imported before timing, in every mode)
    import torch

    server = None
    if mode == "served":
        import tl_aot

        server = tl_aot.serve(os.environ["BENCH_LIB"], strict=True)
    torch.zeros(1, device="cuda")  # the CUDA context, before timing
    out = {}
    for name, op, shape in CASES:
        make, args = _make(op, shape, torch)
        torch.cuda.synchronize()
        if mode == "tir":
            from tl_aot.jit.resolve import intercept_compiles

            with intercept_compiles():
                t0 = time.perf_counter()
                with contextlib.suppress(Exception):  # the compile's stand-in cannot run: stop there
                    make()(*args)
                out[name] = {"first_call_s": time.perf_counter() - t0}
            continue
        t0 = time.perf_counter()
        fn = make()
        fn(*args)
        torch.cuda.synchronize()
        row = {"first_call_s": time.perf_counter() - t0}
        reps = 200 if shape[0] > 4096 else 2000
        for _ in range(20):
            fn(*args)
        calls, device = [], []
        for _ in range(5):  # the best of five rounds: host noise only ever adds
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(reps):
                fn(*args)
            torch.cuda.synchronize()
            calls.append((time.perf_counter() - t0) / reps * 1e6)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                fn(*args)
            end.record()
            torch.cuda.synchronize()
            device.append(start.elapsed_time(end) / reps * 1e3)
        row["call_us"], row["device_us"] = min(calls), min(device)
        out[name] = row
    if server is not None:
        st = server.stats
        out["_served"] = {"served": st.served, "compiled": st.compiled, "refused": st.refused, "lookup_s": st.lookup_s}
    return out


def _sub(mode: str, env: dict, wrap: list | None = None) -> dict:
    cmd = [*(wrap or []), sys.executable, __file__, "--inner", mode]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(next(ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")))  # after any tl_aot line


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inner")
    p.add_argument("--json")
    p.add_argument("--jobs", type=int, default=os.cpu_count())
    a = p.parse_args(argv)
    if a.inner:
        print(json.dumps(_inner(a.inner)))
        return 0
    import torch

    tmp = Path(tempfile.mkdtemp(prefix="tl_aot_tileops_bench_"))
    env = dict(os.environ, PYTHONUNBUFFERED="1", TILELANG_CACHE_DIR=str(tmp / "jit-cache"))
    results = {"device": torch.cuda.get_device_name(), "cases": [c[0] for c in CASES]}
    results["jit_empty_cache"] = _sub("jit", env)
    record = tmp / "ops.capture.json"
    _sub("jit", env, [sys.executable, "-m", "tl_aot", "capture", "-o", str(record), "--"])  # a warm run, recorded
    results["jit_warm_cache"] = _sub("jit", env)
    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}{minor}{'a' if major >= 9 else ''}"
    t0 = time.perf_counter()
    build = [sys.executable, "-m", "tl_aot", "build", "--capture", str(record), "--arch", arch, "-o", str(tmp / "lib")]
    build += ["-j", str(a.jobs), "-q"]
    subprocess.run(build, env=env, check=True)
    results["build_s"] = time.perf_counter() - t0
    results["kernels_captured"] = len(json.loads(record.read_text()).get("kernels", []))
    served_cache = tmp / "served-cache"
    served_cache.mkdir()
    results["served"] = _sub("served", dict(env, BENCH_LIB=str(tmp / "lib"), TILELANG_CACHE_DIR=str(served_cache)))
    results["served_cache_files"] = sum(1 for f in served_cache.rglob("*") if f.is_file())
    results["up_to_compile_request"] = _sub("tir", env)
    summary = {}
    for name in results["cases"]:
        e, w, s = results["jit_empty_cache"][name], results["jit_warm_cache"][name], results["served"][name]
        summary[name] = {
            "first_call_s": {
                k: round(r["first_call_s"], 4)
                for k, r in (
                    ("jit_empty", e),
                    ("jit_warm", w),
                    ("served", s),
                    ("up_to_compile_request", results["up_to_compile_request"][name]),
                )
            },
            "device_us": {"jit": round(w["device_us"], 2), "served": round(s["device_us"], 2)},
            "device_ratio_jit_over_served": round(w["device_us"] / s["device_us"], 3),
            "call_us": {"jit": round(w["call_us"], 2), "served": round(s["call_us"], 2)},
        }
    results["summary"] = summary
    text = json.dumps(results, indent=1)
    print(text)
    if a.json:
        Path(a.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
