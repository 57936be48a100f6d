"""Build scaling (issue 14): one spec of 104 variants from empty caches at several ``-j``, in one run.

    python bench/scaling.py --out scaling.jsonl [--jobs 16,4] [--serial-jobs 1]

Each build is a fresh ``python -m tl_aot build`` with a new output folder and variant cache (the
launcher runtime's object is built once first and shared, so every build pays the same). Records
wall time, variants per second and the build's own job-time line (lowering / nvcc / host / link);
then the serial cost per variant from a ``-j 1`` build of the 20-variant subset, and (with sccache
on PATH) nvcc time of a second build served by sccache with tl_aot's cache empty. Needs TileLang and
nvcc (run it on the GPU machine with TileLang installed: its 16 cores are the point).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
_JOB_TIME = re.compile(r"job time: lowering ([\d.]+) s \((.*?)\), nvcc ([\d.]+) s, host compile ([\d.]+) s, link ([\d.]+) s")


def build(spec: Path, jobs: int, work: Path, runtime_cache: Path) -> dict:
    """One fresh build of ``spec`` with ``-j jobs``: its figures."""
    out, cache = work / f"out-j{jobs}-{spec.stem}", work / f"cache-j{jobs}-{spec.stem}"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    if runtime_cache.is_dir():  # the runtime object is per toolchain, not per build: share it (not the launchers)
        shutil.copytree(runtime_cache, cache / ".objects")
    cmd = [sys.executable, "-m", "tl_aot", "build", "--spec", str(spec), "-o", str(out), "-j", str(jobs), "--cache-dir", str(cache)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        msg = f"build -j {jobs} of {spec.name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        raise RuntimeError(msg)
    if not runtime_cache.is_dir():
        for obj in (cache / ".objects").glob("*/launcher_runtime.o"):
            shutil.copytree(obj.parent, runtime_cache / obj.parent.name)
    variants = len(re.findall(r"\] nvcc ", proc.stdout))
    rec = {"spec": spec.name, "jobs": jobs, "wall_s": round(wall, 2), "variants": variants, "variants_per_s": round(variants / wall, 3)}
    m = _JOB_TIME.search(proc.stdout)
    if m:
        rec.update(lowering_s=float(m[1]), lowering_in=m[2], nvcc_s=float(m[3]), host_s=float(m[4]), link_s=float(m[5]))
    return rec


def sccache_rebuild(jobs: int, work: Path) -> dict:
    """tests/kernels/specialised.toml twice through sccache, tl_aot's cache emptied in between (a new builder)."""
    env = dict(os.environ, TL_AOT_COMPILER_LAUNCHER="sccache", SCCACHE_DIR=str(work / "sccache"), SCCACHE_SERVER_PORT="4333")
    out = work / "sccache-build"
    spec = ROOT / "tests" / "kernels" / "specialised.toml"
    nvcc = []
    try:
        for _ in range(2):
            shutil.rmtree(out, ignore_errors=True)
            cmd = [sys.executable, "-m", "tl_aot", "build", "--spec", str(spec), "-o", str(out), "-j", str(jobs)]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env, cwd=ROOT)
            nvcc.append(float(_JOB_TIME.search(proc.stdout)[3]))
        stats = subprocess.run(["sccache", "--show-stats"], capture_output=True, text=True, check=True, env=env).stdout
    finally:
        subprocess.run(["sccache", "--stop-server"], capture_output=True, check=False, env=env)
    hits = re.search(r"^Cache hits \(CUBIN\)\s+(\d+)", stats, re.M)
    return {"spec": spec.name, "jobs": jobs, "first_nvcc_s": nvcc[0], "second_nvcc_s": nvcc[1],
            "ratio": round(nvcc[1] / nvcc[0], 3), "cubin_hits": int(hits[1]) if hits else 0}  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="scaling.jsonl")
    ap.add_argument("--jobs", default="16,4", help="-j values for the full spec, in this order (default 16,4)")
    ap.add_argument("--serial-jobs", type=int, default=1, help="-j of the subset build (default 1; 0 skips it)")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tl_aot_scaling-"))
    runtime_cache = work / "runtime"
    lines = []

    def emit(name: str, **fields) -> None:
        rec = {"section": "scaling", "name": name, **fields}
        lines.append(rec)
        print(json.dumps(rec), flush=True)

    emit("environment", cpus=os.cpu_count(), tl_aot_python=sys.executable)
    try:
        # warm the runtime object and TileLang's import (page cache) so the first build is not penalised
        build(HERE / "scaling_subset.toml", 4, work, runtime_cache)
        for j in [int(x) for x in a.jobs.split(",") if x]:
            emit(f"full_j{j}", **build(HERE / "scaling.toml", j, work, runtime_cache))
        if a.serial_jobs:
            r = build(HERE / "scaling_subset.toml", a.serial_jobs, work, runtime_cache)
            emit(f"subset_j{a.serial_jobs}", **r, serial_s_per_variant=round(r["wall_s"] / max(1, r["variants"]), 3))
        if shutil.which("sccache"):
            emit("sccache_rebuild", **sccache_rebuild(max(int(x) for x in a.jobs.split(",") if x), work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        Path(a.out).write_text("".join(json.dumps(r) + "\n" for r in lines))
    full = {r["jobs"]: r for r in lines if r["name"].startswith("full_j")}
    if 16 in full and 4 in full:
        emit("ratio_j16_j4", ratio=round(full[16]["wall_s"] / full[4]["wall_s"], 3))
        Path(a.out).write_text("".join(json.dumps(r) + "\n" for r in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
