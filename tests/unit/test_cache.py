"""The variant cache stores paths inside the project relative to it, so copies of a project share entries."""

from __future__ import annotations

import hashlib

from support.elf_images import cubin
from support.records import lowered_variant

from tl_aot.common.metadata import LoweredVariant
from tl_aot.pipeline.cache import ROOT_TOKEN, VariantCache, relocate


def _variant(root: str, header_digest: str) -> LoweredVariant:
    return lowered_variant(
        nvcc_options=(f"-I{root}/include", "-include", f"{root}/include/h.h", "-I/usr/include/cutlass"),
        compile_flags=("-include", f"{root}/include/h.h"),
        inputs=((f"{root}/include/h.h", header_digest),),
        deps=(f"{root}/pkg/k.py",),
    )


def test_relocate_moves_only_paths_under_the_root():
    v = relocate(_variant("/a/proj", "d"), "/a/proj", "/b/x")
    assert v.nvcc_options == ("-I/b/x/include", "-include", "/b/x/include/h.h", "-I/usr/include/cutlass")
    assert v.inputs == (("/b/x/include/h.h", "d"),) and v.deps == ("/b/x/pkg/k.py",)
    # a sibling folder whose name starts with the root's is not inside it
    assert relocate(_variant("/a/proj2", "d"), "/a/proj", "/b").compile_flags == ("-include", "/a/proj2/include/h.h")


def test_an_entry_stored_from_one_copy_loads_in_another_and_checks_its_headers(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for root, text in ((a, b"#define X 1\n"), (b, b"#define X 1\n")):
        (root / "include").mkdir(parents=True)
        (root / "include" / "h.h").write_bytes(text)
    cache = VariantCache(tmp_path / "cache")
    cache.store("key", _variant(str(a), hashlib.sha256(b"#define X 1\n").hexdigest()), cubin("main_kernel"), a)
    assert ROOT_TOKEN in (tmp_path / "cache" / "key" / "variant.json").read_text()
    assert str(a) not in (tmp_path / "cache" / "key" / "variant.json").read_text()

    variant, image = cache.load("key", b)
    assert image == cubin("main_kernel") and variant.compile_flags == ("-include", f"{b}/include/h.h")
    (b / "include" / "h.h").write_bytes(b"#define X 2\n")
    assert cache.load("key", b) is None  # b's header changed: b rebuilds
    assert cache.load("key", a) is not None  # a's did not
