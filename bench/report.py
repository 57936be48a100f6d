"""Render docs/benchmarks.md from the JSONL of ``run.py`` (and, optionally, ``build_times.py``).

    python bench/report.py bench.jsonl [build_times.jsonl ...] [-o docs/benchmarks.md]

Later files win where two hold the same figure (section and name). The goals are recomputed from
the merged figures, so a build file given here counts even when the GPU run did not carry it.
Missing sections render as "not measured"; error and skipped lines are listed, never dropped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from bench.common import ROOT, load_jsonl
from bench.goals import compute, table


def _merge(records: list[dict]) -> list[dict]:
    """Drop stored goal lines and keep the last line per (section, name), in first-seen order."""
    order: list[tuple] = []
    last: dict[tuple, dict] = {}
    for r in records:
        if r.get("section") == "goal":
            continue
        key = (r.get("section"), r.get("name"))
        if key not in last:
            order.append(key)
        last[key] = r
    return [last[k] for k in order]


def _f(v, fmt="{:.3g}", none="—"):
    if v is None:
        return none
    if isinstance(v, (int, float)):
        return fmt.format(v)
    return str(v)


def _sec(records, section):
    return [r for r in records if r.get("section") == section and "error" not in r and "skipped" not in r]


def _header(env: dict, build_env: dict) -> list[str]:
    if not env:
        return ["No GPU run in these results (no `env` line)."]
    gpu = env.get("gpu") or "no GPU"
    facts = [
        f"{gpu}"
        + (
            f" (sm {env['gpu_cc']}, {env.get('gpu_sms')} SMs" + (f", driver {env['driver']}" if env.get("driver") else "") + ")"
            if env.get("gpu_cc")
            else ""
        )
    ]
    lines = [
        f"Latest run: **{env.get('date', '?')}** on {facts[0]}; host {env.get('cpu', '?')} ({env.get('cpus', '?')} CPUs).",
        "",
        f"Versions: torch {env.get('torch', '?')} (CUDA {env.get('torch_cuda', '?')}), TileLang {env.get('tilelang') or 'absent'}, "
        f"apache-tvm-ffi {env.get('apache_tvm_ffi', '?')}, torch-c-dlpack-ext {env.get('torch_c_dlpack_ext') or 'absent'}, "
        f"tl_aot {env.get('tl_aot', '?')}, Python {env.get('python', '?')}.",
    ]
    built = env.get("libs_built_on") or {}
    if built:
        lines += [
            "",
            f"Libraries built on {built.get('cpu', '?')} ({built.get('cpus', '?')} CPUs) on {built.get('date', '?')} with TileLang "
            f"{built.get('tilelang', '?')}, {built.get('nvcc', 'nvcc ?')}.",
        ]
    if build_env:
        lines += [
            "",
            f"Build figures measured on {build_env.get('cpu', '?')} ({build_env.get('cpus', '?')} CPUs), "
            f"spec `{build_env.get('spec', '?')}`.",
        ]
    return lines


_LAUNCH_ORDER = (
    "tl_aot",
    "tl_aot_explicit_stream",
    "jit_tvm_ffi",
    "jit_tvm_ffi_executable",
    "jit_cython",
    "torch_add",
    "noop",
    "noop_env_stream",
    "culaunch",
    "floor",
)


def _launch(records) -> list[str]:
    rows = _sec(records, "launch")
    figs = {r["name"]: r for r in rows if "us" in r}
    if not figs:
        return ["Not measured."]
    floor = figs.get("floor", {}).get("us")
    aot = figs.get("tl_aot", {}).get("us")
    out = ["| candidate | µs per call (median) | min | p90 | × floor | × tl_aot |", "| --- | --- | --- | --- | --- | --- |"]
    known = [n for n in _LAUNCH_ORDER if n in figs]
    skip = ("jit_compile", "tma_gemm:", "profile", "dispatch_from_cpp")
    known += [n for n in figs if n not in _LAUNCH_ORDER and not n.startswith(skip)]
    for name in known:
        r = figs[name]
        out.append(
            f"| {name} | {_f(r['us'], '{:.2f}')} | {_f(r.get('min'), '{:.2f}')} | {_f(r.get('p90'), '{:.2f}')} | "
            f"{_f(r['us'] / floor if floor else None, '{:.2f}')} | {_f(r['us'] / aot if aot else None, '{:.2f}')} |"
        )
    if "floor" in figs:
        p = figs["floor"].get("parts", {})
        out += ["", f"Floor = `noop` ({_f(p.get('noop'), '{:.2f}')} µs, a TVM-FFI call with the same tensors) + `culaunch` "
                f"({_f(p.get('culaunch'), '{:.2f}')} µs, `cuLaunchKernel` in a C++ loop on the same cubin)."]  # fmt: skip
    prof = next((r for r in rows if r["name"] == "profile"), None)
    if prof:
        cpp = figs.get("tl_aot_from_cpp", {})
        out += [
            "",
            f"Profile of the tl_aot call ({prof['tl_aot_us']:.2f} µs): Python + tvm-ffi argument conversion "
            f"{prof['python_and_tvm_ffi_us']:.2f} µs (the no-op), the generated launcher's own code "
            f"{prof['launcher_us']:.2f} µs (the entry called from C++, `bench/cpp/entrycall.cc`, minus plain "
            f"`cuLaunchKernel` in that process; of it `cuCtxGetCurrent` {_f(cpp.get('ctx_get_current_us'), '{:.3f}')} µs and "
            f"`TVMFFIEnvGetStream` {_f(cpp.get('env_stream_us'), '{:.3f}')} µs), the driver's launch "
            f"{prof['driver_launch_us']:.2f} µs (C++ loops of plain `cuLaunchKernel` in two processes: "
            f"{', '.join(_f(x, '{:.2f}') for x in prof.get('culaunch_loops_us', []))} µs).",
        ]
    disp = figs.get("dispatch_from_cpp")
    if disp:
        out += [
            "",
            f"Dispatch (issue 16): `{disp['entry']}`, the same kernel behind {disp['specialisations']} specialisations with the "
            f"matching one tried last, called from C++ interleaved with the plain entry: {disp['us']:.3f} µs vs "
            f"{disp['direct_us']:.3f} µs, so picking adds {disp['adds_us']:.3f} µs (min {disp['min_us']:.3f} vs "
            f"{disp['direct_min_us']:.3f} µs).",
        ]
    tma = {r["name"].split(":", 1)[1]: r for r in rows if r["name"].startswith("tma_gemm:") and "us" in r}
    if tma:
        out += ["", "A 256³ TMA GEMM (`gemm_small`, three descriptors encoded on the host per call), timed the same way:", ""]
        out += ["| candidate | µs per call (median) | min | p90 |", "| --- | --- | --- | --- |"]
        out += [f"| {n} | {r['us']:.2f} | {_f(r.get('min'), '{:.2f}')} | {_f(r.get('p90'), '{:.2f}')} |" for n, r in tma.items()]
    comp = [r for r in rows if r["name"].startswith("jit_compile")]
    if comp:
        out += ["", "JIT compile times in this run: " + ", ".join(f"{r['entry']}/{r['backend']} {r['s']:.1f} s" for r in comp) + "."]
    return out


def _returns(records) -> list[str]:
    rows = _sec(records, "returns")
    figs = {r["name"]: r for r in rows if "us" in r}
    if not figs:
        return ["Not measured."]
    out = ["| candidate | µs per call (median) | min | p90 |", "| --- | --- | --- | --- |"]
    for name, r in figs.items():
        if name not in ("floor", "op_in_compiled_graph") and not name.startswith("jit_compile"):
            out.append(f"| {name} | {r['us']:.2f} | {_f(r.get('min'), '{:.2f}')} | {_f(r.get('p90'), '{:.2f}')} |")
    if "floor" in figs:
        p = figs["floor"]["parts"]
        out += ["", f"Floor = `noop` {p['noop']:.2f} + `torch_empty` {p['torch_empty']:.2f} + `culaunch` {p['culaunch']:.2f} "
                f"= {figs['floor']['us']:.2f} µs."]  # fmt: skip
    g = figs.get("op_in_compiled_graph")
    if g:
        out += ["", f"Inside a `torch.compile(fullgraph=True)` graph the op costs {g['us']:.2f} µs per call "
                f"((`compiled_op_x8` − `compiled_op`) / 7) against {g['direct_us']:.2f} µs for a direct call "
                f"((`direct_x8` − `tl_aot_returns`) / 7): {g['adds_us']:.2f} µs more, torch's dispatch to a Python kernel."]  # fmt: skip
    return out


def _throughput(records) -> list[str]:
    rows = [r for r in _sec(records, "throughput") if "impl" in r]
    if not rows:
        return ["Not measured."]
    jit = {r["kernel"]: r["ms"] for r in rows if r["impl"] == "jit_tvm_ffi"}
    out = [
        "| kernel | implementation | ms (median) | throughput | × JIT speed | max rel. error | correct |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        thr = f"{r['tflops']:.1f} TFLOP/s" if "tflops" in r else f"{r.get('gbps', 0):.0f} GB/s"
        rel = jit.get(r["kernel"])
        out.append(
            f"| {r['kernel']} | {r['impl']} | {r['ms']:.4f} | {thr} | {_f(rel / r['ms'] if rel else None, '{:.3f}')} | "
            f"{_f(r.get('max_rel_err'))} | {'yes' if r.get('ok') else '**no**'} |"
        )
    return out


def _coldstart(records) -> list[str]:
    rows = [r for r in _sec(records, "coldstart") if "beyond_import_torch_s" in r]
    if not rows:
        return ["Not measured."]
    out = [
        "| entry | mode | beyond `import torch` (s) | beyond inputs ready (s) | first result (s) | `import torch` (s) | runs | correct |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        out.append(
            f"| {r['entry']} | {r['mode']} | {r['beyond_import_torch_s']:.3f} | {_f(r.get('beyond_inputs_s'), '{:.3f}')} | "
            f"{_f(r.get('first_result_s'), '{:.3f}')} | {_f(r.get('import_torch_s'), '{:.3f}')} | {r.get('repeats', 1)} | "
            f"{'yes' if r.get('ok') else '**no**'} |"
        )
    out += ["", "Seconds from process start (before `fork`) to the first result after a synchronisation (medians); "
            "*beyond inputs ready* leaves out CUDA initialisation and input creation, which every mode shares."]  # fmt: skip
    for r in rows:
        if r.get("mode") == "tl_aot" and "import_s" in r:
            out += ["", f"tl_aot's part for `{r['entry']}`, beyond inputs ready: `import tl_aot` "
                    f"{r['import_s']:.3f} s, `tl_aot.load` (imports tvm_ffi, opens the library, reads its manifest) "
                    f"{r['load_s']:.3f} s, first call (module load + launch + "
                    f"synchronise) {r['first_call_s']:.3f} s."]  # fmt: skip
    return out


def _build_rows(rows: dict, names: tuple) -> list[str]:
    out = ["| figure | seconds | detail |", "| --- | --- | --- |"]
    for name in names:
        r = rows.get(name)
        if r:
            parts = [f"-j {r['jobs']}"] if "jobs" in r else []
            if r.get("runs"):
                parts.append("runs " + ", ".join(f"{x:.2f}" for x in r["runs"]))
            if "tl_aot_check_seconds" in r:
                parts.append(f"tl_aot's up-to-date check {r['tl_aot_check_seconds']:.2f} s")
            if "variants" in r:
                parts.append(f"{r['variants']} variants")
            if "load_after" in r:
                parts.append(f"load average after {r['load_after']}")
            out.append(f"| {name} | {r['s']:.2f} | {', '.join(parts)} |")
    return out


def _build(records) -> list[str]:
    out = []
    sample = {r["name"]: r for r in _sec(records, "build_sample")}
    if any(k in sample for k in ("full_serial", "full_parallel", "noop_rebuild")):
        out += ["The setuptools sample (`bench/build_bench.py`, `python setup.py build_ext` of `samples/gemm_package`):", ""]
        out += _build_rows(sample, ("full_serial", "full_parallel", "noop_rebuild"))
        if "full_serial" in sample and "full_parallel" in sample:
            out.append(f"| parallel / serial | {sample['full_parallel']['s'] / sample['full_serial']['s']:.2f} (ratio) | |")
        wheel = sample.get("wheel")
        if wheel:
            out += [
                "",
                f"Wheel `{wheel.get('file')}`: {wheel.get('wheel_bytes', 0):,} bytes, library {wheel.get('library_bytes', 0):,} bytes.",
            ]
        out.append("")
    rows = {r["name"]: r for r in _sec(records, "build")}
    if any(k in rows for k in ("serial", "parallel", "noop_rebuild")):
        out += [
            f"The bench spec (`bench/build_times.py`, `python -m tl_aot build --spec {rows.get('environment', {}).get('spec', '?')}`):",
            "",
        ]
        out += _build_rows(rows, ("serial", "parallel", "noop_rebuild"))
        if "parallel_vs_serial" in rows:
            out.append(f"| parallel / serial | {rows['parallel_vs_serial']['ratio']:.2f} (ratio) | |")
        env = rows.get("environment", {})
        if "load_before" in env:
            out += [
                "",
                f"Load average before timing: {env['load_before']} on {env.get('cpus', '?')} CPUs (timings are only meaningful near 0).",
            ]
    return out or ["Not measured (run `python bench/build_times.py` and `python bench/build_bench.py` on the CPU machine)."]


def _scaling(records) -> list[str]:
    rows = [r for r in _sec(records, "scaling") if r.get("name", "").startswith(("full_j", "subset_j"))]
    if not rows:
        return ["Not measured (bench/scaling.py, on the GPU machine's 16 cores)."]
    out = [
        "| build | spec | -j | wall (s) | variants | variants/s | lowering (job s) | nvcc (job s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        out.append(
            f"| {r['name']} | {r['spec']} | {r['jobs']} | {r['wall_s']:.1f} | {r['variants']} | {r['variants_per_s']:.2f} | "
            f"{_f(r.get('lowering_s'), '{:.0f}')} ({r.get('lowering_in', '?')}) | {_f(r.get('nvcc_s'), '{:.0f}')} |"
        )
    for r in _sec(records, "scaling"):
        if r.get("name") == "ratio_j16_j4":
            out += ["", f"`-j 16` / `-j 4` wall time: {r['ratio']:.3f}."]
        if r.get("name") == "subset_j1":
            out += ["", f"Serial cost per variant (`-j 1`, {r['variants']} variants): {r['serial_s_per_variant']:.2f} s."]
        if r.get("name") == "sccache_rebuild":
            out += ["", f"sccache as the compiler launcher (`{r['spec']}`, `-j {r['jobs']}`), tl_aot's cache empty: nvcc "
                    f"{r['first_nvcc_s']:.1f} s, then {r['second_nvcc_s']:.1f} s served from sccache ({r['ratio']:.2f}; "
                    f"{r['cubin_hits']} image hits)."]  # fmt: skip
    return out


def _tune(records) -> list[str]:
    rows = [r for r in _sec(records, "tune") if "wall_ratio" in r]
    if not rows:
        return ["Not measured (bench/tune.py, on the GPU machine)."]
    out = ["| entry | configs | tl_aot tune (s) | TileLang autotune (s) | ratio | tl_aot's choice | TileLang's choice | time ratio |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in rows:
        ours = ", ".join(f"{k}={v}" for k, v in r["tl_aot_config"].items())
        theirs = ", ".join(f"{k}={v}" for k, v in r["tilelang_config"].items())
        out.append(
            f"| {r['name']} | {r['candidates']} | {r['tl_aot_wall_s']:.1f} | {r['tilelang_wall_s']:.1f} | {r['wall_ratio']:.2f} | "
            f"{ours} ({r['tl_aot_ms']:.4f} ms) | {theirs} | {_f(r.get('chosen_ratio'), '{:.3f}')} |"
        )
    out += ["", "Both end to end in a fresh process with fresh caches (tl_aot: build the candidates in parallel through its "
            "pipeline, check, time; TileLang: the decorated call running its autotuner). The time ratio compares the two "
            "choices as tl_aot's tuner measured them in one process."]  # fmt: skip
    return out


def _size(records) -> list[str]:
    rows = _sec(records, "size")
    lib = next((r for r in rows if r["name"] == "library"), None)
    if not lib:
        return ["Not measured."]
    out = ["| entry | arch | image bytes | kind |", "| --- | --- | --- | --- |"]
    for r in rows:
        if r["name"] not in ("library", "launcher_object"):
            out.append(f"| {r['entry']} | {r['arch']} | {r['image_bytes']:,} | {r['image_kind']} |")
    out += [
        "",
        f"`{lib['library']}`: {lib['bytes']:,} bytes for {lib['entries']} entries ({', '.join(lib['archs'])}): "
        f"{lib['image_bytes']:,} bytes of kernel images + {lib['launcher_bytes']:,} bytes of launcher, exports and manifest "
        f"({lib['bytes_per_entry']:,} bytes per entry, {lib['launcher_bytes_per_entry']:,} of them launcher).",
    ]
    obj = next((r for r in rows if r["name"] == "launcher_object"), None)
    if obj:
        out.append(
            f"Its launcher object (the generated per-entry code, rebuilt from the manifest): {obj['host_bytes_per_entry']:,} bytes "
            f"of host code and data per entry ({obj['text_per_entry']:,} of them code), compiled in {obj['compile_s']} s."
        )
    return out


def render(records: list[dict], sources: list[str]) -> str:
    records = _merge(records)
    env = next((r for r in records if r.get("section") == "env" and r.get("name") == "environment"), {})
    build_env = next((r for r in records if r.get("section") == "build" and r.get("name") == "environment"), {})
    goals = compute(records)
    problems = [r for r in records if "error" in r or "skipped" in r]
    parts = [
        "# Benchmarks",
        "",
        f"<!-- Generated by bench/report.py from {', '.join(sources)}. Do not edit; rerun the suite (bench/README.md). -->",
        "",
        *_header(env, build_env),
        "",
        "How to reproduce: `bench/README.md`. Every figure below comes from one run, measured with its "
        "anchors in the same process (cold starts: fresh processes of the same command).",
        "",
        "## Goals",
        "",
        table(goals),
        "",
        "## 1. Host launch overhead per call (1024-element `add_one`)",
        "",
        *_launch(records),
        "",
        "## 2. A call that returns its output (`add_one_ret`, `out_idx=[-1]`)",
        "",
        *_returns(records),
        "",
        "## 3. Device throughput (CUDA events)",
        "",
        *_throughput(records),
        "",
        "## 4. Cold start (fresh process to first correct result)",
        "",
        *_coldstart(records),
        "",
        "## 5. Build",
        "",
        *_build(records),
        "",
        "## 6. Build scaling (16 cores)",
        "",
        *_scaling(records),
        "",
        "## 7. Tuning ahead of time (`python -m tl_aot tune` vs TileLang's autotuner)",
        "",
        *_tune(records),
        "",
        "## 8. Size",
        "",
        *_size(records),
        "",
    ]
    if problems:
        parts += ["## Errors and skipped parts", ""]
        parts += [f"- `{r.get('section')}` / `{r.get('name')}`: {r.get('error') or 'skipped: ' + str(r.get('skipped'))}" for r in problems]
        parts.append("")
    # the marker: tests/support/doc_blocks.py requires one above every block of docs/ (this one is figures, not a command)
    marker = '<!-- docs-test: show reason="recorded figures" -->'
    parts += ["## Raw results", "", marker, "```jsonl", *[json.dumps(r, ensure_ascii=False) for r in records], "```", ""]
    return "\n".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="JSONL files from bench/run.py and bench/build_times.py")
    ap.add_argument("-o", "--out", default=str(ROOT / "docs" / "benchmarks.md"), help="Markdown output (default: docs/benchmarks.md)")
    a = ap.parse_args(argv)
    text = render(load_jsonl(a.inputs), [Path(p).name for p in a.inputs])
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
