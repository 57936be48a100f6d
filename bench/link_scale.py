"""The link stage against the number of images, on the CPU: embedding linear, not quadratic.

A library of N images (random bytes, sizes drawn from ``--kb``, 8-64 KiB: cubins of TileOPs'
kernels; ``--kb 0.2`` is an image pack's reference), one per (entry, arch) over four archs, linked
by :func:`tl_aot.pipeline.link.link`, the stage a build runs: the images written and embedded in one
assembled object, the manifest's object (from the cache, as in a rebuild), the launcher and runtime
objects, the final link. The launcher is a small unit naming every image symbol, as the generated
launcher's image tables do; the runtime is tl_aot's own (compiled once into ``--cache``).

The baseline, measured in the same run over the same images and objects: the previous embedding,
one image at a time (tvm-ffi's ``embed_cubin``: ``ld -r -b binary``, three ``objcopy`` and an
``ld -r`` of the object built so far per image), then the same final link; it runs up to
``--old-max`` images (its cost grows with the square). Every figure is the wall time of one link
(median over ``--repeat``) and the CPU time it took with its tools (``getrusage`` of this process
and its children), reported as ratios: ``speedup`` (previous / now, same N) and ``growth`` (each
N's time over the smallest N's, against ``N / N_min``: linear embedding keeps them close).
Both libraries are checked to hold every image at its symbol.

``python bench/link_scale.py [--counts 10,100,500,1000,2000] [--old-max 500] [--kb 8-64] [--json OUT]``

``--packs``: the whole library with image packs instead, a first build and rebuilds where one
kernel changed, link and publish (``bench/link_packs.py``, whose options follow).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GOLDEN = ROOT / "tests" / "unit" / "golden" / "manifest.json"
ARCHS = ("sm_80", "sm_89", "sm_90a", "sm_100a")


def images_of(n: int, kb: tuple[float, float], seed: int) -> dict[str, bytes]:
    """``n`` images (symbol -> random bytes), ``kb`` KiB each (drawn uniformly), one per (entry, arch)."""
    rng = random.Random(seed)
    return {f"k{i // len(ARCHS):04d}__{ARCHS[i % len(ARCHS)]}": rng.randbytes(int(rng.uniform(*kb) * 1024)) for i in range(n)}


def launcher_object(work: Path, symbols: list[str]) -> Path:
    """A small launcher unit referencing every image symbol (as the generated image tables do), compiled."""
    from tl_aot.cuda.host_compile import compile_host
    from tl_aot.cuda.image_assembly import IMAGE_PREFIX

    decls = "".join(f'extern "C" const char {IMAGE_PREFIX}{s}[];\n' for s in symbols)
    table = ", ".join(f"{IMAGE_PREFIX}{s}" for s in symbols)
    text = f"{decls}const char* const bench_images[] = {{{table}}};\n"
    text += 'extern "C" __attribute__((visibility("default"))) const char* bench_image(int i) { return bench_images[i]; }\n'
    (work / "launcher.cc").write_text(text)
    compile_host(work, "launcher.cc", "launcher.o", what="compiling the bench launcher")
    return work / "launcher.o"


def embed_one_by_one(workdir: Path, images: dict[str, bytes], out: str, *, launcher: Path) -> None:
    """The previous embedding (the baseline): each image merged into the launcher object in turn by ``embed_cubin``."""
    from tvm_ffi.utils.embed_cubin import embed_cubin

    current = launcher
    for i, name in enumerate(sorted(images)):
        path = workdir / f"{name}.bin"
        path.write_bytes(images[name])
        nxt = workdir / (f"{out}.{i}.o" if i < len(images) - 1 else out)
        embed_cubin(path, current, nxt, name)
        if current != launcher:
            current.unlink()
        current = nxt


def link_now(work: Path, images: dict[str, bytes], launcher: Path, runtime: Path, cache: Path) -> Path:
    """The link stage as a build runs it (:func:`tl_aot.pipeline.link.link`)."""
    from tl_aot.pipeline.link import link

    return link("link_scale", work, _manifest(), images, (launcher, runtime), cache=cache, key="link_scale")


def manifest_object(cache: Path) -> Path:
    """The manifest's object, from the cache as both links take it (compiled here once, before any timing)."""
    from tl_aot.codegen.render import render_manifest
    from tl_aot.cuda.host_objects import generated_object

    text = render_manifest(_manifest())
    obj, _ = generated_object(
        cache, {"link_scale.manifest.cc": text}, "link_scale.manifest.cc", "link_scale.manifest.o", extra_key="link_scale", what="manifest"
    )
    return obj


def link_before(work: Path, images: dict[str, bytes], launcher: Path, runtime: Path, cache: Path) -> Path:
    """The link stage as it was: the same manifest object and final link, the images embedded one by one."""
    from tl_aot.cuda.host_compile import link_library

    manifest_obj = manifest_object(cache)
    embed_one_by_one(work, images, "link_scale.o", launcher=launcher)
    link_library(work, ["link_scale.o", str(manifest_obj), str(runtime)], "liblink_scale.so", what="linking")
    return work / "liblink_scale.so"


