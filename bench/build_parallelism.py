"""Build parallelism (issue 39): how much of a captured library's build is serial, and what that makes of 2,000 kernels × 4 archs.

    python bench/build_parallelism.py [--kernels 50,200] [--archs 80,89,90a,100a] [-j N]
        [--baseline-ref main | --baseline PATH] [--baseline-max 200] [--out parallelism.jsonl]

For each size N: ``python -m tl_aot capture --device H100-SXM`` records N distinct kernels of
``bench/parallelism_workload.py`` (elementwise, RMS norm and GEMM in TileOPs' shapes, from the
tests' kernels), then ``build --capture`` builds them for every arch from an empty variant cache,
with this checkout and (where N <= ``--baseline-max``) with the baseline checkout (``--baseline-ref``:
a ``git worktree`` of that commit, removed afterwards; or ``--baseline``: a checkout's folder), in
the same run, on the same record. Each build runs in ``bench/build_probe.py`` (the driver is that
process): wall time, the driver's CPU seconds (every thread of the process that runs
``build_library``: planning, scheduling, the PTX split, cache writes, rendering) and the
children's (lowering workers, nvcc, cicc, ptxas, the host compiler, the linker), the build's own
job time per stage, and the cores it kept busy (sampled from ``/proc``).

**The model.** The driver is one process (one GIL): its work per variant ``D`` (CPU-s per
kernel-arch) is the serial part; the children's ``C`` spreads over the cores. By Amdahl, ``n``
variants on ``P`` cores take ``T = n·D + n·C/P`` (no overlap of the driver with the children:
an upper bound; ``max(n·D, n·(D+C)/P)`` is the bound with full overlap). The projection is for
n = 2,000 × 4 on 16 cores, with the measured C and with TileOPs' C (2.4 CPU-s per kernel-arch,
measured on the GPU machine: ``--tileops-cpu``). D measured at two sizes shows whether the
driver's work per variant grows with the library (a quadratic driver: ``d_growth`` > 1.3); the
``driver_growth`` line projects with D fitted linearly in N and read at 2,000 kernels.
Ratios are this checkout's figures over the baseline's of the same size, measured in this run.

Run it on a quiet machine (each line records the load average); on the 16-core GPU machine:
``python bench/build_parallelism.py --kernels 200,1000 -j 16 --baseline-ref main --out $OUT/parallelism.jsonl``.
Needs TileLang and an nvcc that targets every ``--archs``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from bench.common import ROOT, Recorder

HERE = Path(__file__).resolve().parent
TARGET = (2000, 4, 16)  # kernels, archs, cores: the goal of issue 39 (<= 30 min wall)
TILEOPS_CPU = 2.4  # children's CPU-s per kernel-arch of TileOPs' share (issue 39, GPU machine)
_JOB_TIME = re.compile(r"job time: lowering ([\d.]+) s \((.*?)\), nvcc ([\d.]+) s, host compile ([\d.]+) s, link ([\d.]+) s")


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _env(checkout: Path) -> dict[str, str]:
    """The environment that makes ``checkout``'s tl_aot the one imported."""
    return {**os.environ, "PYTHONPATH": str(checkout), "PYTHONUNBUFFERED": "1"}


def capture(n: int, procs: int, work: Path) -> Path:
    """A record of ``n`` kernels, captured without a GPU by ``procs`` processes (this checkout's tl_aot)."""
    record = work / f"record-{n}.json"
    cmd = [sys.executable, "-m", "tl_aot", "capture", "-o", str(record), "--device", "H100-SXM", "--"]
    cmd += [sys.executable, str(HERE / "parallelism_workload.py"), str(n), str(procs)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work, env=_env(ROOT), check=False)
    if proc.returncode != 0:
        msg = f"capture of {n} kernels failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        raise RuntimeError(msg)
    return record


