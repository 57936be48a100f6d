"""Goals of issues 2, 5, 12, 13, 14, 16 and 27 as ratios computed from the records of one run (plus the build machine's)."""

from __future__ import annotations

__all__ = ["compute", "table"]


def _find(records, section, name, key):
    for r in records:
        if r.get("section") == section and r.get("name") == name and isinstance(r.get(key), (int, float)):
            return r[key]
    return None


def _goal(goal, issue, measured, target, op, detail):
    ok = None if measured is None else (measured <= target if op == "<=" else measured >= target)
    return {
        "goal": goal,
        "issue": issue,
        "measured": None if measured is None else round(measured, 3),
        "target": f"{op} {target}",
        "ok": ok,
        "detail": detail,
    }


def _f(v) -> str:
    return "n/a" if v is None else f"{v:.4f}"


def _ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def _native_goals(records, fmt) -> list[dict]:
    """Issue 27: the returning entry as a native torch op (the companion) beside the direct call and the JIT."""
    sec = "torch_native"
    direct = _find(records, sec, "direct", "us")
    eager = _find(records, sec, "native_op", "us")
    jit = _find(records, sec, "jit_tvm_ffi_returns", "us")
    add = _find(records, sec, "torch_add", "us")
    adds = _find(records, sec, "native_in_compiled_graph", "adds_us")
    in_graph = _find(records, sec, "native_in_compiled_graph", "us")
    d8 = _find(records, sec, "native_in_compiled_graph", "direct_us")
    anchor = f"; torch.add {fmt(add)}"
    cpp = _find(records, sec, "native_in_compiled_graph_cpp_wrapper", "adds_us")
    cpp_us = _find(records, sec, "native_in_compiled_graph_cpp_wrapper", "us")
    return [
        _goal("native op in a compiled graph (C++ wrapper) − direct call (µs)", 27, cpp, 1.0, "<=", f"{fmt(cpp_us)} vs {fmt(d8)}"),
        _goal("native op in a compiled graph − direct call (µs)", 27, adds, 1.0, "<=", f"{fmt(in_graph)} vs {fmt(d8)} per call{anchor}"),
        _goal("native op eager / direct call", 27, _ratio(eager, direct), 1.05, "<=", f"{fmt(eager)} vs {fmt(direct)}{anchor}"),
        _goal("native op (returning) / JIT out_idx", 27, _ratio(eager, jit), 0.6, "<=", f"{fmt(eager)} vs JIT {fmt(jit)}{anchor}"),
    ]


