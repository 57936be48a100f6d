"""The assembly source embedding a library's images (:mod:`tl_aot.cuda.image_assembly`)."""

from __future__ import annotations

import subprocess

import pytest

from tl_aot.common.escaping import asm_string
from tl_aot.cuda.image_assembly import image_assembly
from tl_aot.cuda.toolchain import find_cxx


def test_images_are_laid_out_by_symbol_whatever_order_they_come_in():
    images = {"b__sm_90a": ("b.bin", b"B"), "a__sm_80": ("a.bin", b"A")}
    text = image_assembly(images, header="h")
    assert text == image_assembly(dict(reversed(images.items())), header="h")
    assert text.index("__tvm_ffi__cubin_a__sm_80:") < text.index("__tvm_ffi__cubin_b__sm_90a:")
    assert '\t.incbin "a.bin"\n__tvm_ffi__cubin_a__sm_80_end:' in text


def test_the_source_changes_when_an_image_does():
    assert image_assembly({"a": ("a.bin", b"one")}, header="h") != image_assembly({"a": ("a.bin", b"two")}, header="h")


def test_a_symbol_that_is_no_identifier_is_refused():
    with pytest.raises(ValueError, match="not a C identifier"):
        image_assembly({"a b": ("a.bin", b"")}, header="h")


def test_asm_string_escapes_quotes_backslashes_and_unprintable_bytes():
    assert asm_string('a "b"\\c\n\u00e9') == '"a \\"b\\"\\\\c\\012\\303\\251"'


def test_the_assembler_reads_an_image_from_a_path_with_any_characters(tmp_path):
    folder = tmp_path / 'with "quotes", \\ a backslash,\na newline, $x #y and \u00e9'
    folder.mkdir()
    data = bytes(range(256)) * 3
    (folder / "img.bin").write_bytes(data)
    (tmp_path / "images.s").write_text(image_assembly({"img__sm_90a": (folder / "img.bin", data)}, header="test"))
    subprocess.run([find_cxx(), "-c", "-x", "assembler", "images.s", "-o", "images.o"], cwd=tmp_path, check=True)
    assert data in (tmp_path / "images.o").read_bytes()