def build(checkout: Path, record: Path, archs: list[str], jobs: int, work: Path, label: str) -> dict:
    """One build of ``record`` by ``checkout``'s tl_aot from an empty variant cache (the runtime object warm): its figures."""
    out, cache = work / f"out-{label}", work / f"cache-{label}"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    runtime = work / f"runtime-{checkout.name}-{hashlib.sha256(str(checkout).encode()).hexdigest()[:8]}"
    cache.mkdir(parents=True)
    if runtime.is_dir():  # compiled once per toolchain in any build: shared, so every build pays the same
        shutil.copytree(runtime, cache / ".objects", dirs_exist_ok=True)
    probe = work / f"probe-{label}.json"
    argv = ["--capture", str(record), *(x for a in archs for x in ("--arch", a)), "--name", "parallelism"]
    argv += ["-o", str(out), "--cache-dir", str(cache), "-j", str(jobs)]
    load = _load()
    cmd = [sys.executable, str(HERE / "build_probe.py"), str(probe), "--every", "1", "--", *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work, env=_env(checkout), check=False)
    if proc.returncode != 0 or not probe.is_file():
        msg = f"build {label} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        raise RuntimeError(msg)
    got = json.loads(probe.read_text())
    if not runtime.is_dir():
        for obj in (cache / ".objects").glob("*/launcher_runtime.o"):
            shutil.copytree(obj.parent, runtime / obj.parent.name)
    return figures(got, jobs, load) | {"library_sha256": hashlib.sha256((out / "libparallelism.so").read_bytes()).hexdigest()}


def figures(probe: dict, jobs: int, load: float) -> dict:
    """A probe's result as the bench's figures: CPU split, serial fraction, busy cores, tail, stage job times."""
    variants = len(re.findall(r"\] nvcc ", probe["log"]))
    wall, driver, children = probe["wall_s"], probe["driver_cpu_s"], probe["children_cpu_s"]
    rec = {
        "variants": variants,
        "jobs": jobs,
        "wall_s": wall,
        "driver_cpu_s": driver,
        "children_cpu_s": children,
        "serial_fraction": round(driver / max(1e-9, driver + children), 4),
        "driver_cpu_per_variant_s": round(driver / max(1, variants), 4),
        "children_cpu_per_variant_s": round(children / max(1, variants), 4),
        "busy_cores": round((driver + children) / max(1e-9, wall), 2),
        "tail_s": tail_seconds(probe["samples"], wall, jobs),
        "load_before": load,
    }
    m = _JOB_TIME.search(probe["log"])
    if m:
        rec |= {
            "lowering_job_s": float(m[1]),
            "lowering_in": m[2],
            "nvcc_job_s": float(m[3]),
            "host_job_s": float(m[4]),
            "link_s": float(m[5]),
        }
    return rec


def tail_seconds(samples: list, wall: float, jobs: int) -> float:
    """Seconds at the end of the build during which fewer than half the ``jobs`` cores were busy (its serial tail)."""
    last_busy = 0.0
    for (t0, d0, c0), (t1, d1, c1) in zip(samples, samples[1:]):
        if (d1 + c1 - d0 - c0) / max(1e-9, t1 - t0) >= jobs / 2:
            last_busy = t1
    return round(wall - last_busy, 1) if last_busy else round(wall, 1)


def projection(driver_per_variant: float, children_per_variant: float) -> dict:
    """Wall of :data:`TARGET` by the model: Amdahl (driver serial, no overlap) and with full overlap."""
    kernels, archs, cores = TARGET
    n = kernels * archs
    return {
        "amdahl_s": round(n * driver_per_variant + n * children_per_variant / cores),
        "overlap_s": round(max(n * driver_per_variant, n * (driver_per_variant + children_per_variant) / cores)),
    }


