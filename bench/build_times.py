"""Figure 4 (CPU machine): build times of a spec file with ``python -m tl_aot build``, each a fresh process.

    python bench/build_times.py [--spec bench/bench.toml] [-j 2] [--out .benchlibs/build_times.jsonl]

* ``serial`` (``-j 1``) and ``parallel`` (``-j N``): from an empty variant cache into an empty folder;
  an untimed build of the spec's first entry warms the OS file cache (TileLang, CUTLASS headers) first;
* ``noop_rebuild``: the parallel build run again with nothing changed (median of 3).

``run.py`` folds these lines (from ``<libs>/build_times.jsonl``) into its own output, and ``report.py``
renders them with the GPU figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from bench.common import ROOT, Recorder, environment

HERE = Path(__file__).resolve().parent


def _load() -> float:
    """The 1-minute load average: other work on the machine skews the timings (recorded with each figure)."""
    return round(os.getloadavg()[0], 2)


def _build(argv: list[str]) -> float:
    """Wall time of ``python -m tl_aot build ARGV`` (fails loudly)."""
    cmd = [sys.executable, "-m", "tl_aot", "build", *argv, "-q"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return dt


def _warmup_argv(spec: Path, out: Path) -> list[str]:
    """The CLI form of the spec's first entry (one variant), to warm the file cache."""
    from tl_aot.spec import load_spec_file

    e = load_spec_file(spec).entries[0]
    argv = [f"{e.source}:{e.function}", "--name", e.name, "--arch", str(e.archs[0]), "-o", str(out), "--cache-dir", str(out / "cache")]
    for k, v in e.args:
        argv += ["--arg", f"{k}={v!r}"]
    return argv


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default=str(HERE / "bench.toml"), help="spec file to build (default: bench/bench.toml)")
    ap.add_argument("-j", "--jobs", type=int, default=len(os.sched_getaffinity(0)), help="parallel jobs (default: the CPU count)")
    ap.add_argument("--out", default=str(ROOT / ".benchlibs" / "build_times.jsonl"), help="JSONL output")
    ap.add_argument("--noop-repeats", type=int, default=3)
    a = ap.parse_args(argv)
    spec = Path(a.spec).resolve()
    rec = Recorder(a.out)
    from tl_aot.spec import load_spec_file

    lib = load_spec_file(spec)
    variants = sum(len(e.archs) for e in lib.entries)
    common = {"spec": os.path.relpath(spec, ROOT), "variants": variants, "measured_on": "build machine"}
    env = environment(gpu=False)
    rec.emit(
        "build",
        "environment",
        **common,
        load_before=_load(),
        cpu=env["cpu"],
        cpus=env["cpus"],
        tilelang=env["tilelang"],
        nvcc=env["nvcc"],
        tl_aot=env.get("tl_aot", ""),
    )
    if _load() > 0.5:
        print(f"warning: load average {_load()} before timing: other work on this machine will skew the build figures", file=sys.stderr)
    tmp = Path(tempfile.mkdtemp(prefix="tl_aot-build-times-"))
    try:
        _build(_warmup_argv(spec, tmp / "warm"))
        times = {}
        for name, jobs in (("serial", 1), ("parallel", a.jobs)):
            out = tmp / name
            times[name] = _build(["--spec", str(spec), "-o", str(out), "--cache-dir", str(out / "cache"), "-j", str(jobs), "--force"])
            rec.emit("build", name, s=round(times[name], 2), jobs=jobs, load_after=_load(), **common)
        par = tmp / "parallel"
        noop = [
            _build(["--spec", str(spec), "-o", str(par), "--cache-dir", str(par / "cache"), "-j", str(a.jobs)])
            for _ in range(a.noop_repeats)
        ]
        rec.emit(
            "build", "noop_rebuild", s=round(statistics.median(noop), 3), runs=[round(x, 3) for x in noop], load_after=_load(), **common
        )
        rec.emit("build", "parallel_vs_serial", ratio=round(times["parallel"] / times["serial"], 3), jobs=a.jobs, **common)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        rec.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