def _manifest():
    import dataclasses

    from tl_aot.common.metadata import Manifest
    from tl_aot.common.metadata_json import from_json

    return dataclasses.replace(from_json(Manifest, GOLDEN.read_text()), library="link_scale")


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn, base: Path, images: dict[str, bytes], launcher: Path, runtime: Path, cache: Path, repeat: int) -> dict:
    """Median wall and CPU seconds of ``fn`` linking ``images`` in a fresh work folder each time; the library checked."""
    walls, cpus = [], []
    for r in range(repeat):
        work = base / f"{fn.__name__}-{r}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        c0, t0 = _cpu(), time.perf_counter()
        lib = fn(work, images, launcher, runtime, cache)
        walls.append(time.perf_counter() - t0)
        cpus.append(_cpu() - c0)
        missing = images_missing(lib, images)
        if missing:
            msg = f"{fn.__name__}: {len(missing)} images not at their symbols, e.g. {missing[0]}"
            raise SystemExit(msg)
        size = lib.stat().st_size
        shutil.rmtree(work, ignore_errors=True)
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus), "library_bytes": size}


def images_missing(lib: Path, images: dict[str, bytes]) -> list[str]:
    """The image symbols whose bytes in ``lib`` (start to ``_end``, from its symbol table) are not the image's."""
    from tl_aot.cuda.image_assembly import IMAGE_PREFIX

    data = lib.read_bytes()
    table = subprocess.run(["readelf", "-sW", "--section-headers", str(lib)], capture_output=True, text=True, check=True).stdout
    rodata = next(line.split() for line in table.splitlines() if " .rodata " in line)
    at = rodata.index(".rodata")
    addr, off = int(rodata[at + 2], 16), int(rodata[at + 3], 16)
    syms = {}
    for line in table.splitlines():
        parts = line.split()
        if len(parts) == 8 and parts[7].startswith(IMAGE_PREFIX):
            syms[parts[7][len(IMAGE_PREFIX) :]] = int(parts[1], 16)
    bad = []
    for name, image in images.items():
        start, end = syms.get(name), syms.get(name + "_end")
        if start is None or end is None or data[start - addr + off : end - addr + off] != image:
            bad.append(name)
    return bad


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--packs" in argv:  # the whole library with image packs, first build and one-kernel rebuilds: bench/link_packs.py
        sys.path.insert(0, str(ROOT / "bench"))
        from link_packs import main as packs_main

        return packs_main([a for a in argv if a != "--packs"])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--counts", default="10,100,500,1000,2000", help="image counts, comma-separated (the smallest is the growth baseline)")
    ap.add_argument("--old-max", type=int, default=500, help="largest count the previous one-by-one embedding is timed at (0: never)")
    ap.add_argument("--kb", default="8-64", help="image size in KiB: LO-HI (uniform) or one value")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / f"tl_aot-link-scale-{os.getuid()}",
        help="holds the runtime and manifest objects",
    )
    ap.add_argument("--json", type=Path, help="write the lines here too (JSONL)")
    args = ap.parse_args(argv)
    from tl_aot.cuda.host_objects import runtime_object

    counts = sorted(int(c) for c in args.counts.split(","))
    lo, _, hi = args.kb.partition("-")
    kb = (float(lo), float(hi or lo))
    args.cache.mkdir(parents=True, exist_ok=True)
    runtime, _ = runtime_object(args.cache)
    manifest_object(args.cache)
    lines = []
    with tempfile.TemporaryDirectory(prefix="link scale ") as tmp:  # a space in every path, as users' folders have
        base = Path(tmp)
        first: dict = {}
        for n in counts:
            images = images_of(n, kb, args.seed)
            objs = base / f"objects-{n}"
            objs.mkdir()
            launcher = launcher_object(objs, sorted(images))
            line = {"bench": "link_scale", "images": n, "kb": args.kb, "image_mib": round(sum(map(len, images.values())) / 2**20, 1)}
            line["now"] = timed(link_now, base, images, launcher, runtime, args.cache, args.repeat)
            if n <= args.old_max:
                line["before"] = timed(link_before, base, images, launcher, runtime, args.cache, args.repeat)
                line["speedup_wall"] = round(line["before"]["wall_s"] / line["now"]["wall_s"], 2)
                line["speedup_cpu"] = round(line["before"]["cpu_s"] / line["now"]["cpu_s"], 2)
            first = first or {k: line[k] for k in ("images", "now", "before") if k in line}
            line["growth"] = {
                "images": round(n / first["images"], 2),
                "now_wall": round(line["now"]["wall_s"] / first["now"]["wall_s"], 2),
                "now_cpu": round(line["now"]["cpu_s"] / first["now"]["cpu_s"], 2),
            }
            if "before" in line and "before" in first:
                line["growth"]["before_wall"] = round(line["before"]["wall_s"] / first["before"]["wall_s"], 2)
                line["growth"]["before_cpu"] = round(line["before"]["cpu_s"] / first["before"]["cpu_s"], 2)
            line["load_avg"] = round(os.getloadavg()[0], 2)
            lines.append(line)
            print(json.dumps(line), flush=True)
    if args.json:
        args.json.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