def _baseline(ref: str, work: Path) -> Path:
    path = work / f"baseline-{re.sub(r'[^A-Za-z0-9_.-]', '_', ref)}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), ref], check=True, capture_output=True)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", default="50,200", help="capture sizes, smallest first (default 50,200)")
    ap.add_argument("--archs", default="80,89,90a,100a")
    ap.add_argument("-j", "--jobs", type=int, default=len(os.sched_getaffinity(0)))
    base = ap.add_mutually_exclusive_group()
    base.add_argument("--baseline-ref", help="a commit to compare with, checked out as a git worktree (e.g. main)")
    base.add_argument("--baseline", type=Path, help="a checkout of tl_aot to compare with")
    ap.add_argument("--baseline-max", type=int, default=200, help="build with the baseline only sizes up to this (default 200)")
    ap.add_argument("--tileops-cpu", type=float, default=TILEOPS_CPU, help="children's CPU-s per kernel-arch for the TileOPs projection")
    ap.add_argument("--out", default="parallelism.jsonl")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (records, libraries, probes)")
    a = ap.parse_args(argv)
    sizes = sorted(int(x) for x in a.kernels.split(",") if x)
    archs = [x for x in a.archs.split(",") if x]
    rec = Recorder(a.out)
    work = Path(tempfile.mkdtemp(prefix="tl_aot-parallelism-"))
    baseline = None
    try:
        if a.baseline_ref:
            baseline = _baseline(a.baseline_ref, work)
        elif a.baseline:
            baseline = a.baseline.resolve()
        rec.emit("parallelism", "environment", cpus=os.cpu_count(), jobs=a.jobs, archs=archs, load=_load(), baseline=str(baseline or ""))
        checkouts = [("this", ROOT)] + ([("baseline", baseline)] if baseline else [])
        per_variant: dict[str, list[tuple[int, float, float]]] = {}
        for n in sizes:
            record = capture(n, a.jobs, work)
            rec.emit("parallelism", f"capture_{n}", kernels=n, record_bytes=record.stat().st_size)
            got = {}
            for name, checkout in checkouts:
                if name == "baseline" and n > a.baseline_max:
                    continue
                got[name] = r = build(checkout, record, archs, a.jobs, work, f"{name}-{n}")
                per_variant.setdefault(name, []).append((n, r["driver_cpu_per_variant_s"], r["children_cpu_per_variant_s"]))
                proj = projection(r["driver_cpu_per_variant_s"], r["children_cpu_per_variant_s"])
                tileops = projection(r["driver_cpu_per_variant_s"], a.tileops_cpu)
                rec.emit("parallelism", f"build_{name}_{n}", kernels=n, checkout=str(checkout), **r,
                         projected_s=proj, projected_tileops_s=tileops)  # fmt: skip
            if len(got) == 2:
                this, old = got["this"], got["baseline"]
                rec.emit(
                    "parallelism",
                    f"ratio_{n}",
                    kernels=n,
                    wall=round(this["wall_s"] / old["wall_s"], 3),
                    driver_cpu=round(this["driver_cpu_s"] / old["driver_cpu_s"], 3),
                    children_cpu=round(this["children_cpu_s"] / old["children_cpu_s"], 3),
                    same_library=this["library_sha256"] == old["library_sha256"],
                )
        for name, points in per_variant.items():
            if len(points) >= 2:
                (n0, d0, _), (n1, d1, c1) = points[0], points[-1]
                # D grows with the library where the driver's work per variant does (a record parsed per variant):
                # fitted as D = a + b·N through the two sizes, read at 2,000 kernels (never below the larger size's)
                d_target = max(d1, d0 + (d1 - d0) * (TARGET[0] - n0) / max(1, n1 - n0))
                rec.emit("parallelism", f"driver_growth_{name}", kernels=[n0, n1], d_growth=round(d1 / max(1e-9, d0), 2),
                         driver_cpu_per_variant_at_target_s=round(d_target, 4), projected_s=projection(d_target, c1),
                         projected_tileops_s=projection(d_target, a.tileops_cpu))  # fmt: skip
    finally:
        rec.close()
        if baseline is not None and a.baseline_ref:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(baseline)], check=False, capture_output=True)
        if a.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
