"""Regenerate the codegen golden files.

    python tests/unit/golden/regen.py              # re-render launcher/<feature>.cc.ref, header.h.ref, manifest.cc.ref, ...
    python tests/unit/golden/regen.py --relower    # also re-lower manifest.json (needs TileLang)

Run the first after any template change, and review the diff of the .ref files like code: each
feature's launcher (support.golden.FEATURES: dynamic dims, TMA, specialisations, PTX, workspaces,
...) is its own small file, so a change shows in the features it touches. What depends on the
machine that lowers (its nvcc, the device code's digests, request keys) is left blank.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout's tl_aot, and support.golden

from support.golden import FEATURES, launcher_golden, render_feature_launcher  # noqa: E402

from tl_aot.codegen.render import render_header, render_manifest  # noqa: E402
from tl_aot.codegen.torch_native import render_companion  # noqa: E402
from tl_aot.common.metadata import Manifest  # noqa: E402
from tl_aot.common.metadata_json import from_json, to_json  # noqa: E402


def relower() -> Manifest:
    from tl_aot.config.user_code import snapshot_files
    from tl_aot.lower.lower import lower_variant
    from tl_aot.pipeline.manifest import manifest_of
    from tl_aot.pipeline.plan import Task
    from tl_aot.spec import KernelSpec, LibrarySpec

    kernels = ROOT / "tests" / "kernels"
    splitkv = {"batch": 64, "heads": 32, "kv_heads": 2, "seqlen": 8192, "dim": 128, "num_split": 8}  # as conformance.toml
    entries = (
        KernelSpec.create(name="add_one", source=kernels / "elementwise.py", function="add_one", archs=["80", "90a"]),
        KernelSpec.create(name="gemm", source=kernels / "gemm.py", function="matmul_dynamic_m", args={"N": 256, "K": 256}, archs=["90a"]),
        KernelSpec.create(name="two", source=kernels / "multi.py", function="scale_then_shift", args={"N": 1024}, archs=["80+PTX"]),
        KernelSpec.create(
            name="axpy_first", source=kernels / "outputs.py", function="axpy_first", args={"N": 4096}, archs=["90a"], out_idx=["out"]
        ),
        KernelSpec.create(name="row_stats", source=kernels / "outputs.py", function="row_stats", args={"M": 64, "N": 512}, archs=["90a"]),
        *KernelSpec.create(
            name="norm",
            source=kernels / "specialised.py",
            function="rms_norm",
            archs=["90a"],
            specialisations=[
                {"args": {"N": 2048}},
                {"args": {"N": 4096}, "when": {"m": [1, 64]}},
                {"args": {"N": 4096, "threads": 128}, "fallback": True},
            ],
        ),
        KernelSpec.create(name="pair_sum", source=kernels / "coverage.py", function="pair_sum", archs=["90a"], out_idx=[-1]),
        KernelSpec.create(name="tile_copy", source=kernels / "coverage.py", function="tile_copy", archs=["80"]),
        KernelSpec.create(name="arange", source=kernels / "coverage.py", function="arange", archs=["90a"], out_idx=["out"]),
        KernelSpec.create(
            name="decode_splitkv",
            source=kernels / "conformance" / "splitkv_decode.py",
            function="decode_splitkv",
            args=splitkv,
            archs=["90a"],
        ),
    )
    lib = LibrarySpec("golden", entries)
    tasks, results = [], {}
    for spec in entries:
        for arch in spec.archs:
            key = f"{spec.name}/{arch}"
            tasks.append(Task(spec, arch, key, snapshot_files([])))
            results[key] = lower_variant(spec, arch)
    os.chdir(ROOT)
    m = manifest_of(lib, tasks, results, "13.0.88", {key: 16 for key in results})
    return _machine_free(Manifest(**{**m.__dict__, "tl_aot_version": "0.0.0-golden", "tilelang_version": "0.1.15"}))


#: Fields that name the machine that lowered (its nvcc and driver floor) or digest its device code.
_MACHINE = ("compiler", "driver_min_cuda", "driver_min_version")
_VARIANT_MACHINE = ("cuda_version", "device_code", "func_hash", "min_driver_cuda", "request", "request_key", "resolved")


def _machine_free(m: Manifest) -> Manifest:
    """``m`` with what depends on the lowering machine blank, so the goldens read the same wherever they are regenerated."""

    def variant(v):
        return dataclasses.replace(v, **{f: type(getattr(v, f))() for f in _VARIANT_MACHINE})

    entries = tuple(dataclasses.replace(e, variants=tuple(variant(v) for v in e.variants)) for e in m.entries)
    return dataclasses.replace(m, entries=entries, **{f: type(getattr(m, f))() for f in _MACHINE})


def main() -> None:
    path = HERE / "manifest.json"
    manifest = relower() if "--relower" in sys.argv else from_json(Manifest, path.read_text())
    path.write_text(to_json(manifest, indent=1) + "\n")
    (HERE / "launcher").mkdir(exist_ok=True)
    for feature in FEATURES:
        launcher_golden(feature).write_text(render_feature_launcher(feature, manifest))
    (HERE / "header.h.ref").write_text(render_header(manifest))
    (HERE / "manifest.cc.ref").write_text(render_manifest(manifest))
    (HERE / "torch_companion.cc.ref").write_text(render_companion(manifest, header_name="golden.h"))


if __name__ == "__main__":
    main()
