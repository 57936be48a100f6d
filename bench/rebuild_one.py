"""A one-changed-kernel rebuild of a big library, per stage, against the first build and a no-op rebuild, on the CPU machine.

A library of ``--entries`` N entries, each its own kernel file (``kernels/k0000.py``: TileLang's
``add_one``, one per entry, so editing one file changes one entry's keys and nothing else), built
for ``--archs``. Lowering N x archs variants here would take hours, so the variant cache is seeded:
one entry is built for real (lowered by TileLang, compiled by nvcc), and its variant and image are
stored under every other task's key with the entry's name (what a build would have cached, bytes
apart from the name). Then, through :func:`tl_aot.build.build_library` as every front end calls it:

1. ``first``: the first build of the library (every variant a cache hit; the launcher and the link
   cold): the anchor;
2. ``noop``: the same build again (nothing changed: the stamp answers);
3. ``one``: one kernel file edited (its block size, so its launch and launcher unit change): that
   entry lowered and compiled for real for every arch, the rest from the cache;
4. ``again``: the edit undone (its old variants still cached: every variant a hit, one unit changes).

Each row: wall seconds, what re-ran (variants lowered/compiled, launcher units compiled of all)
and seconds per stage: ``plan`` (specs read, keys, cache lookups), ``variants`` (lower + nvcc,
wall), ``launcher`` (render + units), ``link`` (images, manifest, final link, publish) — the
stage times from the build's own progress lines and a profile of the driver. ``--profile``
writes a cProfile of the ``one`` rebuild.

With ``--packs`` the library keeps its images in per-arch packs (``--image-packs``, compressed), as
TileOPs' whole library is built, and every seeded image is distinct and of a realistic size
(``--kb``, 8-72 KiB: entry 0's cubin with a section of bytes compressible about 5x added), so the
packs hold what a whole library's do (the first build compresses each image once, ~7 ms each).

``python bench/rebuild_one.py --entries 2000 --archs sm_80,sm_89,sm_90a,sm_100a -j 2 [--packs] [--json OUT]``
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import json
import os
import random
import re
import resource
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KERNEL = '''"""Entry {i}: Y = X + 1 (the bench's kernel, one file per entry)."""

import tilelang.language as T


def add_one(N=1024, dtype="float32", block={block}):
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] + T.cast(1, dtype)

    return main
