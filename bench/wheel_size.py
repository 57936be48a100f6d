"""Installed bytes per kernel-arch and wheel sizes: images embedded (today) against image packs split by arch.

Synthesises a library of distinct kernels from the test kernels (GEMMs of several tilings and
dtypes, softmaxes, elementwise kernels: ``--kernels`` of them), builds it for every ``--arch``
twice through the CLI (images embedded; ``--image-packs``; the second reuses the first's variant
cache, so only the link differs), wraps the outputs in a wheel, splits it with ``python -m tl_aot
split-wheel`` and prints one JSON line per figure, then the extrapolation to ``--target`` kernels
(the issue's ~2,000-kernel library: per kernel-arch and per entry, scaled linearly; images are not
assumed to deduplicate). On the GPU machine, ``--from-output DIR`` measures a library already
built both ways (``DIR/embedded`` and ``DIR/packs``, e.g. the TileOPs capture) instead::

    python -m bench.wheel_size --kernels 24 --arch 80 --arch 89 --arch 90a --arch 100a -j 2
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

__all__ = ["main", "measure", "synthetic_spec"]

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "tests" / "kernels"
MIB = 2**20


def synthetic_spec(count: int, archs: list[str]) -> str:
    """A spec file (TOML text) of ``count`` distinct kernels: GEMM tilings and dtypes first, then softmax and elementwise."""
    gemms = [
        {"M": m, "N": n, "K": k, "block_M": bm, "block_N": bn, "num_stages": st, "dtype": dt}
        for (m, n, k), (bm, bn), st, dt in itertools.product(
            [(1024, 1024, 1024), (2048, 512, 768)], [(128, 128), (64, 128), (128, 64)], [2, 3], ["float16", "bfloat16"]
        )
    ]
    others = [("softmax.py", "softmax", {"N": n, "block_M": b}) for n in (512, 1024, 2048) for b in (2, 4)]
    others += [("elementwise.py", "axpy", {"N": n, "block": b}) for n in (1024, 4096) for b in (128, 256)]
    pool = [("gemm.py", "matmul", g) for g in gemms] + others
    step = max(1, len(pool) // count) if count < len(pool) else 1
    chosen = (pool[::step] + pool)[:count]
    lines = ["[library]", 'name = "wheelbench"', f"archs = {json.dumps(archs)}"]
    for i, (src, fn, args) in enumerate(chosen):
        spelled = ", ".join(f"{k} = {json.dumps(v)}" for k, v in args.items())
        lines += ["", "[[entry]]", f'name = "k{i:04d}"', f'source = "{KERNELS / src}"', f'function = "{fn}"', f"args = {{ {spelled} }}"]
    return "\n".join(lines) + "\n"


def _build(spec: Path, out: Path, archs: list[str], jobs: int, cache: Path, packs: bool) -> None:
    cmd = [sys.executable, "-m", "tl_aot", "build", "--spec", str(spec), "-o", str(out), "-j", str(jobs), "--cache-dir", str(cache), "-q"]
    cmd += [a for arch in archs for a in ("--arch", arch)]
    if packs:
        cmd += ["--image-packs", "--pack-hint", "pip install 'wheelbench-{tag}==1.0'"]
    subprocess.run(cmd, check=True, cwd=ROOT)


def _wheel(out: Path, folder: Path) -> Path:
    """The library folder as a wheel ``wheelbench-1.0-py3-none-manylinux_2_17_x86_64.whl`` (what setuptools would ship)."""
    wheel = out / "wheelbench-1.0-py3-none-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for f in sorted(folder.glob("lib*")):
            z.write(f, f"wheelbench/{f.name}")
        z.writestr("wheelbench-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: wheelbench\nVersion: 1.0\n")
        z.writestr("wheelbench-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
    return wheel


def measure(embedded: Path, packs: Path, kernels: int, archs: int, target: int, work: Path) -> list[dict]:
    """The figures of one library built both ways (folders holding ``lib<name>.so``, and its packs)."""
    (lib,) = embedded.glob("lib*.so")
    (base,) = packs.glob("lib*.so")
    pack_files = sorted(packs.glob("lib*.tlpack"))
    rows = [
        {"name": "embedded_installed_per_kernel_arch", "bytes": round(lib.stat().st_size / (kernels * archs))},
        {"name": "packs_base_per_entry", "bytes": round(base.stat().st_size / kernels)},
    ]
    per_arch = {}
    for p in pack_files:
        label = p.name.split(".")[-2]
        per_arch[label] = p.stat().st_size / kernels
        rows.append({"name": f"packs_{label}_per_kernel", "bytes": round(per_arch[label])})
    all_archs = (base.stat().st_size + sum(p.stat().st_size for p in pack_files)) / (kernels * archs)
    one_arch = max(base.stat().st_size / kernels + v for v in per_arch.values())
    rows.append({"name": "packs_installed_per_kernel_arch_all_archs", "bytes": round(all_archs)})
    rows.append({"name": "packs_installed_per_kernel_one_arch_worst", "bytes": round(one_arch)})
    (work / "embedded_wheel").mkdir(parents=True)
    emb_wheel = _wheel(work / "embedded_wheel", embedded)
    rows.append({"name": "embedded_wheel_per_kernel_arch", "bytes": round(emb_wheel.stat().st_size / (kernels * archs))})
    (work / "packs_wheel").mkdir(parents=True)
    wheel = _wheel(work / "packs_wheel", packs)
    subprocess.run([sys.executable, "-m", "tl_aot", "split-wheel", str(wheel)], check=True, cwd=ROOT, capture_output=True)
    for w in sorted((work / "packs_wheel").glob("*.whl")):
        rows.append({"name": f"wheel_{w.name.split('-')[0]}", "bytes": w.stat().st_size, "per_kernel": round(w.stat().st_size / kernels)})
        scaled = w.stat().st_size / kernels * target
        rows.append({"name": f"extrapolated_{target}_wheel_{w.name.split('-')[0]}", "MiB": round(scaled / MIB, 1)})
    rows.append({"name": f"extrapolated_{target}_embedded_wheel", "MiB": round(emb_wheel.stat().st_size / kernels * target / MIB, 1)})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=24)
    ap.add_argument("--arch", action="append", default=[])
    ap.add_argument("--target", type=int, default=2000, help="kernels of the library to extrapolate to")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--from-output", help="a folder holding embedded/ and packs/ builds of one library")
    ap.add_argument("--entries", type=int, help="with --from-output: the library's entry count")
    args = ap.parse_args(argv)
    archs = args.arch or ["80", "89", "90a", "100a"]
    with tempfile.TemporaryDirectory(prefix="wheelbench-") as tmp:
        work = Path(tmp)
        if args.from_output:
            if not args.entries:
                ap.error("--from-output needs --entries (the library's entry count)")
            root = Path(args.from_output)
            embedded, packs, kernels = root / "embedded", root / "packs", args.entries
        else:
            spec = work / "wheelbench.toml"
            spec.write_text(synthetic_spec(args.kernels, archs))
            embedded, packs, kernels = work / "embedded", work / "packs", args.kernels
            _build(spec, embedded, archs, args.jobs, work / "cache", packs=False)
            _build(spec, packs, archs, args.jobs, work / "cache", packs=True)
        for row in measure(embedded, packs, kernels, len(archs), args.target, work):
            print(json.dumps({"section": "wheel_size", "kernels": kernels, "archs": len(archs), **row}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
