"""Figure 5: library bytes, per entry and per arch, from the manifest (``python -m tl_aot inspect --json``).

Also the host code the launcher adds per entry: its object (``<lib>.launcher.o``, compiled from the
library's manifest as a build compiles it) in text, data and bss per entry, and its compile time.
By hand, on any manifest (a library's, or ``tests/unit/golden/manifest.json``), ``--copies N`` for a
library of N renamed copies of its entries::

    python -m bench.size tests/unit/golden/manifest.json --copies 5
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["launcher_object", "replicated", "run", "size_records"]


def size_records(lib_path) -> list[tuple[str, dict]]:
    """(name, fields) pairs: the library as a whole, then each entry's image per arch."""
    from bench.common import ROOT

    p = subprocess.run(
        [sys.executable, "-m", "tl_aot", "inspect", str(lib_path), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    if p.returncode != 0:
        raise RuntimeError(f"tl_aot inspect failed: {p.stderr.strip()}")
    m = json.loads(p.stdout)
    total = lib_path.stat().st_size
    images = sum(v["image_bytes"] for e in m["entries"] for v in e["variants"])
    archs = sorted({v["arch"] + ("+PTX" if v["ptx"] else "") for e in m["entries"] for v in e["variants"]})
    out = [
        (
            "library",
            {
                "library": lib_path.name,
                "bytes": total,
                "entries": len(m["entries"]),
                "archs": archs,
                "image_bytes": images,
                "launcher_bytes": total - images,
                "bytes_per_entry": round(total / max(1, len(m["entries"]))),
                "launcher_bytes_per_entry": round((total - images) / max(1, len(m["entries"]))),
            },
        )
    ]
    for e in m["entries"]:
        for v in e["variants"]:
            arch = v["arch"] + ("+PTX" if v["ptx"] else "")
            kernels = v["kernels"]
            out.append(
                (
                    f"{e['name']}:{arch}",
                    {
                        "entry": e["name"],
                        "arch": arch,
                        "image_bytes": v["image_bytes"],
                        "image_kind": v["image_kind"],
                        "kernels": len(kernels),
                    },
                )
            )
    return out


def run(ctx, rec) -> None:
    from bench.anchors import LIBRARY_FILE

    for name, fields in size_records(ctx.libs / LIBRARY_FILE):
        rec.emit("size", name, **fields)
    rec.emit("size", "launcher_object", **_launcher_record(ctx.libs / LIBRARY_FILE))


def replicated(manifest, copies: int):
    """``manifest`` with ``copies`` renamed copies of each entry (``<name>_c<k>``): a many-entry library."""
    if copies <= 1:
        return manifest

    def renamed(e, k):
        return dataclasses.replace(e, name=f"{e.name}_c{k}", export=f"{e.export}_c{k}" if e.export else "")

    return dataclasses.replace(manifest, entries=tuple(renamed(e, k) for k in range(copies) for e in manifest.entries))


def launcher_object(manifest) -> dict:
    """Bytes of ``manifest``'s launcher object (text, data, bss; per entry) and the seconds its compile took."""
    from tl_aot.codegen.render import render_header, render_launcher
    from tl_aot.cuda.host_compile import host_command

    with tempfile.TemporaryDirectory(prefix="tl_aot_size_") as tmp:
        work = Path(tmp)
        (work / "lib.h").write_text(render_header(manifest))
        (work / "lib.cc").write_text(render_launcher(manifest, header_name="lib.h"))
        start, cpu = time.perf_counter(), _children_cpu()
        subprocess.run(host_command(work, "lib.cc", "lib.o"), cwd=work, check=True, capture_output=True, timeout=600)
        seconds, cpu = time.perf_counter() - start, _children_cpu() - cpu
        out = subprocess.run(["size", "lib.o"], cwd=work, check=True, capture_output=True, text=True).stdout
    text, data, bss = (int(v) for v in out.splitlines()[1].split()[:3])
    n = len(manifest.entries)
    return {
        "entries": n,
        "text": text,
        "data": data,
        "bss": bss,
        "host_bytes_per_entry": round((text + data) / n),
        "text_per_entry": round(text / n),
        "compile_s": round(seconds, 2),
        "compile_cpu_s": round(cpu, 2),  # user + sys: steadier than wall time on a shared machine
    }


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _launcher_record(lib_path) -> dict:
    """The launcher object of the library at ``lib_path``, rebuilt from its manifest."""
    from tl_aot.common.metadata import Manifest
    from tl_aot.common.metadata_json import from_json

    p = subprocess.run([sys.executable, "-m", "tl_aot", "inspect", str(lib_path), "--json"], capture_output=True, text=True, check=True)
    return launcher_object(from_json(Manifest, p.stdout))


def main(argv=None) -> None:
    """Print the launcher object's bytes per entry for a manifest file (see the module docstring)."""
    import argparse

    from tl_aot.common.metadata import Manifest
    from tl_aot.common.metadata_json import from_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("manifest", type=Path)
    ap.add_argument("--copies", type=int, default=1)
    opts = ap.parse_args(argv)
    m = replicated(from_json(Manifest, opts.manifest.read_text()), opts.copies)
    print(json.dumps(launcher_object(m)))


if __name__ == "__main__":
    main()
