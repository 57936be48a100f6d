"""Image packs and their split into per-arch wheels, on made-up images (no build): what a user installs and is told."""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from tl_aot.common.arch import parse_arch
from tl_aot.common.metadata import Manifest
from tl_aot.common.metadata_json import from_json
from tl_aot.pipeline.image_packs import ImagePacks, pack_library, read_pack, read_ref
from tl_aot.wheel.arch_wheels import WheelSplitError, split_wheel

GOLDEN = Path(__file__).parent / "golden" / "manifest.json"
SM80, SM90A = parse_arch("80"), parse_arch("90a")


@pytest.fixture
def manifest() -> Manifest:
    return from_json(Manifest, json.loads(GOLDEN.read_text()))


def _packed(manifest, images, hint="pip install 'demo-{tag}==1.0'"):
    return pack_library(manifest, images, ImagePacks(hint=hint, compress=False), cuda_version=(13, 0), cache=Path("/nonexistent"))


def test_each_arch_gets_one_pack_and_identical_images_are_stored_once(manifest):
    images = {"a__sm_80": (SM80, b"same"), "b__sm_80": (SM80, b"same"), "a__sm_90a": (SM90A, b"hopper")}
    packed = _packed(manifest, images)
    lib = manifest.library
    assert sorted(packed.packs) == [f"lib{lib}.sm_80.tlpack", f"lib{lib}.sm_90a.tlpack"]
    assert (packed.images, packed.stored) == (3, 2)
    sm80 = read_pack(packed.packs[f"lib{lib}.sm_80.tlpack"])
    assert sm80.label == "sm_80" and list(sm80.images.values()) == [b"same"]
    assert sm80.build_id == packed.build_id


def test_a_reference_names_its_pack_build_and_what_to_install(manifest):
    packed = _packed(manifest, {"a__sm_90a": (SM90A, b"hopper")})
    ref = read_ref(packed.refs["a__sm_90a"])
    assert ref.label == "sm_90a" and ref.file == f"lib{manifest.library}.sm_90a.tlpack"
    assert ref.hint == "pip install 'demo-sm90a==1.0'"
    assert ref.build_id == packed.build_id and ref.size == len(b"hopper")


def test_the_build_id_changes_with_any_image_or_the_manifest(manifest):
    images = {"a__sm_80": (SM80, b"one")}
    first = _packed(manifest, images).build_id
    assert _packed(manifest, images).build_id == first  # the same build, the same id: packs are reproducible
    assert _packed(manifest, {"a__sm_80": (SM80, b"two")}).build_id != first
    assert _packed(replace(manifest, nvcc_version="12.9 other"), images).build_id != first


def _wheel(path: Path, files: dict) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


def test_split_wheel_writes_a_base_and_one_wheel_per_arch(manifest, tmp_path):
    packed = _packed(manifest, {"a__sm_80": (SM80, b"x"), "a__sm_90a": (SM90A, b"y")})
    files = {"demo/lib_k.so": b"\x7fELF", "demo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"}
    files |= {f"demo/{name}": data for name, data in packed.packs.items()}
    done = split_wheel(_wheel(tmp_path / "demo-1.0-py3-none-manylinux_2_17_x86_64.whl", files), tmp_path / "out")
    assert sorted(p.name for p in done.archs.values()) == [
        "demo_sm80-1.0-py3-none-manylinux_2_17_x86_64.whl",
        "demo_sm90a-1.0-py3-none-manylinux_2_17_x86_64.whl",
    ]
    with zipfile.ZipFile(done.base) as z:
        assert not [n for n in z.namelist() if n.endswith(".tlpack")]
        assert 'Requires-Dist: demo-sm80==1.0; extra == "sm80" or extra == "all"' in z.read("demo-1.0.dist-info/METADATA").decode()
    with zipfile.ZipFile(done.archs["sm90a"]) as z:
        assert "Requires-Dist: demo==1.0" in z.read("demo_sm90a-1.0.dist-info/METADATA").decode()
        record = z.read("demo_sm90a-1.0.dist-info/RECORD").decode()
        assert f"demo/lib{manifest.library}.sm_90a.tlpack,sha256=" in record


def test_split_wheel_refuses_a_wheel_without_packs(tmp_path):
    wheel = _wheel(tmp_path / "demo-1.0-py3-none-any.whl", {"demo-1.0.dist-info/METADATA": "Name: demo\nVersion: 1.0\n"})
    with pytest.raises(WheelSplitError, match="holds no image packs"):
        split_wheel(wheel)
