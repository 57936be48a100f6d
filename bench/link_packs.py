"""Link and publish of a whole library with image packs, on the CPU: a first build, then rebuilds where one kernel changed.

The library is TileOPs' whole capture at its measured shape: ``--entries`` 1,714 entries x 4 archs
(6,856 images), each image a synthetic cubin (an ELF of NVIDIA's machine type around a payload,
which ``fatbinary`` takes as a cubin) of 8-72 KiB (``--kb``, 40 KiB on average), compressible about
5x as TileOPs' are (304 MB -> 58 MB); the manifest is ``load_scale.py``'s (golden entries cycled,
``--entry-kb`` of record each), the launcher rendered from it and compiled once (kept in
``--cache``), tl_aot's runtime object. Each step runs :func:`tl_aot.pipeline.link.link_and_publish`,
the stages 5 and 6 every build ends with, ``--image-packs`` on (compressed), as a build calls it:

1. ``first``: every image new to the link (the compressed images in ``--cache`` from an earlier run
   of the bench are hits, as the variant cache's are in a rebuild: ``--cold`` empties it);
2. ``one``: one kernel changed: ``--changed``'s image for every arch (new bytes, new sizes, new to
   every run: compressed in this step, as a changed kernel's are);
3. ``same``: the same inputs again (what publishing an unchanged library costs; a build's stamp
   usually answers first);
4. ``back``: the change undone (every image seen before).

Each row: wall and CPU seconds (this process and its tools), seconds per phase (``pack``: images
compressed and the packs made; ``manifest``: its unit rendered and compiled; ``images``: the image
(reference) object assembled; ``final link``; ``images + final link``: both, where one call makes them; ``publish``: staged
and swapped, the stamp), bytes
this process read and wrote (``/proc/self/io``), the library and pack sizes, and which published
files changed. Every step is checked as the runtime reads a library: every reference at its symbol
names an image of its pack with that size and SHA-256, the pack's build id is the library's, the
manifest's image sizes are the images'; unchanged steps publish byte-identical files.

Each run's manifest is its own (a nonce among its build flags), so its unit is compiled as a
build's would be, never a hit left by an earlier run. ``--baseline DIR`` runs the same steps with
the tl_aot checkout in DIR (another commit: ``git archive main | tar -x -C DIR``) in a subprocess
first, over the same images and cache, and prints the ratios.

``python bench/link_packs.py [--entries 1714] [--kb 8-72] [--baseline DIR] [--json OUT]``
(first run: the launcher's compile, ~1 CPU-min per 1,000 entries, and the images' compression, ~7 ms each).
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import hashlib
import importlib
import json
import os
import random
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHS = ("sm_80", "sm_89", "sm_90a", "sm_100a")

#: Phases timed: (module, attribute, phase). Names missing from the code measured are skipped (a baseline commit).
PHASES = (
    ("tl_aot.pipeline.link", "pack_built", "pack"),
    ("tl_aot.pipeline.link", "packed_images", "pack"),
    ("tl_aot.pipeline.link", "render_manifest", "manifest"),
    ("tl_aot.pipeline.link", "generated_object", "manifest"),
    ("tl_aot.pipeline.link", "manifest_object", "manifest"),
    ("tl_aot.pipeline.link", "embed_images", "images"),
    ("tl_aot.pipeline.link", "image_object", "images"),
    ("tl_aot.pipeline.link", "link_library", "final link"),
    ("tl_aot.pipeline.link", "link_with_images", "images + final link"),  # one step since the images' record follows the link
    ("tl_aot.pipeline.link", "publish", "publish"),
)


def elf_heads(archs, folder: Path) -> dict[str, bytes]:
    """Arch -> the ELF header of a real cubin for it (a one-line kernel compiled by nvcc): what :func:`cubin` copies."""
    from tl_aot.cuda.cuda_toolkit import find_toolkit

    (folder / "k.cu").write_text("__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n")
    heads = {}
    for sm in archs:
        subprocess.run([find_toolkit().nvcc, "-cubin", f"-arch={sm}", "k.cu", "-o", f"{sm}.cubin"], cwd=folder, check=True)
        heads[sm] = (folder / f"{sm}.cubin").read_bytes()[:64]
    return heads


def cubin(payload: bytes, head: bytes) -> bytes:
    """A minimal ELF cubin (``head``: a real one's ELF header) holding ``payload`` in one section: what fatbinary wraps and compresses."""
    names = b"\0.nv.bench\0.shstrtab\0"
    at_names = 64 + len(payload)
    at_sections = (at_names + len(names) + 7) & ~7
    header = bytearray(head)
    struct.pack_into("<QQQ", header, 24, 0, 0, at_sections)  # entry, program headers (none), section headers
    struct.pack_into("<HHHHHH", header, 52, 64, 56, 0, 64, 3, 2)
    body = bytes(header) + payload + names
    body += bytes(at_sections - len(body)) + bytes(64)
    body += struct.pack("<IIQQQQIIQQ", 1, 1, 0, 0, 64, len(payload), 0, 0, 1, 0)
    body += struct.pack("<IIQQQQIIQQ", 11, 3, 0, 0, at_names, len(names), 0, 0, 1, 0)
    return body


def payload(rng: random.Random, size: int) -> bytes:
    """``size`` bytes compressible about 5x (words drawn from a small set, a fifth of them random), as cubins are."""
    words = [rng.randbytes(8) for _ in range(48)]
    return b"".join(rng.choice(words) if rng.random() < 0.93 else rng.randbytes(8) for _ in range(size // 8))


def images_of(manifest, kb: tuple[float, float], seed: int, heads: dict[str, bytes]) -> dict:
    """Image symbol -> (arch, cubin) for every variant of ``manifest``, sizes drawn from ``kb`` KiB."""
    from tl_aot.common.cpp_spelling import image_symbol

    rng = random.Random(seed)
    return {
        image_symbol(e.name, v.arch): (v.arch, cubin(payload(rng, int(rng.uniform(*kb) * 1024)), heads[v.arch.sm]))
        for e in manifest.entries
        for v in e.variants
    }


def launcher_of(manifest, cache: Path):
    """The launcher as the launcher stage hands it on (its object, from ``cache`` or compiled now, and its header's text)."""
    from tl_aot.codegen.render import render_header, render_launcher
    from tl_aot.cuda.host_objects import generated_object

    name = manifest.library
    header = render_header(manifest)
    text = render_launcher(manifest, header_name=f"{name}.h")
    t0 = time.perf_counter()
    obj, made = generated_object(
        cache, {f"{name}.cc": text, f"{name}.h": header}, f"{name}.cc", f"{name}.o", extra_key="link_packs", what="compiling the launcher"
    )
    if made:
        print(f"compiled the launcher of {len(manifest.entries)} entries in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return types.SimpleNamespace(obj=obj, header_text=header)


class Phases:
    """Seconds spent in each phase's functions (wrapped in their modules while a step runs)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._undo: list = []

    def __enter__(self):
        import importlib

        for module, attr, phase in PHASES:
            mod = importlib.import_module(module)
            real = getattr(mod, attr, None)
            if real is None:
                continue

            def timed(*a, _real=real, _phase=phase, **k):
                t0 = time.perf_counter()
                try:
                    return _real(*a, **k)
                finally:
                    self.seconds[_phase] = self.seconds.get(_phase, 0.0) + time.perf_counter() - t0

            setattr(mod, attr, timed)
            self._undo.append((mod, attr, real))
        return self

    def __exit__(self, *exc) -> None:
        for mod, attr, real in reversed(self._undo):
            setattr(mod, attr, real)


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _io() -> dict[str, int]:
    return {k: int(v) for k, v in (line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())}


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def step(manifest, images: dict, launcher, runtime: Path, base: Path, cache: Path, jobs: int, profile: Path | None = None) -> dict:
    """One link and publish into ``base/out``: wall, CPU, phases, I/O; the outputs checked."""
    from tl_aot.pipeline.image_packs import ImagePacks
    from tl_aot.pipeline.link import link_and_publish, with_image_sizes
    from tl_aot.pipeline.stamp import Provenance
    from tl_aot.pipeline.workspace import Outputs

    out, work = base / "out", base / "out" / ".tl_aot" / manifest.library
    work.mkdir(parents=True, exist_ok=True)
    name = manifest.library
    outputs = Outputs(out / f"lib{name}.so", out / f"{name}.h", work / "stamp.json", None)
    before = _digests(out)
    sized = with_image_sizes(manifest, images)
    prof = cProfile.Profile() if profile else None
    io0, c0, t0 = _io(), _cpu(), time.perf_counter()
    with Phases() as phases:
        if prof:
            prof.enable()
        link_and_publish(
            sized, images, launcher, runtime, work=work, out=outputs, cache=cache, key="link_packs",
            provenance=Provenance("link_packs"), stamp=True, packs=ImagePacks(), jobs=jobs,
        )  # fmt: skip
        if prof:
            prof.disable()
            prof.dump_stats(profile)
    wall, cpu, io1 = time.perf_counter() - t0, _cpu() - c0, _io()
    after = _digests(out)
    check(outputs.library, sized, images, cache)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "phases_s": {k: round(v, 2) for k, v in phases.seconds.items()},
        "read_mib": round((io1["rchar"] - io0["rchar"]) / 2**20, 1),
        "written_mib": round((io1["wchar"] - io0["wchar"]) / 2**20, 1),
        "library_mib": round(outputs.library.stat().st_size / 2**20, 1),
        "packs_mib": round(sum(p.stat().st_size for p in out.glob("*.tlpack")) / 2**20, 1),
        "changed_files": sorted(n for n in after if before.get(n) != after[n]),
    }


def check(lib: Path, manifest, images: dict, cache: Path) -> None:
    """As the runtime reads ``lib``: each reference at its symbol names its pack, that pack's build id, an image of its size and digest."""
    from tl_aot.common.cpp_spelling import image_symbol
    from tl_aot.cuda.fatbin import compressed_fatbin, fatbinary_path
    from tl_aot.cuda.image_assembly import IMAGE_PREFIX
    from tl_aot.pipeline.image_packs import read_pack, read_ref

    data = lib.read_bytes()
    table = subprocess.run(["readelf", "-sW", "--section-headers", str(lib)], capture_output=True, text=True, check=True).stdout
    rodata = next(line.split() for line in table.splitlines() if " .rodata " in line)
    at = rodata.index(".rodata")
    addr, off = int(rodata[at + 2], 16), int(rodata[at + 3], 16)
    syms = {p[7]: int(p[1], 16) for p in (line.split() for line in table.splitlines()) if len(p) == 8 and p[7].startswith(IMAGE_PREFIX)}
    packs = {p.name: read_pack(p.read_bytes()) for p in lib.parent.glob(f"lib{manifest.library}.*.tlpack")}
    tool = fatbinary_path()
    for e in manifest.entries:
        for v in e.variants:
            symbol = image_symbol(e.name, v.arch)
            start, end = syms[IMAGE_PREFIX + symbol], syms[IMAGE_PREFIX + symbol + "_end"]
            ref = read_ref(data[start - addr + off : end - addr + off])
            pack = packs[ref.file]
            stored = pack.images[ref.digest]
            expected = compressed_fatbin(images[symbol][1], v.arch, (13, 0), tool=tool, cache=cache / "compressed")
            if pack.build_id != ref.build_id or len(stored) != ref.size or stored != expected or v.image_bytes != len(images[symbol][1]):
                msg = f"{symbol}: the library's reference does not lead to its image"
                raise SystemExit(msg)


def changed(images: dict, entry: str, seed: int, heads: dict[str, bytes]) -> dict:
    """``images`` with every arch's image of ``entry`` made again (other bytes, other sizes: never compressed before)."""
    rng = random.Random(f"{seed} {os.getpid()} {time.time_ns()}")
    out = dict(images)
    for symbol, (arch, data) in images.items():
        if symbol.startswith(entry + "__"):
            out[symbol] = (arch, cubin(payload(rng, len(data) + 4096), heads[arch.sm]))
    return out


def run_steps(args) -> list[dict]:
    """The four steps in a fresh output folder; one row each."""
    from load_scale import synthesised

    from tl_aot.cuda.host_objects import runtime_object

    manifest = dataclasses.replace(synthesised(args.entries, list(ARCHS), 0, 0, args.entry_kb), library="link_packs")
    # This run's own manifest, as a build's is: its unit is compiled afresh, never a hit left by an earlier run of the bench.
    nonce = hashlib.sha256(f"{os.getpid()} {time.time_ns()}".encode()).hexdigest()[:16]
    manifest = dataclasses.replace(manifest, build_flags=(*manifest.build_flags, f"-DLINK_PACKS_RUN={nonce}"))
    lo, _, hi = args.kb.partition("-")
    args.cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        heads = elf_heads(ARCHS, Path(tmp))
    images = images_of(manifest, (float(lo), float(hi or lo)), args.seed, heads)
    entry = manifest.entries[args.changed].name
    if args.cold:
        shutil.rmtree(args.cache / "compressed", ignore_errors=True)
    launcher = launcher_of(manifest, args.cache)
    runtime, _ = runtime_object(args.cache)
    rows = []
    with tempfile.TemporaryDirectory(prefix="link packs ") as tmp:  # a space in every path, as users' folders have
        base = Path(tmp)
        edited = changed(images, entry, args.seed + 1, heads)
        for name, imgs in (("first", images), ("one", edited), ("same", edited), ("back", images)):
            row = {
                "bench": "link_packs",
                "step": name,
                "code": str(Path(sys.modules["tl_aot"].__file__).parents[1]),
                "entries": args.entries,
            }
            row["images"] = len(imgs)
            row["image_mib"] = round(sum(len(b) for _, b in imgs.values()) / 2**20, 1)
            row.update(step(manifest, imgs, launcher, runtime, base, args.cache, args.jobs, args.profile if name == "one" else None))
            row["load_avg"] = round(os.getloadavg()[0], 2)
            rows.append(row)
            print(json.dumps(row), flush=True)
        same = rows[2]["changed_files"]
        if same:
            msg = f"publishing unchanged inputs again changed {same}"
            raise SystemExit(msg)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=1714, help="entries (x4 archs: images); TileOPs' whole capture: 1,714 x 4 = 6,856")
    ap.add_argument("--kb", default="8-72", help="image size in KiB: LO-HI (uniform) or one value")
    ap.add_argument("--entry-kb", type=float, default=15, help="manifest record per entry, KB (TileOPs': ~7 KB an arch)")
    ap.add_argument("--changed", type=int, default=7, help="the entry whose kernel changes")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cold", action="store_true", help="empty the compressed images' cache first")
    ap.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / f"tl_aot-link-packs-{os.getuid()}", help="objects and compressed images"
    )
    ap.add_argument("--baseline", type=Path, help="a tl_aot checkout to run the same steps with first (in a subprocess)")
    ap.add_argument("--code", type=Path, help=argparse.SUPPRESS)  # the checkout this process measures (baseline runs)
    ap.add_argument("--profile", type=Path, help="write a cProfile of the one-changed step here")
    ap.add_argument("--json", type=Path, help="append the rows here (JSONL)")
    args = ap.parse_args(argv)
    sys.path[:0] = [str(args.code or ROOT), str(ROOT / "bench")]
    importlib.import_module("tl_aot")  # the checkout measured, before load_scale puts this one on the path
    base_rows = []
    if args.baseline:
        cmd = [sys.executable, __file__, *(argv if argv is not None else sys.argv[1:])]
        at = cmd.index("--baseline")
        del cmd[at : at + 2]
        cmd += ["--code", str(args.baseline.resolve()), "--cache", str(args.cache)]  # objects and images keyed by content: shared
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, env={**os.environ, "PYTHONPATH": str(args.baseline)})
        sys.stderr.write(done.stderr)
        if done.returncode:
            return done.returncode
        base_rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        for row in base_rows:
            print(json.dumps({**row, "baseline": True}), flush=True)
    rows = run_steps(args)
    for now, then in zip(rows, base_rows):
        ratio = {"bench": "link_packs", "step": now["step"], "speedup_wall": round(then["wall_s"] / now["wall_s"], 2)}
        ratio["speedup_cpu"] = round(then["cpu_s"] / now["cpu_s"], 2)
        print(json.dumps(ratio), flush=True)
        rows.append(ratio)
    if args.json:
        with args.json.open("a") as f:
            f.writelines(json.dumps(r) + "\n" for r in [*({**r, "baseline": True} for r in base_rows), *rows])
    return 0


if __name__ == "__main__":
    sys.exit(main())
