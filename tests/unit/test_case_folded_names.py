"""Entries whose names differ only by case (``Copy``, ``copy``) keep separate build files on a case-insensitive file system."""

from types import SimpleNamespace

import pytest

from tl_aot.common.arch import parse_arch
from tl_aot.common.file_names import case_safe_stem
from tl_aot.pipeline.images import _unit

NAMES = ["copy", "Copy", "COPY", "cOpY", "copy_2", "Copy_2", "gemm__sm_90a", "Gemm__sm_90a"]


def test_stems_stay_distinct_when_case_is_folded():
    stems = [case_safe_stem(n) for n in NAMES]
    assert len({s.casefold() for s in stems}) == len(NAMES)
    assert case_safe_stem("copy") == "copy" and case_safe_stem("gemm__sm_90a") == "gemm__sm_90a"  # the usual names unchanged
    assert case_safe_stem("Copy") == case_safe_stem("Copy")  # stable: a rebuild finds its own files


def test_nvcc_sources_of_case_twins_are_two_files():
    arch = parse_arch("90a")
    stems = [_unit(SimpleNamespace(entry=n, cuda_source=""), arch).stem for n in ("Copy", "copy")]
    assert stems[1] == "copy__sm_90a" and stems[0].startswith("Copy__sm_90a-")
    assert stems[0].casefold() != stems[1].casefold()


def test_embedded_images_of_case_twins_are_two_files(tmp_path):
    from tl_aot.cuda.host_compile import embed_images
    from tl_aot.cuda.toolchain import find_cxx

    try:
        find_cxx()
    except Exception as e:  # noqa: BLE001 - no host compiler on this machine
        pytest.skip(str(e))
    upper, lower = b"upper" * 1000, b"lower" * 1000  # images of their own files (small ones share one)
    embed_images(tmp_path, {"Copy__sm_90a": upper, "copy__sm_90a": lower}, "images.o", what="test")
    bins = {p.name: p.read_bytes() for p in tmp_path.glob("*.bin")}
    assert len({n.casefold() for n in bins}) == 2
    assert bins["copy__sm_90a.bin"] == lower and bins[f"{case_safe_stem('Copy__sm_90a')}.bin"] == upper
    assert (tmp_path / "images.o").stat().st_size > 0
