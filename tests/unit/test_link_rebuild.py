"""A rebuild's link and publish cost what changed: packs, the image object and the library rewritten only where their bytes changed.

Every cache here is keyed so that a changed image can never ship stale: one image changed, the
pack and library differ exactly there and still lead to it; nothing changed, every output is
byte-identical and no file is rewritten.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.golden import golden_manifest

from tl_aot.codegen.render import render_manifest
from tl_aot.common.arch import parse_arch
from tl_aot.common.errors import FailedProcessError
from tl_aot.common.metadata_json import manifest_json, to_json
from tl_aot.cuda.host_compile import SMALL_IMAGE, embed_images, link_with_images
from tl_aot.pipeline.image_packs import ImagePacks, pack_library, read_pack, read_ref
from tl_aot.pipeline.stamp import Provenance, publish, stamp_text
from tl_aot.pipeline.workspace import Outputs

SM80, SM90A = parse_arch("80"), parse_arch("90a")
IMAGES = {"a__sm_80": (SM80, b"a80" * 100), "a__sm_90a": (SM90A, b"a90" * 100), "b__sm_80": (SM80, b"b80" * 100)}


def _packed(images, manifest=None):
    m = manifest or golden_manifest()
    return pack_library(m, images, ImagePacks(compress=False), cuda_version=(13, 0), cache=Path("/nonexistent"))


def test_one_image_changed_changes_its_pack_there_and_its_reference_leads_to_it():
    before = _packed(IMAGES)
    edited = {**IMAGES, "a__sm_80": (SM80, b"new kernel")}
    after = _packed(edited)
    old80, new80 = (read_pack(p.packs[f"lib{golden_manifest().library}.sm_80.tlpack"]) for p in (before, after))
    assert set(old80.images.values()) ^ set(new80.images.values()) == {b"a80" * 100, b"new kernel"}
    ref = read_ref(after.refs["a__sm_80"])
    assert new80.images[ref.digest] == b"new kernel" and ref.build_id == new80.build_id == after.build_id
    # every pack belongs to the new build (the runtime refuses a pack of another build), the unchanged images in it as they were
    sm90 = read_pack(after.packs[f"lib{golden_manifest().library}.sm_90a.tlpack"])
    assert sm90.build_id == after.build_id and list(sm90.images.values()) == [b"a90" * 100]


def test_the_build_id_is_the_same_with_the_manifest_text_given_or_made():
    m = golden_manifest()
    given = pack_library(m, IMAGES, ImagePacks(compress=False), cuda_version=(13, 0), cache=Path("/x"), manifest_text=to_json(m))
    assert given == _packed(IMAGES, m)


def test_the_manifest_spelled_once_is_the_manifest_and_entries_to_json_spells():
    m = golden_manifest()
    spelled = manifest_json(m)
    assert spelled.text == to_json(m) and spelled.entries == tuple(to_json(e) for e in m.entries)
    assert render_manifest(m, spelled=spelled) == render_manifest(m)


def test_a_stamp_spliced_from_the_manifest_text_reads_as_the_one_made_from_the_manifest(tmp_path):
    m, built = golden_manifest(), tmp_path / "libx.so"
    built.write_bytes(b"library")
    spliced = stamp_text("key", built, b"h", m, [("a.h", "d")], manifest_text=to_json(m))
    assert json.loads(spliced) == json.loads(stamp_text("key", built, b"h", m, [("a.h", "d")]))


def _assembler():
    from tl_aot.cuda.toolchain import find_cxx

    try:
        find_cxx()
    except Exception as e:  # noqa: BLE001 - no host compiler on this machine
        pytest.skip(str(e))


def _symbol_bytes(obj: Path, symbol: str) -> bytes:
    """The bytes from ``__tvm_ffi__cubin_<symbol>`` to its ``_end`` in the object's .rodata."""
    syms = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout.split("\n")
    at = {s.split()[2]: int(s.split()[0], 16) for s in syms if len(s.split()) == 3}
    start, end = at[f"__tvm_ffi__cubin_{symbol}"], at[f"__tvm_ffi__cubin_{symbol}_end"]
    out = obj.with_suffix(".rodata")
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.rodata", str(obj), str(out)], check=True)
    return out.read_bytes()[start:end]


def test_the_image_object_is_assembled_again_only_when_an_image_changed(tmp_path):
    _assembler()
    refs = {f"k{i}__sm_90a": b"ref %d" % i for i in range(50)}
    refs["big__sm_90a"] = b"x" * (SMALL_IMAGE + 1)  # a whole image: a file of its own
    assert embed_images(tmp_path, refs, "images.o", what="test")
    made = (tmp_path / "images.o").stat().st_mtime_ns
    assert not embed_images(tmp_path, dict(reversed(refs.items())), "images.o", what="test")
    assert (tmp_path / "images.o").stat().st_mtime_ns == made
    assert embed_images(tmp_path, {**refs, "k7__sm_90a": b"ref seven, changed"}, "images.o", what="test")
    assert _symbol_bytes(tmp_path / "images.o", "k7__sm_90a") == b"ref seven, changed"
    assert _symbol_bytes(tmp_path / "images.o", "k8__sm_90a") == b"ref 8"
    assert _symbol_bytes(tmp_path / "images.o", "big__sm_90a") == b"x" * (SMALL_IMAGE + 1)


