"""Build wall time past one machine (issue 34): a 100+ variant library on one machine vs a cluster of two machines' worth of workers.

    python bench/cluster_wall.py [--spec bench/scaling.toml] [--workers 2] [--threads 8] [--local-jobs 8,16] [--out wall.jsonl]
    python bench/cluster_wall.py --capture RECORD --arch 90a [--arch 80 ...] [--keep-going] ...   # a capture record's kernels

Where no second machine exists the cluster is simulated on this one: a ``dask scheduler`` and
``--workers`` ``dask worker`` processes of ``--threads`` threads each on 127.0.0.1 (Dask's own
commands; two workers of 8 threads = two 8-core machines on the GPU machine's 16 cores), driven by
``python -m tl_aot build --cluster``. Against it: ``python -m tl_aot build -j N`` for each of
``--local-jobs`` (``-j 8``: one of those machines alone; ``-j 16``: all 16 cores in one process).
Every build starts from an empty variant cache (the launcher runtime's object is shared), and the
libraries are compared byte for byte. The cluster builds twice from an empty cache: with workers
just started (each lowering process imports TileLang), then again (long-lived workers, as a CI
cluster's are). ``--capture`` builds a capture record (``python -m tl_aot capture``) for ``--arch``
instead of a spec file: the same record on the cluster and locally must give the same library.
Each row also gives the variants built and the CPU-s per variant (lowering + nvcc + host job-s).
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
# The launcher runtime's object, under the key a build looks it up by (one per toolchain, not per build).
WARM_RUNTIME = """
import sys
from pathlib import Path
from tl_aot.common.versions import package_version
from tl_aot.pipeline.stages import objects_key
from tl_aot.cuda.host_objects import runtime_object
from tl_aot.cuda.toolchain import nvcc_version
runtime_object(Path(sys.argv[1]), extra_key=objects_key(nvcc_version(), package_version("apache-tvm-ffi")))
"""
_JOB_TIME = re.compile(r"job time: lowering ([\d.]+) s \((.*?)\), nvcc ([\d.]+) s, host compile ([\d.]+) s, link ([\d.]+) s")


def _build(source: list, out: Path, cache: Path, runtime: Path, extra: list) -> tuple[dict, Path]:
    """One build of ``source`` (``--spec FILE`` or ``--capture RECORD --arch ...``) from an empty variant cache."""
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    shutil.copytree(runtime, cache)
    cmd = [sys.executable, "-m", "tl_aot", "build", *source, "-o", str(out), "--cache-dir", str(cache), *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    lib = next(out.glob("lib*.so"))
    manifest = _inspect(lib)
    rec: dict = {"wall_s": round(wall, 2), "variants": sum(len(e.get("variants", [])) for e in manifest.get("entries", []))}
    rec["left_out"] = len(manifest.get("left_out", []))
    m = _JOB_TIME.search(proc.stdout)
    if m:
        rec.update(lowering_s=float(m[1]), nvcc_s=float(m[3]), host_s=float(m[4]), link_s=float(m[5]))
        rec["cpu_s_per_variant"] = round((rec["lowering_s"] + rec["nvcc_s"] + rec["host_s"]) / max(1, rec["variants"]), 2)
    return rec, lib


def _inspect(lib: Path) -> dict:
    cmd = [sys.executable, "-m", "tl_aot", "inspect", "--json", str(lib)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout)


def _differences(a: Path, b: Path, limit: int = 8) -> list:
    """Where two libraries that should be identical differ: manifest fields first, else the first differing byte."""
    ma, mb = _inspect(a), _inspect(b)
    found = [f"manifest {k}" for k in sorted(set(ma) | set(mb)) if k != "entries" and ma.get(k) != mb.get(k)]
    for ea, eb in zip(ma.get("entries", []), mb.get("entries", [])):
        for va, vb in zip(ea.get("variants", []), eb.get("variants", [])):
            keys = [k for k in sorted(set(va) | set(vb)) if va.get(k) != vb.get(k)]
            if keys:
                found.append(f"{ea.get('name')} {va.get('arch')}: {', '.join(keys)}")
        keys = [k for k in sorted(set(ea) | set(eb)) if k != "variants" and ea.get(k) != eb.get(k)]
        if keys:
            found.append(f"{ea.get('name')}: {', '.join(keys)}")
    if not found:
        ba, bb = a.read_bytes(), b.read_bytes()
        first = next((i for i, (x, y) in enumerate(zip(ba, bb)) if x != y), min(len(ba), len(bb)))
        found.append(f"manifests equal; sizes {len(ba)} vs {len(bb)}, first differing byte at {first}")
    return found[:limit]


def _cluster(root: Path, workers: int, threads: int) -> tuple[list, str]:
    dask = [sys.executable, "-m", "dask"]  # Dask's own commands; works where its scripts are not on PATH (pip --target)
    root.mkdir(parents=True, exist_ok=True)
    sched = root / "scheduler.json"
    procs = [
        subprocess.Popen(
            [*dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(sched)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    deadline = time.monotonic() + 60
    while not sched.is_file():
        if time.monotonic() > deadline or procs[0].poll() is not None:
            raise RuntimeError("dask scheduler did not start (is tl_aot[cluster] installed?)")
        time.sleep(0.2)
    address = json.loads(sched.read_text())["address"]
    for i in range(workers):
        args = [*dask, "worker", address, "--name", f"w{i + 1}", "--nthreads", str(threads), "--no-dashboard", "--host", "127.0.0.1"]
        env = dict(os.environ, TL_AOT_WORKER_DIR=str(root / f"w{i + 1}"))
        procs.append(
            subprocess.Popen(
                [*args, "--local-directory", str(root / f"w{i + 1}-dask")], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        )
    from distributed import Client

    with Client(address, set_as_default=False) as c:
        c.wait_for_workers(workers, timeout=120)
    return procs, address


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default=str(HERE / "scaling.toml"))
    ap.add_argument("--capture", help="a capture record to build instead of --spec")
    ap.add_argument("--arch", action="append", default=[], help="with --capture: an arch to build (repeatable)")
    ap.add_argument("--keep-going", action="store_true", help="leave out variants that fail (each build the same way)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--local-jobs", default="8,16")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tl_aot_wall_"))
    if args.capture and not args.arch:
        ap.error("--capture needs at least one --arch")
    spec = Path(args.capture or args.spec).resolve()
    source = ["--capture", str(spec), *(f"--arch={a}" for a in args.arch)] if args.capture else ["--spec", str(spec)]
    source += ["--keep-going"] if args.keep_going else []
    out = open(args.out, "a") if args.out else None  # noqa: SIM115

    def emit(rec: dict) -> None:
        line = json.dumps({"bench": "cluster_wall", "spec": spec.name, "archs": args.arch, "load": round(os.getloadavg()[0], 2), **rec})
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    runtime = work / "runtime"
    subprocess.run([sys.executable, "-c", WARM_RUNTIME, str(runtime)], check=True)
    procs, address = _cluster(work / "cluster", args.workers, args.threads)
    try:
        for run in ("cold", "warm"):  # cold: workers just started (each lowering process imports TileLang); warm: again
            rec, cluster_lib = _build(source, work / "out-cluster", work / "cache-cluster", runtime, ["--cluster", address])
            emit({"what": f"cluster ({run} workers)", "workers": args.workers, "threads": args.threads, **rec})
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    for jobs in (int(j) for j in args.local_jobs.split(",") if j):
        rec, lib = _build(source, work / f"out-j{jobs}", work / f"cache-j{jobs}", runtime, ["-j", str(jobs)])
        same = lib.read_bytes() == cluster_lib.read_bytes()
        diff = {} if same else {"differences": _differences(lib, cluster_lib)}
        emit({"what": "local", "jobs": jobs, **rec, "identical_to_cluster": same, **diff})
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
