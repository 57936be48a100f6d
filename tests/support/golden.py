"""The codegen golden files: one manifest, and what it renders to, one launcher per feature.

``tests/unit/golden/manifest.json`` holds every golden entry (lowered once by ``regen.py
--relower``); each feature's launcher golden (``launcher/<feature>.cc.ref``) is the launcher of a
library holding only that feature's entries, so a template change shows as a small diff in the
features it touches, each one a reviewable C++ file. The header, manifest unit and torch companion
are rendered from the whole manifest (each short).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tl_aot.common.metadata import Manifest
from tl_aot.common.metadata_json import from_json

__all__ = ["FEATURES", "GOLDEN", "REGEN", "feature_manifest", "golden_manifest", "launcher_golden", "render_feature_launcher"]

GOLDEN = Path(__file__).resolve().parents[1] / "unit" / "golden"
#: The command that regenerates every golden file (after a template change; review the diff like code).
REGEN = "python tests/unit/golden/regen.py"
#: Each feature of the launcher and the golden entries that show it (every entry is in exactly one).
FEATURES: dict[str, tuple[str, ...]] = {
    "multi_arch": ("add_one",),  # one entry, sm_80 and sm_90a images, picked by the device
    "dynamic_dims": ("pair_sum", "tile_copy", "arange"),  # dims solved from shapes, bit operations, a scalar-sized output
    "tma": ("gemm",),  # TMA descriptors encoded at launch from a dynamic M
    "ptx": ("two",),  # sm_80+PTX: two kernels, PTX the driver JIT-compiles elsewhere
    "outputs": ("axpy_first", "row_stats"),  # outputs returned when the call passes the inputs alone
    "specialisations": ("norm__s0", "norm__s1", "norm__s2"),  # one function picking a specialisation by sizes
    "workspaces": ("decode_splitkv",),  # T.alloc_global scratch allocated per call, two launches
}


def golden_manifest() -> Manifest:
    """The manifest every golden file is rendered from."""
    return from_json(Manifest, (GOLDEN / "manifest.json").read_text())


def feature_manifest(feature: str, manifest: Manifest | None = None) -> Manifest:
    """The golden manifest restricted to ``feature``'s entries, in their order there."""
    manifest = manifest or golden_manifest()
    names = FEATURES[feature]
    entries = tuple(e for e in manifest.entries if e.name in names)
    assert [e.name for e in entries] == list(names), f"{feature}: {names} not all in manifest.json (run {REGEN} --relower)"
    return dataclasses.replace(manifest, entries=entries)


def launcher_golden(feature: str) -> Path:
    """``launcher/<feature>.cc.ref``."""
    return GOLDEN / "launcher" / f"{feature}.cc.ref"


def render_feature_launcher(feature: str, manifest: Manifest | None = None) -> str:
    """The launcher of a library holding ``feature``'s golden entries alone."""
    from tl_aot.codegen.render import render_launcher

    return render_launcher(feature_manifest(feature, manifest), header_name="golden.h")
