"""Figure 5: library bytes, per entry and per arch, from the manifest (``python -m tl_aot inspect --json``)."""

from __future__ import annotations

import json
import subprocess
import sys

__all__ = ["run", "size_records"]


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