'''


def write_kernel(folder: Path, i: int, block: int = 256) -> Path:
    """``kernels/k<i>.py``, its block size ``block``."""
    path = folder / f"k{i:04d}.py"
    path.write_text(KERNEL.format(i=i, block=block))
    return path


def library(folder: Path, n: int, archs: list[str]):
    """The bench's :class:`~tl_aot.config.kernel_spec.LibrarySpec`: ``n`` entries, one kernel file each."""
    from tl_aot.config.kernel_spec import KernelSpec, LibrarySpec

    entries = [
        KernelSpec.create(name=f"k{i:04d}", source=folder / f"k{i:04d}.py", function="add_one", args={"N": 1024}, archs=archs)
        for i in range(n)
    ]
    return LibrarySpec(name="rebuild_one", entries=tuple(entries))  # type: ignore[arg-type]


def padded_cubin(cubin: bytes, payload: bytes) -> bytes:
    """``cubin`` with one more section holding ``payload`` (an image of another size and content, still a cubin of its kernels)."""
    shoff = struct.unpack_from("<Q", cubin, 40)[0]
    shentsize, shnum = struct.unpack_from("<HH", cubin, 58)
    table = cubin[shoff : shoff + shentsize * shnum]
    at = (len(cubin) + 7) & ~7
    body = cubin + bytes(at - len(cubin)) + payload
    new_shoff = (len(body) + 7) & ~7
    body += bytes(new_shoff - len(body)) + table + struct.pack("<IIQQQQIIQQ", 0, 1, 0, 0, at, len(payload), 0, 0, 1, 0)
    head = bytearray(body[:64])
    struct.pack_into("<Q", head, 40, new_shoff)
    struct.pack_into("<H", head, 60, shnum + 1)
    return bytes(head) + body[64:]


def realistic_image(image: bytes, rng: random.Random, kb: tuple[float, float]) -> bytes:
    """``image`` (entry 0's cubin) padded to ``kb`` KiB (drawn uniformly) of bytes compressible about 5x, as TileOPs' cubins are."""
    words = [rng.randbytes(8) for _ in range(48)]
    size = int(rng.uniform(*kb) * 1024)
    payload = b"".join(rng.choice(words) if rng.random() < 0.93 else rng.randbytes(8) for _ in range(size // 8))
    return padded_cubin(image, payload)


def seed(lib, cache: Path, out: Path, kb: tuple[float, float] | None = None) -> float:
    """Build entry 0 for real, store its variant under every other task's key (renamed): seconds taken.

    ``kb``: every other task's image made distinct and of that size (:func:`realistic_image`), as
    a library's images are when packs store each distinct one once; else entry 0's image itself.
    """
    from tl_aot.config.kernel_spec import LibrarySpec
    from tl_aot.pipeline.cache import VariantCache
    from tl_aot.pipeline.plan import plan_build

    t0 = time.perf_counter()
    from tl_aot.build import build_library

    build_library(LibrarySpec(name="seed", entries=lib.entries[:1]), out_dir=out / "seed", cache_dir=cache, log=None)
    store = VariantCache(cache)
    plan = plan_build(lib, store)
    first = {str(t.arch): plan.hits[t.key] for t in plan.tasks if t.spec.name == lib.entries[0].name}
    rng = random.Random(0)
    for t in plan.tasks:
        if t.key not in plan.hits:
            variant, image = first[str(t.arch)]
            if kb:
                image = realistic_image(image, rng, kb)
            store.store(t.key, dataclasses.replace(variant, entry=t.spec.name), image, t.project)
    return time.perf_counter() - t0


class Lines:
    """The build's progress lines, timed: which stages ran and when."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.lines: list[tuple[float, str]] = []

    def __call__(self, line: str) -> None:
        self.lines.append((time.perf_counter() - self.t0, line))

    def first(self, pattern: str) -> float | None:
        return next((t for t, ln in self.lines if re.search(pattern, ln)), None)

    def find(self, pattern: str) -> str:
        return next((ln for _, ln in self.lines if re.search(pattern, ln)), "")


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed_build(lib, out: Path, cache: Path, jobs: int, profile: Path | None = None, packs: bool = False) -> dict:
    """One build of ``lib``: wall, CPU, what re-ran and the seconds of each stage."""
    from tl_aot.build import build_library
    from tl_aot.pipeline import plan as plan_module
    from tl_aot.pipeline import run as run_module
    from tl_aot.pipeline.image_packs import ImagePacks

    marks: dict[str, float] = {}
    lines = Lines()
    real_plan, real_variants = plan_module.plan_build, run_module.run_variants
    from tl_aot.pipeline import library as library_module

    def plan_build(*a, **k):
        t = time.perf_counter()
        try:
            return real_plan(*a, **k)
        finally:
            marks["plan"] = time.perf_counter() - t

    def run_variants(*a, **k):
        t = time.perf_counter()
        try:
            return real_variants(*a, **k)
        finally:
            marks["variants+launcher"] = time.perf_counter() - t

    library_module.plan_build, run_module.run_variants = plan_build, run_variants
    prof = cProfile.Profile() if profile else None
    c0, t0 = _cpu(), time.perf_counter()
    try:
        if prof:
            prof.enable()
        image_packs = ImagePacks() if packs else None
        result = build_library(lib, out_dir=out, cache_dir=cache, jobs=jobs, log=lines, image_packs=image_packs)
    finally:
        if prof:
            prof.disable()
            prof.dump_stats(profile)
        library_module.plan_build, run_module.run_variants = real_plan, real_variants
    wall = time.perf_counter() - t0
    launcher = lines.find(r"^\[.*\] launcher ")
    units = re.search(r"(\d+) units, (\d+) compiled", launcher)
    job = lines.find(r"^job time:")
    row = {
        "wall_s": round(wall, 2),
        "cpu_s": round(_cpu() - c0, 2),
        "up_to_date": result.up_to_date,
        "variants_rebuilt": len(result.rebuilt),
        "variants": len(lib.entries) * len(lib.entries[0].archs),
        "launcher_units": int(units[1]) if units else (1 if launcher else 0),
        "units_compiled": int(units[2]) if units else (0 if "unchanged" in launcher or not launcher else 1),
        "plan_s": round(marks.get("plan", 0.0), 2),
        "variants_and_launcher_s": round(marks.get("variants+launcher", 0.0), 2),
    }
    if job:
        row["job_s"] = {k: float(v) for k, v in re.findall(r"(lowering|nvcc|host compile|link) ([\d.]+) s", job)}
    row["rest_s"] = round(wall - row["plan_s"] - row["variants_and_launcher_s"], 2)  # the link, publish, stamp
    if packs:
        row["library_mib"] = round((out / "librebuild_one.so").stat().st_size / 2**20, 1)
        row["packs_mib"] = round(sum(p.stat().st_size for p in out.glob("*.tlpack")) / 2**20, 1)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=500)
    ap.add_argument("--archs", default="sm_80,sm_89,sm_90a,sm_100a")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--changed", type=int, default=7, help="the entry whose kernel file is edited")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    ap.add_argument("--profile", type=Path, help="write a cProfile of the one-changed rebuild here")
    ap.add_argument("--packs", action="store_true", help="build with image packs (--image-packs), images of --kb KiB")
    ap.add_argument("--kb", default="8-72", help="with --packs: each image's size in KiB, LO-HI (uniform; TileOPs': 40 on average)")
    ap.add_argument("--json", type=Path, help="append the rows here (JSONL)")
    args = ap.parse_args(argv)
    if not 0 <= args.changed < args.entries:
        ap.error(f"--changed {args.changed} names no entry of {args.entries} (0 to {args.entries - 1})")
    lo, _, hi = args.kb.partition("-")
    kb = (float(lo), float(hi or lo)) if args.packs else None
    archs = args.archs.split(",")
    base = args.keep or Path(tempfile.mkdtemp(prefix="rebuild one "))  # a space in every path, as users' folders have
    if args.keep:
        shutil.rmtree(base, ignore_errors=True)
    kernels, cache, out = base / "kernels", base / "cache", base / "out"
    kernels.mkdir(parents=True)
    for i in range(args.entries):
        write_kernel(kernels, i)
    lib = library(kernels, args.entries, archs)
    rows = []

    def report(step: str, row: dict) -> None:
        row = {
            "bench": "rebuild_one",
            "step": step,
            "entries": args.entries,
            "archs": len(archs),
            "jobs": args.jobs,
            "packs": args.packs,
            **row,
        }
        if rows:
            row["vs_first"] = round(row["wall_s"] / rows[0]["wall_s"], 3)
        row["load_avg"] = round(os.getloadavg()[0], 2)
        rows.append(row)
        print(json.dumps(row), flush=True)

    seconds = seed(lib, cache, base, kb)
    print(json.dumps({"bench": "rebuild_one", "step": "seed", "seconds": round(seconds, 1)}), flush=True)
    try:
        report("first", timed_build(lib, out, cache, args.jobs, packs=args.packs))
        report("noop", timed_build(lib, out, cache, args.jobs, packs=args.packs))
        write_kernel(kernels, args.changed, block=128)
        report("one", timed_build(lib, out, cache, args.jobs, args.profile, packs=args.packs))
        write_kernel(kernels, args.changed, block=256)
        report("again", timed_build(lib, out, cache, args.jobs, packs=args.packs))
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    if args.json:
        with args.json.open("a") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
