"""The link stage with many images: one assembled object holds them all, each found where the launcher looks.

A library of 200 tiny images (one per entry and arch, as a 50-kernel, 4-arch build has) is linked
by :func:`tl_aot.pipeline.link.link`, the stage every front end ends with, in a work folder whose
name has spaces, quotes, a backslash and non-ASCII letters. Its launcher is a small unit that names
every image symbol as the generated launcher's image tables do (``extern "C" const char
__tvm_ffi__cubin_<symbol>[]``) and hands their addresses out; the library is loaded and the bytes
at each address compared with the image. The previous embedding (an ``ld -r`` of the object so
far per image) took 7 s for 100 images on a loaded 2-core machine, growing with the square; this
link takes about a second (``bench/link_scale.py``).
"""

from __future__ import annotations

import ctypes
import dataclasses
import random
from pathlib import Path

import pytest
from support.golden import golden_manifest

from tl_aot.cuda.host_compile import compile_host
from tl_aot.cuda.image_assembly import IMAGE_PREFIX
from tl_aot.pipeline.link import link

pytest.importorskip("tvm_ffi")

ARCHS = ("sm_80", "sm_89", "sm_90a", "sm_100a")
ODD = 'lib dir with "quotes", a \\ backslash, $HOME #hash and é'


def _images(n: int) -> dict[str, bytes]:
    rng = random.Random(7)
    return {f"k{i // len(ARCHS):03d}__{ARCHS[i % len(ARCHS)]}": rng.randbytes(rng.randint(1, 300)) for i in range(n)}


def _launcher(folder: Path, symbols: list[str]) -> Path:
    """A launcher object naming each image symbol, with ``image_at(i)``: the address of the i-th (as linked)."""
    folder.mkdir(parents=True)
    decls = "".join(f'extern "C" const char {IMAGE_PREFIX}{s}[];\n' for s in symbols)
    table = ", ".join(f"{IMAGE_PREFIX}{s}" for s in symbols)
    text = f"{decls}static const char* const images[] = {{{table}}};\n"
    text += 'extern "C" __attribute__((visibility("default"))) const char* image_at(int i) { return images[i]; }\n'
    (folder / "launcher.cc").write_text(text)
    compile_host(folder, "launcher.cc", "launcher.o", what="compiling the test launcher")
    return folder / "launcher.o"


def _link(work: Path, images: dict[str, bytes], launcher: Path, runtime: Path, cache: Path) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    manifest = dataclasses.replace(golden_manifest(), library="many")
    return link("many", work, manifest, images, (launcher, runtime), cache=cache, key="many-images")


def test_200_images_link_and_each_is_at_its_symbol_reproducibly(tmp_path, session_runtime, cache_dir):
    import tvm_ffi  # noqa: F401 (libtvm_ffi loaded: the library needs it)

    images = _images(200)
    symbols = sorted(images)
    launcher = _launcher(tmp_path / "objects", symbols)
    lib_path = _link(tmp_path / ODD / "work", images, launcher, session_runtime, cache_dir)
    lib = ctypes.CDLL(str(lib_path))
    lib.image_at.restype = ctypes.c_void_p
    wrong = [s for i, s in enumerate(symbols) if ctypes.string_at(lib.image_at(i), len(images[s])) != images[s]]
    assert not wrong, f"{len(wrong)} of 200 images not at their symbols, e.g. {wrong[0]}"
    # Kept local, as embed_cubin's localized symbols were: the library exports no image.
    assert not hasattr(lib, f"{IMAGE_PREFIX}{symbols[0]}")
    assert not hasattr(lib, f"{IMAGE_PREFIX}{symbols[0]}_end")
    # Another folder, another order of the same images: the same library, byte for byte.
    again = _link(tmp_path / "elsewhere", dict(reversed(images.items())), launcher, session_runtime, cache_dir)
    assert again.read_bytes() == lib_path.read_bytes()


def test_a_rebuild_with_one_image_changed_embeds_the_new_bytes(tmp_path, session_runtime, cache_dir):
    images = _images(8)
    launcher = _launcher(tmp_path / "objects", sorted(images))
    work = tmp_path / "work"
    _link(work, images, launcher, session_runtime, cache_dir)
    name = max(images, key=lambda s: len(images[s]))
    changed = {**images, name: b"new image bytes " + images[name][::-1]}
    linked = _link(work, changed, launcher, session_runtime, cache_dir).read_bytes()  # the same work folder, as a rebuild links
    assert changed[name] in linked
    assert images[name] not in linked
