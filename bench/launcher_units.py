"""The launcher stage at scale: one translation unit vs the units of :mod:`tl_aot.codegen.launcher_units`, on the CPU machine.

For each ``--entries`` N, a library of N synthesised entries (``bench/load_scale.py``'s: the golden
manifest's entries cycled, one variant per arch of ``--archs``) has its launcher rendered and
compiled from an empty object cache three ways, each in the same run:

- ``one``: the whole launcher as one unit (what every build did before), one compile;
- ``units``: the units a build makes now, compiled on ``-j`` threads and joined (``c++ -r``), as
  :meth:`~tl_aot.pipeline.stages.Stages.launcher_of` does;
- ``forced`` (small libraries only): the same library cut into its smallest units (one export
  each), to show what cutting a library that stays one unit would cost.

Each row: units, render seconds (Python, the driver), compile CPU-s (children's ``getrusage``),
wall seconds, and the ratio of ``units`` to ``one``. Also the CPU-s per unit's headers (a 1-entry
unit), from which :data:`~tl_aot.codegen.launcher_units.UNIT_WEIGHT` was chosen.

``python bench/launcher_units.py --entries 3,200,1000 --archs sm_80,sm_89,sm_90a,sm_100a -j 16 [--json OUT]``
"""

from __future__ import annotations

import argparse
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


def measure(manifest, target: int, jobs: int) -> dict:
    """Render ``manifest``'s launcher cut at ``target`` (0: one unit) and compile it into a fresh cache; seconds and units."""
    from tl_aot.codegen.render import render_header, render_launcher_units
    from tl_aot.cuda.host_objects import combined_object, generated_object
    from tl_aot.pipeline.job_slots import in_threads

    name = manifest.library
    t0 = time.perf_counter()
    header = render_header(manifest)
    texts = render_launcher_units(manifest, header_name=f"{name}.h", target=target)
    render_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as cache:
        c0, t1 = _children_cpu(), time.perf_counter()
        files = [f"{name}.unit{k}.cc" for k in range(len(texts))]

        def job(file: str, text: str):
            return lambda: generated_object(
                Path(cache), {file: text, f"{name}.h": header}, file, file[:-2] + "o", extra_key="bench", what=file
            )

        made = in_threads(jobs)([job(f, t) for f, t in zip(files, texts)])
        if len(made) > 1:
            combined_object(Path(cache), [o for o, _ in made], f"{name}.launcher.o", extra_key="bench", what="join")
        wall = time.perf_counter() - t1
        cpu = _children_cpu() - c0
    return {"units": len(texts), "render_s": round(render_s, 3), "compile_cpu_s": round(cpu, 2), "wall_s": round(wall, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", default="3,200,1000")
    ap.add_argument("--archs", default="sm_80,sm_89,sm_90a,sm_100a")
    ap.add_argument("-j", "--jobs", type=int, default=16)
    ap.add_argument("--json", help="append one JSON line per row to this file")
    args = ap.parse_args()
    from load_scale import synthesised

    from tl_aot.codegen.launcher_units import UNIT_WEIGHT

    archs = args.archs.split(",")
    rows = []
    for n in (int(x) for x in args.entries.split(",")):
        m = synthesised(n, archs, 1, 0, 0)
        one = measure(m, 0, args.jobs)
        units = measure(m, UNIT_WEIGHT, args.jobs)
        row = {"entries": n, "archs": len(archs), "jobs": args.jobs, "one": one, "units": units}
        row["cpu_ratio"] = round(units["compile_cpu_s"] / one["compile_cpu_s"], 2)
        row["wall_ratio"] = round(units["wall_s"] / one["wall_s"], 2)
        if units["units"] == 1:
            row["forced"] = measure(m, 1, args.jobs)
            row["forced_cpu_ratio"] = round(row["forced"]["compile_cpu_s"] / one["compile_cpu_s"], 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "a") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    main()