def test_a_damaged_image_object_is_assembled_again(tmp_path):
    _assembler()
    refs = {"a__sm_90a": b"ref a", "b__sm_90a": b"ref b"}
    embed_images(tmp_path, refs, "images.o", what="test")
    with open(tmp_path / "images.o", "r+b") as f:
        f.truncate(100)
    assert embed_images(tmp_path, refs, "images.o", what="test")
    assert _symbol_bytes(tmp_path / "images.o", "b__sm_90a") == b"ref b"


def test_the_images_are_linked_in_and_recorded_only_once_the_library_links(tmp_path):
    """link_with_images: the images' object is in the library; a failed link leaves it unrecorded, so it is made again."""
    _assembler()
    from tl_aot.cuda.toolchain import find_cxx

    (tmp_path / "mine.cc").write_text('extern "C" int tl_mine() { return 1; }\n')
    subprocess.run([find_cxx(), "-c", "-fPIC", "mine.cc", "-o", "mine.o"], cwd=tmp_path, check=True)
    refs = {"a__sm_90a": b"ref a", "b__sm_90a": b"ref b"}
    with pytest.raises(FailedProcessError, match="linking libx.so"):
        link_with_images(tmp_path, refs, "x.images.o", ["mine.o", "missing.o"], "libx.so", what="linking libx.so")
    assert (tmp_path / "x.images.o").is_file() and not (tmp_path / "x.images.o.from").exists()
    link_with_images(tmp_path, refs, "x.images.o", ["mine.o"], "libx.so", what="linking libx.so")
    assert _symbol_bytes(tmp_path / "x.images.o", "b__sm_90a") == b"ref b"
    syms = subprocess.run(["nm", str(tmp_path / "libx.so")], capture_output=True, text=True, check=True).stdout
    assert "__tvm_ffi__cubin_a__sm_90a" in syms
    assert not embed_images(tmp_path, refs, "x.images.o", what="embedding the images of libx.so")  # recorded: current


def _publish(tmp_path: Path, library: bytes, images) -> tuple[Outputs, object]:
    m = golden_manifest()
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    built = work / f"lib{m.library}.so"
    built.write_bytes(library)
    out = Outputs(tmp_path / "out" / f"lib{m.library}.so", tmp_path / "out" / f"{m.library}.h", work / "stamp.json", None)
    packed = _packed(images, m)
    publish(built, out, m, "// header\n", Provenance("k"), stamp=True, packs=packed.packs, manifest_text=to_json(m))
    return out, packed


def _files(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), os.stat(p).st_ino) for p in sorted(folder.iterdir())}


def test_publishing_the_same_library_again_rewrites_nothing(tmp_path):
    out, _ = _publish(tmp_path, b"library one", IMAGES)
    first = _files(out.library.parent)
    _publish(tmp_path, b"library one", IMAGES)
    assert _files(out.library.parent) == first  # the same bytes in the same files (inodes): nothing swapped


def test_publishing_one_changed_image_replaces_its_pack_and_the_library_and_nothing_else(tmp_path):
    out, _ = _publish(tmp_path, b"library one", {k: v for k, v in IMAGES.items() if k != "a__sm_90a"} | {"a__sm_90a": IMAGES["a__sm_90a"]})
    first = _files(out.library.parent)
    images = {**IMAGES, "b__sm_80": (SM80, b"b80, changed")}
    _, packed = _publish(tmp_path, b"library two", {**images, "a__sm_90a": (SM90A, b"a90" * 100)})
    now = _files(out.library.parent)
    changed = sorted(n for n in now if now[n] != first[n])
    lib = golden_manifest().library
    # sm_90a's pack changes too: its images are the same, but it belongs to the new build
    assert changed == sorted([f"lib{lib}.so", f"lib{lib}.sm_80.tlpack", f"lib{lib}.sm_90a.tlpack"])
    assert now[f"{lib}.h"] == first[f"{lib}.h"]
    sm80 = read_pack(now[f"lib{lib}.sm_80.tlpack"][0])
    assert sm80.images[read_ref(packed.refs["b__sm_80"]).digest] == b"b80, changed"
    assert now[f"lib{lib}.so"][0] == b"library two" and not (tmp_path / "work" / f"lib{lib}.so").exists()  # moved, not copied


def test_a_library_built_on_another_file_system_is_copied_in_and_left_there(tmp_path, monkeypatch):
    import errno

    from tl_aot.common.destinations import StagedFiles

    real = os.replace
    built, dest = tmp_path / "work" / "libx.so", tmp_path / "out" / "libx.so"
    built.parent.mkdir()
    built.write_bytes(b"library")

    def across(src, dst):  # the work folder on another file system: a rename cannot move it
        if Path(src) == built:
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), str(dst))
        return real(src, dst)

    monkeypatch.setattr("tl_aot.common.destinations.os.replace", across)
    staged = StagedFiles()
    assert staged.stage(dest, source=built, role="library", if_changed=True, move=True)
    staged.publish()
    assert dest.read_bytes() == built.read_bytes() == b"library"
    assert not StagedFiles().stage(dest, source=built, role="library", if_changed=True, move=True)  # the same bytes: left alone
