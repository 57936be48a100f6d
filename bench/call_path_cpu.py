"""The launcher's call path on the CPU, before and after a runtime change (issue 42: the in-flight count).

    python bench/call_path_cpu.py [--baseline DIR] [--threads 1,2,16] [--calls 2000000] [--rounds 11] [--out FILE]

Compiles ``bench/cpp/call_path.cc`` (``rt::run`` of a two-tensor entry against a fake driver whose
launch does nothing: argument checks, the launch counted in flight, the context guard) once
against this checkout's runtime (``tl_aot/include`` + ``tl_aot/src``) and, with ``--baseline``,
once against another checkout's (e.g. a worktree of ``main``), with the flags a library's runtime
object gets (``-O2 -fvisibility=hidden``). Runs the two alternately, ``--rounds`` times each per
thread count, and prints one JSON line per build and thread count (median and fastest wall-clock ns
per call of one thread, and the median in the threads' own CPU time) and, with a baseline, the
differences (on a shared, busy machine the CPU-time figure is the steadier one). Needs a C++ compiler, apache-tvm-ffi and ``cuda.h``
(nvcc from PyPI or a toolkit); no GPU. More threads than cores measure contention, not speed:
each line records the CPU count.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

UNITS = ("errors", "driver", "modules", "launch", "tma", "buffers", "checks", "exports")


def build(checkout: Path, exe: Path) -> None:
    """``call_path`` compiled against the runtime of ``checkout`` (its ``tl_aot/include`` and ``tl_aot/src``)."""
    from tl_aot.cuda.toolchain import cuda_include_dir, find_cxx, tvm_ffi_paths

    p = tvm_ffi_paths()
    src = checkout / "tl_aot" / "src"
    cmd = [
        find_cxx(), "-std=c++17", "-O2", "-fvisibility=hidden", "-pthread",
        "-I", str(checkout / "tl_aot" / "include"), "-I", p["include"], "-I", p["dlpack"], "-I", cuda_include_dir(),
        str(ROOT / "bench" / "cpp" / "call_path.cc"), *(str(src / f"{u}.cc") for u in UNITS),
        "-L" + p["libdir"], "-ltvm_ffi", "-ldl", "-Wl,-rpath," + p["libdir"], "-o", str(exe),
    ]  # fmt: skip
    subprocess.run(cmd, check=True)


def run_once(exe: Path, threads: int, calls: int) -> tuple[float, float]:
    """One round: ns per call of one thread, wall clock and the threads' own CPU time."""
    out = subprocess.run([str(exe), str(threads), str(calls), "1"], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    return float(got["ns_per_call"]), float(got["cpu_ns_per_call"])


def median(xs: list[float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, help="another checkout whose runtime to time beside this one")
    ap.add_argument("--threads", default="1,2,16", help="comma-separated thread counts")
    ap.add_argument("--calls", type=int, default=2_000_000, help="calls per thread per round")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--out", type=Path, help="also append the JSON lines to this file")
    args = ap.parse_args(argv)
    builds = {"this": ROOT}
    if args.baseline:
        builds["baseline"] = args.baseline.resolve()
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        exes = {}
        for name, checkout in builds.items():
            exes[name] = Path(tmp) / f"call_path_{name}"
            build(checkout, exes[name])
        for threads in (int(t) for t in args.threads.split(",")):
            samples: dict[str, list[float]] = {name: [] for name in exes}
            cpu: dict[str, list[float]] = {name: [] for name in exes}
            for _ in range(args.rounds):
                for name, exe in exes.items():  # alternately, so drift in the machine's load hits both
                    wall, own = run_once(exe, threads, args.calls)
                    samples[name].append(wall)
                    cpu[name].append(own)
            figures = {name: median(xs) for name, xs in samples.items()}
            fastest = {name: min(xs) for name, xs in samples.items()}
            cpu_figures = {name: median(xs) for name, xs in cpu.items()}
            for name, ns in figures.items():
                lines.append(
                    {"figure": "call_path", "runtime": name, "checkout": str(builds[name]), "threads": threads,
                     "cpus": os.cpu_count(), "calls_per_round": threads * args.calls, "rounds": args.rounds,
                     "ns_per_call": round(ns, 2), "ns_min": round(min(samples[name]), 2),
                     "cpu_ns_per_call": round(cpu_figures[name], 2)}
                )  # fmt: skip
            if "baseline" in figures:
                lines.append(
                    {"figure": "call_path_delta", "threads": threads, "cpus": os.cpu_count(),
                     "ns_per_call_added": round(figures["this"] - figures["baseline"], 2),
                     "ns_min_added": round(fastest["this"] - fastest["baseline"], 2),
                     "cpu_ns_per_call_added": round(cpu_figures["this"] - cpu_figures["baseline"], 2)}
                )  # fmt: skip
    text = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines)
    sys.stdout.write(text)
    if args.out:
        with args.out.open("a") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
