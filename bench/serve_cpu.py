"""Where serving's own time goes, on the CPU: loading a many-entry library and answering each request.

Builds (once, into ``--libs``) a library of many entries from tests/kernels (GEMMs over tile
configs and sizes, softmax, elementwise), then, in fresh processes with an H100 profile answering
device queries (no GPU needed):

All times are CPU time of the measuring process (``time.process_time``), robust to other work on the machine.

- ``load``: ``tl_aot.serve(lib)``: read and check the file, dlopen, manifest, index, each timed;
- ``requests``: every entry asked for as TileLang's JIT asks (``tilelang.compile`` of the factory's
  prim_func with the options the entry records), three times (a first request and the same kernel
  asked for again: the same prim_func object, then a new prim_func built again): serving's lookup
  time per request, against two anchors measured in the same process on the same
  prim_funcs: building the prim_func (what the library does anyway) and TileLang's own warm-cache
  key (``KernelCache._generate_key``: what the JIT hashes before it can load a cached kernel).

``--calls``: a ``@tilelang.jit`` call answered before TileLang traces, against what TileLang's
warm-cache path must do before it can even look in its cache (trace the prim_func, ``get_tir``,
and hash it, ``KernelCache._generate_key``), each in a fresh process, on the @tilelang.jit
kernels of tests/kernels/faithful.py (GEMM, flash attention forward and backward, persistent FP8
batched GEMM, persistent causal attention) over several sizes. The calls are captured (nothing
compiled), their record indexed by a served library stand-in (the library's own entry lookup is
what ``requests`` measures), and each call answered through the seam as a test run asks it.

``python bench/serve_cpu.py [--libs DIR] [--entries N] [--json OUT]``, ``python bench/serve_cpu.py --calls``. The GPU part (the whole
served test slice against the JIT's warm and empty caches) is bench/tileops_serve_gpu.sh.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: CPU time of this process: the build machine's 2 cores are shared, and wall time would measure the neighbours.
CLOCK = time.process_time
KERNELS = ROOT / "tests" / "kernels"


def _entries(n: int) -> list[dict]:
    """``n`` entries (at most 64) from tests/kernels: GEMM configs x sizes first, then softmax and elementwise."""
    out = []
    gemm_cfgs = [(128, 128, 64, 3, 128), (64, 64, 32, 2, 128), (128, 256, 64, 3, 256), (64, 128, 32, 4, 128)]
    for size in (256, 512, 1024, 2048, 4096, 8192):
        for bm, bn, bk, st, th in gemm_cfgs:
            args = {"M": size, "N": size, "K": size, "block_M": bm, "block_N": bn, "block_K": bk, "num_stages": st, "threads": th}
            out.append({"source": "gemm.py", "function": "matmul", "args": args})
    for size in (256, 512, 1024, 2048, 4096, 8192):
        for threads in (128, 256):
            out.append({"source": "softmax.py", "function": "softmax", "args": {"N": size, "threads": threads}})
    for size in (1024, 4096, 16384, 65536, 262144, 1048576):
        out.append({"source": "elementwise.py", "function": "axpy", "args": {"N": size}})
    for dtype in ("float32", "float16", "bfloat16"):
        for block in (128, 256):
            out.append({"source": "elementwise.py", "function": "add_one", "args": {"dtype": dtype, "block": block}})
    return out[:n]


def _spec(n: int, path: Path) -> Path:
    lines = ['[library]\nname = "serve_bench"\narchs = ["90a"]\n']
    for i, e in enumerate(_entries(n)):
        args = ", ".join(f"{k} = {json.dumps(v)}" for k, v in e["args"].items())
        lines.append(
            f'[[entry]]\nname = "k{i:03d}_{e["function"]}"\nsource = "{KERNELS / e["source"]}"\nfunction = "{e["function"]}"\n'
            f"args = {{ {args} }}\n"
        )
    path.write_text("\n".join(lines))
    return path


def build(libs: Path, n: int, jobs: int) -> Path:
    """The bench library in ``libs`` (built unless it is there with ``n`` entries)."""
    lib = libs / "libserve_bench.so"
    stamp = libs / "entries.txt"
    if lib.is_file() and stamp.is_file() and stamp.read_text().strip() == str(n):
        return lib
    libs.mkdir(parents=True, exist_ok=True)
    spec = _spec(n, libs / "serve_bench.toml")
    cmd = [sys.executable, "-m", "tl_aot", "build", "--spec", str(spec), "-o", str(libs), "-j", str(jobs), "-q"]
    subprocess.run(cmd, check=True)
    stamp.write_text(str(n))
    return lib


def _inner_load(lib: str) -> dict:
    """Seconds of each step of ``tl_aot.serve(lib)`` in this (fresh) process."""
    t = {}
    t0 = CLOCK()
    import tvm_ffi  # noqa: F401

    import tl_aot
    from tl_aot.runtime import loader as runtime
    from tl_aot.serving import server as serving

    t["import_s"] = CLOCK() - t0
    gc.collect()  # the collection torch's import left pending is not serving's cost
    calls: dict = {}

    def timed(name, fn):
        def wrap(*a, **kw):
            t1 = CLOCK()
            try:
                return fn(*a, **kw)
            finally:
                calls[name] = calls.get(name, 0.0) + CLOCK() - t1

        return wrap

    runtime.check_library_file = timed("check_file_s", runtime.check_library_file)
    runtime.read_manifest = timed("manifest_s", runtime.read_manifest)
    runtime.Library = timed("library_init_s", runtime.Library)
    serving.Server.add = timed("index_s", serving.Server.add)
    t1 = CLOCK()
    server = tl_aot.serve(lib, strict=True)
    t["serve_s"] = CLOCK() - t1
    t.update(calls)
    t["entries"] = sum(len(x.manifest.entries) for x in server.libraries)
    t["bytes"] = os.path.getsize(lib)
    return t


def _inner_requests(lib: str) -> dict:
    """Per entry: prim_func build, TileLang's warm-cache key, served lookup (first and repeated request)."""
    import importlib.util

    import tilelang
    from tilelang.cache.kernel_cache import KernelCache

    import tl_aot
    from tl_aot.gpu.device import emulate, find_profile

    server = tl_aot.serve(lib, strict=True)
    entries = [e for x in server.libraries for e in x.manifest.entries]
    mods = {}
    rows = []
    with emulate(find_profile("H100-SXM")):
        for e in entries:
            src = Path(e.source)
            if src not in mods:
                spec = importlib.util.spec_from_file_location(f"bench_{src.stem}", src)
                mods[src] = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mods[src])
            factory = getattr(mods[src], e.function)
            kwargs = {k: json.loads(v) if v[:1] not in "'\"" else v.strip("'\"") for k, v in e.args}
            req = json.loads(e.variants[0].request)
            opts = req.get("options", req)
            row = {"entry": e.name}
            t0 = CLOCK()
            func = factory(**kwargs)
            row["prim_func_s"] = CLOCK() - t0
            t0 = CLOCK()
            KernelCache()._generate_key(
                func, out_idx=opts.get("out_idx"), execution_backend="tvm_ffi", args=(), target="cuda", target_host=None,
                pass_configs=opts.get("pass_configs") or None, compile_flags=opts.get("compile_flags") or None,
            )  # fmt: skip
            row["tilelang_key_s"] = CLOCK() - t0
            for r, ask in enumerate((func, func, factory(**kwargs))):  # first, the same prim_func again, a new one
                t0 = CLOCK()
                kernel = tilelang.compile(ask, out_idx=opts.get("out_idx"), pass_configs=opts.get("pass_configs") or None)
                row[f"lookup_{r}_s"] = CLOCK() - t0  # the whole served compile call: seam, key, index, ServedKernel
                assert type(kernel).__name__ == "ServedKernel", kernel
            rows.append(row)
    assert server.stats.compiled == 0 and server.stats.refused == 0
    return {"rows": rows}


