"""The benchmark suite of issue 5, one command on the GPU machine.

    python bench/run.py --libs .benchlibs --out $OUT/bench.jsonl

Prints one JSON line per figure and writes them to ``--out``; each figure is measured with its
anchors in this process (or its children, for cold starts). Sections, each guarded so that one
failure never loses the others:

  size        library bytes per entry and per arch (from the manifest)
  launch      host launch overhead per call: tl_aot, TileLang JIT (tvm_ffi, cython), torch, floor
  returns     the same when the call returns its output: tl_aot, JIT out_idx, torch op, torch.compile
  torch_native  the returning entry as a native torch op (the companion): eager, in torch.compile, vs direct
  throughput  8192³ fp16/bf16 GEMM and row softmax: tl_aot vs JIT vs torch, CUDA events
  coldstart   process start → first correct result, fresh processes: tl_aot vs JIT warm/empty cache

Build figures are measured on the CPU machine (``bench/build_times.py`` for the bench spec,
``bench/build_bench.py`` for the setuptools sample); their lines, found in ``<libs>/build_times.jsonl``
and ``<libs>/build_sample.jsonl``, are copied into the output. Ends with the goals table (ratios from
this run). Needs ``bench/build_libs.py``'s folder; TileLang only for the JIT anchors.

Environment: sets ``TILELANG_CACHE_DIR`` (unless set) to a folder of its own, so the warm-cache
cold start reads the cache the in-process JIT anchors filled.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path[0] = str(Path(__file__).resolve().parent.parent)  # run as a script: import bench.* and tl_aot

from bench.common import ROOT, Deadline, Recorder, environment, load_jsonl, section

SECTIONS = ("size", "launch", "returns", "torch_native", "throughput", "coldstart")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python bench/run.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    default_out = Path(os.environ["OUT"]) / "bench.jsonl" if os.environ.get("OUT") else Path("bench.jsonl")
    ap.add_argument("--libs", default=str(ROOT / ".benchlibs"), help="folder from bench/build_libs.py (default: .benchlibs)")
    ap.add_argument("--out", default=str(default_out), help="JSONL output (default: $OUT/bench.jsonl, else ./bench.jsonl)")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    ap.add_argument("--budget-s", type=float, default=330, help="wall-clock budget; optional work is skipped past it (default 330)")
    ap.add_argument("--no-jit", action="store_true", help="skip TileLang's JIT anchors (no tilelang needed)")
    g = ap.add_argument_group("launch")
    g.add_argument("--calls", type=int, default=30000, help="timed calls per candidate (default 30000)")
    g.add_argument("--batch", type=int, default=100, help="calls per timed batch between synchronisations (default 100)")
    g.add_argument("--warmup", type=int, default=2000, help="untimed calls per candidate first (default 2000)")
    g = ap.add_argument_group("throughput")
    g.add_argument("--rounds", type=int, default=10, help="interleaved timing rounds per implementation (default 10)")
    g.add_argument("--gemm-reps", type=int, default=10, help="GEMM calls per timed round (default 10)")
    g.add_argument("--reps", type=int, default=100, help="softmax calls per timed round (default 100)")
    g = ap.add_argument_group("coldstart")
    g.add_argument("--cold-entries", default="add_one,gemm_f16", help="entries to cold-start (default add_one,gemm_f16)")
    g.add_argument("--cold-repeats", type=int, default=3, help="fresh processes per mode; the median is reported (default 3)")
    g.add_argument("--cold-empty-all", action="store_true", help="also cold-start the JIT with an empty cache for GEMMs (slow)")
    return ap


def _gpu_ready() -> str:
    """'' when torch sees a CUDA device, else why not."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device"
    return ""


def main(argv=None) -> int:
    opts = _parser().parse_args(argv)
    opts.cold_entries = [e for e in opts.cold_entries.split(",") if e]
    wanted = [s for s in opts.sections.split(",") if s]
    unknown = set(wanted) - set(SECTIONS)
    if unknown:
        _parser().error(f"unknown section(s) {', '.join(sorted(unknown))}; choose from {', '.join(SECTIONS)}")
    os.environ["PYTHONUNBUFFERED"] = "1"
    os.environ.setdefault("TILELANG_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp")) / "tl_aot_bench" / "tilelang-cache"))
    if str(ROOT) not in os.environ.get("PYTHONPATH", "").split(os.pathsep):  # children import tl_aot and bench from here
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    from bench import anchors, coldstart, goals, launch, returns, size, throughput, torch_native

    libs = Path(opts.libs).resolve()
    rec = Recorder(opts.out)
    ctx = anchors.Context(libs=libs, deadline=Deadline(opts.budget_s), options=opts)
    no_gpu = _gpu_ready()
    with section(rec, "env"):
        info = environment(gpu=not no_gpu or no_gpu == "no CUDA device")
        build_info = libs / "build_info.json"
        if build_info.is_file():
            import json

            info["libs_built_on"] = json.loads(build_info.read_text()).get("built_on", {})
        rec.emit("env", "environment", **info, libs=str(libs), tilelang_cache_dir=os.environ["TILELANG_CACHE_DIR"], no_gpu=no_gpu or None)
    if not libs.is_dir():
        rec.emit("env", "error", error=f"{libs} does not exist: run python bench/build_libs.py -o {libs} first (on the CPU machine)")
    runners = {
        "size": size.run,
        "launch": launch.run,
        "returns": returns.run,
        "torch_native": torch_native.run,
        "throughput": throughput.run,
        "coldstart": coldstart.run,
    }
    for name in wanted:
        if name != "size" and no_gpu:
            rec.emit(name, "skipped", skipped=no_gpu)
            continue
        if name != "size" and ctx.deadline.left() < 20:
            rec.emit(name, "skipped", skipped="time budget spent")
            continue
        with section(rec, name):
            runners[name](ctx, rec)
    try:
        with section(rec, "build"):
            for fname in ("build_times.jsonl", "build_sample.jsonl"):  # bench/build_times.py, bench/build_bench.py
                path = libs / fname
                for r in load_jsonl([path]) if path.is_file() else []:
                    rec.emit(r.pop("section", "build"), r.pop("name", "?"), **r, source=fname)
        with section(rec, "goal"):
            for gl in goals.compute(rec.records):
                rec.emit("goal", gl["goal"], **{k: v for k, v in gl.items() if k != "goal"})
            print("\n" + goals.table([r | {"goal": r["name"]} for r in rec.records if r["section"] == "goal"]), flush=True)
        print(f"\n{len(rec.records)} lines in {opts.out} ({ctx.deadline.elapsed():.0f} s)", flush=True)
    finally:
        rec.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