def compute(records) -> list[dict]:
    """Each goal with its measured value, target and whether it is met (None: not measured)."""
    g = []
    aot = _find(records, "launch", "tl_aot", "us")
    floor = _find(records, "launch", "floor", "us")
    jit = _find(records, "launch", "jit_tvm_ffi", "us")
    fmt = lambda v: "n/a" if v is None else f"{v:.2f} µs"  # noqa: E731
    fmt_s = lambda v: "n/a" if v is None else f"{v:.1f} s"  # noqa: E731
    g.append(_goal("launch overhead / floor", 5, _ratio(aot, floor), 1.2, "<=", f"tl_aot {fmt(aot)} vs floor {fmt(floor)}"))
    g.append(_goal("launch overhead / JIT tvm_ffi", 5, _ratio(aot, jit), 0.5, "<=", f"tl_aot {fmt(aot)} vs JIT {fmt(jit)}"))
    g.append(_goal("launch overhead ≤ JIT tvm_ffi's", 2, _ratio(aot, jit), 1.0, "<=", f"tl_aot {fmt(aot)} vs JIT {fmt(jit)}"))
    ret = _find(records, "returns", "tl_aot_returns", "us")
    jret = _find(records, "returns", "jit_tvm_ffi_returns", "us")
    rfloor = _find(records, "returns", "floor", "us")
    g.append(_goal("returning call / JIT out_idx", 12, _ratio(ret, jret), 0.6, "<=", f"tl_aot {fmt(ret)} vs JIT {fmt(jret)}"))
    g.append(
        _goal(
            "returning call / (no-op + torch.empty + cuLaunchKernel)",
            12,
            _ratio(ret, rfloor),
            1.2,
            "<=",
            f"tl_aot {fmt(ret)} vs {fmt(rfloor)}",
        )
    )
    adds = _find(records, "returns", "op_in_compiled_graph", "adds_us")
    in_graph = _find(records, "returns", "op_in_compiled_graph", "us")
    direct = _find(records, "returns", "op_in_compiled_graph", "direct_us")
    detail = f"{fmt(in_graph)} per op in a compiled graph vs {fmt(direct)} per direct call"
    g.append(_goal("op in a torch.compile'd graph − direct call (µs)", 12, adds, 1.0, "<=", detail))
    g.extend(_native_goals(records, fmt))
    disp = _find(records, "launch", "dispatch_from_cpp", "adds_us")
    d_us = _find(records, "launch", "dispatch_from_cpp", "us")
    d_direct = _find(records, "launch", "dispatch_from_cpp", "direct_us")
    detail = f"16 specialisations, the last matching: {fmt(d_us)} vs {fmt(d_direct)} direct, from C++"
    g.append(_goal("dispatch − direct call (µs)", 16, disp, 0.1, "<=", detail))
    ratio = _find(records, "scaling", "ratio_j16_j4", "ratio")
    j16 = _find(records, "scaling", "full_j16", "wall_s")
    j4 = _find(records, "scaling", "full_j4", "wall_s")
    g.append(_goal("104-variant build, -j 16 / -j 4", 14, ratio, 0.35, "<=", f"{fmt_s(j16)} vs {fmt_s(j4)}, 16 cores"))
    scc = _find(records, "scaling", "sccache_rebuild", "ratio")
    g.append(_goal("nvcc time served by sccache / first build", 14, scc, 0.25, "<=", "tl_aot cache empty, same paths"))
    for r in records:
        if r.get("section") == "tune" and "wall_ratio" in r:
            detail = f"{r['tl_aot_wall_s']:.1f} s vs {r['tilelang_wall_s']:.1f} s, {r['candidates']} configs"
            g.append(_goal(f"tuning wall time / TileLang's autotuner ({r['name']})", 13, r["wall_ratio"], 0.7, "<=", detail))
            detail = f"{r['tl_aot_ms']:.4f} ms vs {_f(r.get('tilelang_config_ms'))} ms"
            g.append(_goal(f"tuned config time / TileLang's choice ({r['name']})", 13, r.get("chosen_ratio"), 1.02, "<=", detail))
    kernels = ["gemm_f16", "gemm_bf16", "softmax"]
    for r in records:
        if r.get("section") == "throughput" and r.get("impl") == "tl_aot" and r.get("kernel") not in kernels:
            kernels.append(r["kernel"])
    for k in kernels:
        a = _find(records, "throughput", f"{k}:tl_aot", "ms")
        j = _find(records, "throughput", f"{k}:jit_tvm_ffi", "ms")
        speed = _ratio(j, a)  # throughput ratio = inverse time ratio
        detail = "n/a" if a is None or j is None else f"{a:.4f} ms vs {j:.4f} ms"
        tf_a = _find(records, "throughput", f"{k}:tl_aot", "tflops")
        tf_j = _find(records, "throughput", f"{k}:jit_tvm_ffi", "tflops")
        if tf_a is not None and tf_j is not None:
            detail = f"{tf_a:.1f} vs {tf_j:.1f} TFLOP/s"
        g.append(_goal(f"throughput {k} / JIT", 5, speed, 0.99, ">=", detail))
        if k == "gemm_f16":
            g.append(_goal("8192³ fp16 GEMM TFLOP/s / JIT", 2, speed, 0.98, ">=", detail))
    cold = [r for r in records if r.get("section") == "coldstart" and r.get("mode") == "tl_aot" and "beyond_import_torch_s" in r]
    for r in cold:
        jw = _find(records, "coldstart", f"{r['entry']}:jit_warm", "beyond_import_torch_s")
        detail = f"JIT warm cache {jw:.2f} s" if jw is not None else "JIT not measured"
        g.append(_goal(f"cold start {r['entry']} beyond import torch (s)", 5, r["beyond_import_torch_s"], 0.3, "<=", detail))
    if not cold:
        g.append(_goal("cold start beyond import torch (s)", 5, None, 0.3, "<=", "n/a"))
    # Build: the setuptools sample's figures (bench/build_bench.py) when present, as the issue asks,
    # else the bench spec's (bench/build_times.py).
    sample = _find(records, "build_sample", "full_serial", "s") is not None
    sec, ser_name, par_name = ("build_sample", "full_serial", "full_parallel") if sample else ("build", "serial", "parallel")
    what = "setuptools sample" if sample else "bench spec"
    noop = _find(records, sec, "noop_rebuild", "s")
    g.append(_goal("no-op rebuild (s)", 5, noop, 1.0, "<=", f"{what}, nothing changed"))
    ser = _find(records, sec, ser_name, "s")
    par = _find(records, sec, par_name, "s")
    jobs = next((r.get("jobs") for r in records if r.get("section") == sec and r.get("name") == par_name), None)
    detail = f"{what}: {par} s (-j {jobs}) vs {ser} s (-j 1)" if ser else "n/a"
    g.append(_goal("parallel build / serial", 5, _ratio(par, ser), 0.6, "<=", detail))
    return g


def table(goals) -> str:
    """A Markdown table: goal, issue, measured, target, met."""
    rows = ["| goal | issue | measured | target | met | detail |", "| --- | --- | --- | --- | --- | --- |"]
    for x in goals:
        met = "not measured" if x["ok"] is None else ("yes" if x["ok"] else "**no**")
        meas = "—" if x["measured"] is None else f"{x['measured']:.3f}"
        rows.append(f"| {x['goal']} | #{x['issue']} | {meas} | {x['target']} | {met} | {x['detail']} |")
    return "\n".join(rows)
