"""tl_aot.cuda.image_check and the cache's use of it: a cut-short or foreign image never enters or leaves the cache."""

from __future__ import annotations

import errno
import signal
import struct
from pathlib import Path

import pytest
from support.elf_images import elf, fatbin
from support.records import device_kernel, lowered_variant

from tl_aot.common.destinations import disk_full_note
from tl_aot.common.errors import CompileError, FailedProcessError
from tl_aot.common.metadata import LoweredVariant
from tl_aot.cuda.image_check import image_problem, object_problem, variant_image_problem
from tl_aot.pipeline.cache import VariantCache

CUBIN = elf({".text.main_kernel": b"\x00" * 64, ".nv.info.main_kernel": b"\x04\x17"})


def test_a_complete_cubin_defining_its_kernels_passes():
    assert image_problem(CUBIN, fatbin=False, kernels=["main_kernel"]) is None


@pytest.mark.parametrize("keep", [0, 40, 63, 200, len(CUBIN) - 1])
def test_a_cubin_cut_short_is_refused(keep):
    problem = image_problem(CUBIN[:keep], fatbin=False, kernels=["main_kernel"])
    assert problem and problem.startswith("not a complete cubin")


def test_a_section_past_the_end_is_named():
    table_at = struct.unpack_from("<Q", CUBIN, 40)[0]
    # keep the section table (moved to the front of the cut) but lose a section's bytes
    cut = bytearray(CUBIN)
    struct.pack_into("<Q", cut, table_at + 2 * 64 + 32, 10**6)  # section #2's size
    assert "section #2 ends at byte" in image_problem(bytes(cut), fatbin=False)


def test_a_cubin_without_the_kernel_is_refused():
    assert "defines no kernel other_kernel (it has main_kernel)" in image_problem(CUBIN, fatbin=False, kernels=["other_kernel"])


def test_an_object_is_not_a_cubin_and_a_cubin_is_not_an_object():
    assert "not an executable" in image_problem(elf({}, elf_type=1), fatbin=False)
    assert object_problem(elf({}, elf_type=1)) is None
    assert "not a complete object file" in object_problem(CUBIN)


def test_fatbin_header_sizes_and_inner_cubin_are_checked():
    good = fatbin((2, CUBIN), (1, b"(\xb5/\xfd compressed ptx"))
    assert image_problem(good, fatbin=True, kernels=["main_kernel"]) is None
    assert "promises" in image_problem(good[:-10], fatbin=True)
    assert "no fatbin header" in image_problem(CUBIN, fatbin=True)
    inner_cut = fatbin((2, CUBIN[:100]))
    assert "its cubin at byte 16: not a complete cubin" in image_problem(inner_cut, fatbin=True)
    assert "holds no image" in image_problem(fatbin(), fatbin=True)


def _variant(ptx: bool = False) -> LoweredVariant:
    return lowered_variant("add", "80+PTX" if ptx else "sm_90a", kernels=(device_kernel(),))


def test_the_cache_refuses_to_store_a_damaged_image(tmp_path):
    cache = VariantCache(tmp_path)
    with pytest.raises(CompileError, match="refusing to cache a damaged image"):
        cache.store("k" * 32, _variant(), CUBIN[: len(CUBIN) // 2])
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith(".")]


def test_a_damaged_cached_image_with_matching_digests_is_a_miss_with_a_note(tmp_path):
    """The issue's case: an 8 KiB cut of a cubin stored with its own checksum is never linked again."""
    import hashlib

    cache = VariantCache(tmp_path)
    cache.store("k" * 32, _variant(), CUBIN)
    assert cache.load("k" * 32) is not None
    entry = tmp_path / ("k" * 32)
    cut = CUBIN[: len(CUBIN) // 2]
    (entry / "image.bin").write_bytes(cut)
    (entry / "image.sha256").write_text(hashlib.sha256(cut).hexdigest() + "\n")
    assert cache.load("k" * 32) is None
    assert cache.notes and "holds a damaged image" in cache.notes[0] and "rebuilding it" in cache.notes[0]


def test_variant_images_of_ptx_archs_are_fatbins():
    assert variant_image_problem(_variant(ptx=True), fatbin((2, CUBIN))) is None
    assert "no fatbin header" in variant_image_problem(_variant(ptx=True), CUBIN)


def test_disk_full_note_names_the_folder_short_of_space(tmp_path, monkeypatch):
    class Full:
        f_bavail, f_frsize, f_files, f_favail = 21, 4096, 100, 100

    assert disk_full_note(tmp_path / "not" / "made") == "" or "disk full" in disk_full_note(tmp_path)
    monkeypatch.setattr("tl_aot.common.destinations.os.statvfs", lambda p: Full)
    assert disk_full_note(tmp_path / "not" / "made") == f"disk full at {tmp_path} (84 KiB free)"


def test_a_tool_killed_by_a_signal_on_a_full_disk_is_put_down_to_the_disk(tmp_path, monkeypatch):
    from tl_aot.pipeline.images import _crash_of

    err = FailedProcessError("nvcc (add, sm_90a)", ["/usr/local/cuda/bin/nvcc", "--cubin"], 128 + signal.SIGSEGV, "", "")
    assert "signal SIGSEGV (exit status 139)" in str(err)
    monkeypatch.setattr("tl_aot.pipeline.images.disk_full_note", lambda *p: "")
    assert _crash_of(err, tmp_path) == ""  # a crash with room to spare: nvcc's own error is shown
    monkeypatch.setattr("tl_aot.pipeline.images.disk_full_note", lambda *p: f"disk full at {tmp_path} (12 KiB free)")
    assert (
        _crash_of(err, tmp_path) == f"nvcc died of SIGSEGV with the disk full at {tmp_path} (12 KiB free); free some space and build again"
    )


def test_a_file_system_error_names_the_path_and_the_cause():
    from tl_aot.common.fs_errors import fs_error

    e = OSError(errno.ENAMETOOLONG, "File name too long", "/x" * 10)
    assert "the path is longer than the OS allows" in str(fs_error(e, "create the output folder", Path("/x")))
