"""Build figures of the setuptools front end (issue 3) on samples/gemm_package, one JSON line each.

    python bench/build_bench.py [--jobs 2] [--archs "90a;80"] [--keep DIR]

Each figure is a fresh ``python setup.py build_ext`` process on a copy of the sample (the command
``pip wheel`` / ``python -m build`` run underneath), timed from the outside:

* ``full_serial`` (``-j 1``) and ``full_parallel`` (``-j N``): from an empty variant cache and an
  empty build folder (an untimed ``import tilelang`` warms the OS file cache first);
* ``noop_rebuild``: the parallel build again with nothing changed (median of 3), with the seconds
  tl_aot itself reports for its up-to-date check;
* ``wheel``: ``pip wheel --no-build-isolation`` of the built tree: wheel and library size;
  ``entry``: per entry, its images' bytes as built and deflated (what each adds to the wheel).

Reads ``TL_AOT_ARCHS`` only through ``--archs`` (default: the sample's own archs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "gemm_package"


def _emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def _run(cmd: list[str], cwd: Path, env: dict) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return seconds, proc.stdout + proc.stderr


def _fresh_copy(work: Path, name: str) -> Path:
    dest = work / name
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "*.so", "_kernels.py"))
    return dest


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=2, help="parallel nvcc jobs of the parallel build (default 2)")
    p.add_argument("--archs", help="override the sample's archs (TL_AOT_ARCHS), e.g. '80'")
    p.add_argument("--keep", help="build in this folder and keep it (default: a temporary folder)")
    args = p.parse_args()

    work = Path(args.keep or tempfile.mkdtemp(prefix="tl_aot_build_bench."))
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("TL_AOT_ARCHS", "MAX_JOBS", "TL_AOT_CACHE_DIR")}
    env["PYTHONUNBUFFERED"] = "1"
    if args.archs:
        env["TL_AOT_ARCHS"] = args.archs
    _emit(
        {
            "name": "environment",
            "python": platform.python_version(),
            "cpus": len(os.sched_getaffinity(0)),
            "archs": args.archs or "setup.py",
            "sample": str(SAMPLE.relative_to(ROOT)),
        }
    )
    subprocess.run([sys.executable, "-c", "import tilelang"], check=True, env=env, capture_output=True)  # warm file cache

    results = {}
    for name, jobs in (("full_serial", 1), ("full_parallel", args.jobs)):
        src = _fresh_copy(work, name)
        run_env = {**env, "TL_AOT_CACHE_DIR": str(work / f"{name}.cache")}
        seconds, out = _run([sys.executable, "setup.py", "build_ext", "-j", str(jobs)], src, run_env)
        variants = len(re.findall(r"\] nvcc ", out))
        results[name] = (src, run_env)
        _emit({"name": name, "jobs": jobs, "seconds": round(seconds, 2), "variants": variants})

    src, run_env = results["full_parallel"]
    walls, inner = [], []
    for _ in range(3):
        seconds, out = _run([sys.executable, "setup.py", "build_ext", "-j", str(args.jobs)], src, run_env)
        m = re.search(r"is up to date \(([\d.]+) s\)", out)
        if m is None or re.search(r"\] (lower|nvcc) ", out):
            sys.exit(f"the no-op rebuild rebuilt something:\n{out}")
        walls.append(seconds)
        inner.append(float(m.group(1)))
    _emit({"name": "noop_rebuild", "seconds": round(statistics.median(walls), 3), "tl_aot_check_seconds": statistics.median(inner)})

    cmd = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w", "dist", "."]
    seconds, _ = _run(cmd, src, run_env)
    (wheel,) = (src / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        lib_info = z.getinfo("tl_gemm/lib_kernels.so")
    library = next((src / "build").glob("lib.*/tl_gemm/lib_kernels.so"))
    import tl_aot
    from tl_aot.common.cpp_spelling import image_symbol

    entries = tl_aot.load(library).manifest.entries
    # The images as embedded, kept by the build in its work folder (named like the embedded symbols).
    images = {p.stem: p for p in (src / "build").glob("temp.*/tl_aot/tl_gemm._kernels/.tl_aot/_kernels/*.bin")}
    image_total = 0
    for e in entries:
        raw = sum(v.image_bytes for v in e.variants)
        image_total += raw
        record = {"name": "entry", "entry": e.name, "archs": [v.arch.sm for v in e.variants], "image_bytes": raw}
        paths = [images.get(image_symbol(e.name, v.arch)) for v in e.variants]
        if all(paths):
            record["deflated_bytes"] = sum(len(zlib.compress(p.read_bytes(), 6)) for p in paths)
        _emit(record)
    _emit(
        {
            "name": "wheel",
            "file": wheel.name,
            "wheel_seconds_cached": round(seconds, 2),
            "wheel_bytes": wheel.stat().st_size,
            "library_bytes": lib_info.file_size,
            "library_deflated_bytes": lib_info.compress_size,
            "launcher_and_metadata_bytes": lib_info.file_size - image_total,
            "entries": len(entries),
            "wheel_bytes_per_entry": round(wheel.stat().st_size / len(entries)),
        }
    )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