def _jit_calls() -> list:
    """(name, @tilelang.jit object, args) of the calls ``--calls`` times."""
    sys.path.insert(0, str(KERNELS))
    import faithful

    out = []
    for n in (256, 512, 1024, 2048):
        out.append((f"gemm_jit_{n}", faithful.gemm_jit, (n, n, n)))
        out.append((f"flashattn_fwd_{n}", faithful.flashattn_fwd, (1, 8, n, 64)))
        out.append((f"bmm_fp8_persistent_{n}", faithful.bmm_fp8_persistent, (4, n, n, n)))
    out.append(("flashattn_bwd_256", faithful.flashattn_bwd, (1, 2, 256, 64)))
    out.append(("attn_fwd_persistent_causal_512", faithful.attn_fwd_persistent_causal, (1, 8, 512, 128)))
    return out


def _inner_calls(mode: str, record: str) -> dict:
    """``capture``: record the calls; ``anchor``: trace + TileLang's key per call; ``served``: each call answered, untraced."""
    from tilelang.cache.kernel_cache import KernelCache

    from tl_aot.capture.record import CaptureRecord
    from tl_aot.capture.record_specs import recorded_calls
    from tl_aot.capture.recorder import Capturer
    from tl_aot.gpu.device import emulate, find_profile
    from tl_aot.jit.seam import Interception, intercepting, jit_module
    from tl_aot.serving import active
    from tl_aot.serving.server import Server

    rows = []
    with emulate(find_profile("H100-SXM")):
        calls = _jit_calls()
        if mode == "capture":
            cap = Capturer(Path(record), compile_for_real=False)
            with intercepting(Interception(cap._on_request, name="capture")):
                for _, jit, args in calls:
                    jit.compile(*args)
            cap.flush()
            return {"kernels": len(CaptureRecord.load(record).kernels)}
        if mode == "anchor":
            for name, jit, args in calls:
                t0 = CLOCK()
                func = jit.get_tir(*args)
                KernelCache()._generate_key(
                    func, out_idx=jit.out_idx, execution_backend="tvm_ffi", args=(), target="cuda", target_host=None,
                    pass_configs=jit.pass_configs or None, compile_flags=jit.compile_flags or None,
                )  # fmt: skip
                rows.append({"call": name, "s": CLOCK() - t0})
            return {"rows": rows}
        kernels = CaptureRecord.load(record).kernels
        lib = _StandIn(kernels, recorded_calls([record], set(kernels)))
        server = active._active = Server([lib], strict=True)
        active._patch(jit_module())
        for name, jit, args in calls:
            t0 = CLOCK()
            kernel = jit.compile(*args)  # JITImpl.compile: what TileLang's __call__ runs on a miss of its in-process cache
            rows.append({"call": name, "s": CLOCK() - t0})
            assert type(kernel).__name__ == "ServedKernel", kernel
        assert server.stats.served_untraced == len(calls), server.stats
    return {"rows": rows}


