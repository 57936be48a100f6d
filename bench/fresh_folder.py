"""Build of a one-entry library into a fresh output folder with a warm cache (issue 33's ≤ 3 s goal).

    python bench/fresh_folder.py [--entry tests/kernels/elementwise.py:add_one] [--arch 90a] [-n 5]

What a CMake build tree, an isolated ``pip wheel`` or a CI job pays for a library whose variants
are already in the (shared) variant cache: each run is a fresh ``python -m tl_aot build`` process
into a new output folder, against a cache warmed once by an untimed build into another folder.
Prints one JSON line per run and the medians (the figures to quote) of wall and CPU seconds, with
the load average: the 2-core build machine is shared, and other work skews the wall figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["main"]


def _build(entry: str, arch: str, out: Path, cache: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, the build and every tool it ran) of one ``python -m tl_aot build``; fails loudly.

    The CPU figure barely moves when other work shares the machine; the wall figure does.
    """
    cmd = [sys.executable, "-m", "tl_aot", "build", entry, "--arch", arch, "-o", str(out), "--cache-dir", str(cache), "-q"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    dt = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return dt, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entry", default=str(ROOT / "tests" / "kernels" / "elementwise.py") + ":add_one", help="FILE:FUNCTION to build")
    ap.add_argument("--arch", default="90a")
    ap.add_argument("-n", "--runs", type=int, default=5, help="timed fresh-folder builds (default 5)")
    a = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="tl_aot-fresh-folder-"))
    try:
        cache = tmp / "cache"
        warm, warm_cpu = _build(a.entry, a.arch, tmp / "warm", cache)
        print(json.dumps({"name": "warm_cache_build", "s": round(warm, 3), "cpu_s": round(warm_cpu, 3)}), flush=True)
        runs, cpu = [], []
        for i in range(a.runs):
            wall, used = _build(a.entry, a.arch, tmp / f"fresh{i}", cache)
            runs.append(wall)
            cpu.append(used)
            line = {"name": "fresh_folder_run", "s": round(wall, 3), "cpu_s": round(used, 3), "load": round(os.getloadavg()[0], 2)}
            print(json.dumps(line), flush=True)
        summary = {"name": "fresh_folder_warm_cache", "median_s": round(statistics.median(runs), 3), "min_s": round(min(runs), 3)}
        summary.update(max_s=round(max(runs), 3), median_cpu_s=round(statistics.median(cpu), 3), runs=len(runs))
        print(json.dumps(summary), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
