"""What finding a launcher fault costs: one entry's generated code made not to compile in a library cut into units of ~66 entries.

A library of ``--entries`` synthesised entries (``bench/load_scale.py``'s, one variant per arch of
``--archs``) has one entry's launch code made invalid (``--bad``: its position), then its launcher
compiled from an empty object cache through :meth:`~tl_aot.pipeline.stages.Stages.launcher_of`
on ``-j`` threads, as a build does: the units compile, the bad entry's unit fails, its entries are
compiled apart (:mod:`tl_aot.pipeline.launcher_faults`) until the entry is named. Then the
launcher of the library without it is compiled, as ``--keep-going`` does next.

One JSON line: units, the failing compile's wall and CPU-s, the search's wall, CPU-s and number
of compiles, and the wall of the launcher without the entry. On the CPU machine (2 cores):

``python bench/launcher_faults.py --entries 132 --archs sm_80,sm_89,sm_90a,sm_100a -j 2``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(entries: int, archs: list[str], bad: int, jobs: int) -> dict:
    """Compile the faulty launcher, find the entry, compile the launcher without it; seconds of each step."""
    from load_scale import synthesised

    from tl_aot.codegen import launcher_context
    from tl_aot.codegen.launcher_units import unit_plans
    from tl_aot.cuda import host_objects
    from tl_aot.pipeline import stages as stages_module
    from tl_aot.pipeline.job_slots import in_threads
    from tl_aot.pipeline.launcher_faults import LauncherCodeError
    from tl_aot.pipeline.progress import Progress
    from tl_aot.pipeline.stages import Stages

    manifest = synthesised(entries, archs, 1, 0, 0)
    name = manifest.entries[bad].name
    real_code, real_apart = launcher_context.entry_code, host_objects.compile_apart
    compiles: list[float] = []  # the compiler CPU-s used when each search compile started

    def entry_code(e, index, label=""):
        code = real_code(e, index, label)
        return dataclasses.replace(code, locals=(*code.locals, "const int64_t broken = injected_fault")) if e.name == name else code

    def counted(files, source, *, what):
        compiles.append(_children_cpu())
        return real_apart(files, source, what=what)

    launcher_context.entry_code, stages_module.compile_apart = entry_code, counted
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            stages = Stages(work, _Cache(work / "cache"), "bench", "bench", Progress(0, None))
            each = in_threads(jobs)
            t0, c0 = time.perf_counter(), _children_cpu()
            try:
                stages.launcher_of(manifest, each)
                msg = "the injected fault compiled"
                raise SystemExit(msg)
            except LauncherCodeError as e:
                found, search_s = e.entries, e.seconds
            failing_s = time.perf_counter() - t0 - search_s
            first_cpu, search_cpu = compiles[0] - c0, _children_cpu() - compiles[0]  # the units all finished before the search
            kept = dataclasses.replace(manifest, entries=tuple(e for e in manifest.entries if e.name != name))
            t1 = time.perf_counter()
            stages.launcher_of(kept, each)
            again_s = time.perf_counter() - t1
    finally:
        launcher_context.entry_code, stages_module.compile_apart = real_code, real_apart
    plans = unit_plans(manifest)
    unit = next(len(p.entries) for p in plans if bad in p.entries)
    return {
        "entries": entries,
        "archs": len(archs),
        "jobs": jobs,
        "units": len(plans) + (len(plans) > 1),
        "bad_unit_entries": unit,
        "found": list(found),
        "first_compile_s": round(failing_s, 2),
        "search_s": round(search_s, 2),
        "search_compiles": len(compiles),
        "first_compile_cpu_s": round(first_cpu, 2),
        "search_cpu_s": round(search_cpu, 2),
        "launcher_without_s": round(again_s, 2),
    }


@dataclasses.dataclass
class _Cache:
    """The object cache's folder, all :meth:`Stages.launcher_of` reads of its cache."""

    root: Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=132)
    ap.add_argument("--archs", default="sm_80,sm_89,sm_90a,sm_100a")
    ap.add_argument("--bad", type=int, default=100, help="the position of the entry whose code is made invalid")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--json", help="append the JSON line to this file")
    args = ap.parse_args()
    row = measure(args.entries, args.archs.split(","), args.bad, args.jobs)
    print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