class _StandIn:
    """A served library's shape (manifest, path, entries by name) holding the captured kernels' request keys."""

    def __init__(self, kernels: dict, calls: tuple) -> None:
        import types

        from tl_aot.common.arch import parse_arch

        entries = [
            types.SimpleNamespace(
                export="", name=f"k_{key[:10]}", capture_key=key, capture_name="", function="captured", args=(),
                variants=[types.SimpleNamespace(request_key=key, arch=parse_arch("sm_90a"))],
            )
            for key in kernels
        ]  # fmt: skip
        self.manifest = types.SimpleNamespace(entries=entries, tunings=(), calls=calls)
        self.path = Path("libstand_in.so")

    def __getitem__(self, name: str):
        return lambda *args: name


def calls_bench(repeat: int) -> dict:
    """Served @tilelang.jit calls against trace + TileLang's key, per call, medians over ``repeat`` fresh processes."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        record = str(Path(tmp) / "calls.capture.json")
        kernels = _sub("calls-capture", Path(record))["kernels"]
        anchor = [_sub("calls-anchor", Path(record))["rows"] for _ in range(repeat)]
        served = [_sub("calls-served", Path(record))["rows"] for _ in range(repeat)]
    med = statistics.median
    names = [r["call"] for r in anchor[0]]
    per = {
        n: {
            "trace_and_key_ms": round(med([a[i]["s"] for a in anchor]) * 1e3, 3),
            "served_ms": round(med([s[i]["s"] for s in served]) * 1e3, 3),
        }
        for i, n in enumerate(names)
    }
    total_anchor = sum(v["trace_and_key_ms"] for v in per.values())
    total_served = sum(v["served_ms"] for v in per.values())
    return {
        "calls": len(names),
        "kernels_captured": kernels,
        "trace_and_key_ms_total": round(total_anchor, 2),
        "served_ms_total": round(total_served, 2),
        "served_vs_trace_and_key": round(total_served / total_anchor, 4),
        "per_call": per,
    }


def _sub(mode: str, lib: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--inner", mode, "--lib", str(lib)], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(next(ln for ln in reversed(out.stdout.splitlines()) if ln.startswith("{")))


def _summary(load: list, req: dict) -> dict:
    med = lambda xs: statistics.median(xs)  # noqa: E731
    rows = req["rows"]
    s = {k: round(med([x[k] for x in load]) * 1e3, 2) for k in load[0] if k.endswith("_s")}
    s = {k.replace("_s", "_ms"): v for k, v in s.items()}
    s["entries"], s["bytes"] = load[0]["entries"], load[0]["bytes"]
    for k in ("prim_func_s", "tilelang_key_s", "lookup_0_s", "lookup_1_s", "lookup_2_s"):
        s[k.replace("_s", "_ms_median")] = round(med([r[k] for r in rows]) * 1e3, 3)
        s[k.replace("_s", "_ms_total")] = round(sum(r[k] for r in rows) * 1e3, 2)
    s["lookup_vs_tilelang_key"] = round(s["lookup_0_ms_total"] / s["tilelang_key_ms_total"], 3)
    s["lookup_vs_prim_func"] = round(s["lookup_0_ms_total"] / s["prim_func_ms_total"], 3)
    s["same_func_lookup_vs_tilelang_key"] = round(s["lookup_1_ms_total"] / s["tilelang_key_ms_total"], 3)
    s["new_func_lookup_vs_tilelang_key"] = round(s["lookup_2_ms_total"] / s["tilelang_key_ms_total"], 3)
    return s


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inner")
    p.add_argument("--lib")
    p.add_argument("--libs", default=str(ROOT / ".benchlibs" / "serve"))
    p.add_argument("--entries", type=int, default=48)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json")
    p.add_argument("--calls", action="store_true", help="served @tilelang.jit calls (untraced) against trace + TileLang's key")
    a = p.parse_args(argv)
    if a.inner:
        if a.inner.startswith("calls-"):
            print(json.dumps(_inner_calls(a.inner.removeprefix("calls-"), a.lib)))
        else:
            print(json.dumps(_inner_load(a.lib) if a.inner == "load" else _inner_requests(a.lib)))
        return 0
    if a.calls:
        result = calls_bench(a.repeat)
        print(json.dumps({k: v for k, v in result.items() if k != "per_call"}, indent=1))
        if a.json:
            Path(a.json).write_text(json.dumps(result, indent=1))
        return 0
    lib = build(Path(a.libs), a.entries, a.jobs)
    load = [_sub("load", lib) for _ in range(a.repeat)]
    req = _sub("requests", lib)
    result = {"summary": _summary(load, req), "load": load, "requests": req["rows"]}
    text = json.dumps(result, indent=1)
    print(json.dumps(result["summary"], indent=1))
    if a.json:
        Path(a.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
