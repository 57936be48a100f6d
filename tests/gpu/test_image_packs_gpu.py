"""A library with image packs on a real GPU (marker ``gpu``): the first call loads its image from the pack.

The testlib's GEMM and elementwise entries, built with ``image_packs`` for sm_80 and sm_90a (CUDA 13:
compressed fatbins the driver decompresses): results match torch; with the pack of the GPU's arch
moved away, the first call names it and the ``pip install`` that brings it; with a pack of another
build in its place, the call refuses it.
"""

from __future__ import annotations

import shutil

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

SPEC = """
[library]
name = "tl_packs_gpu"
archs = ["80", "90a"]

[[entry]]
name = "gemm_f16"
source = "{kernels}/gemm.py"
function = "matmul"
args = {{ M = 1024, N = 1024, K = 1024 }}

[[entry]]
name = "add_one"
source = "{kernels}/elementwise.py"
function = "add_one"
"""


@pytest.fixture(scope="module")
def packs_lib(tmp_path_factory, cache_dir):
    """The library's folder (``libtl_packs_gpu.so`` and its packs), built with image packs."""
    from pathlib import Path

    from tl_aot.pipeline.image_packs import ImagePacks
    from tl_aot.pipeline.library import build_library
    from tl_aot.spec import load_spec_file

    kernels = Path(__file__).resolve().parents[1] / "kernels"
    out = tmp_path_factory.mktemp("packs_gpu")
    spec = out / "packs.toml"
    spec.write_text(SPEC.format(kernels=kernels))
    packs = ImagePacks(hint="pip install 'tl-packs-gpu-{tag}==1.0'")
    return build_library(load_spec_file(spec), out_dir=out, cache_dir=cache_dir, log=None, image_packs=packs).library


def _label() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}{'a' if major >= 9 else ''}" if (major, minor) in ((8, 0), (9, 0)) else "sm_80"


def _fresh(lib_path, tmp_path):
    """A copy of the library and its packs in ``tmp_path`` (a process loads a library once per path)."""
    import tl_aot

    for f in lib_path.parent.glob(lib_path.stem + "*"):
        shutil.copy(f, tmp_path / f.name)
    return tl_aot.load(tmp_path / lib_path.name), tmp_path


def test_entries_load_their_images_from_the_packs_and_match_torch(packs_lib, tmp_path):
    lib, _ = _fresh(packs_lib, tmp_path)
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    c = torch.empty(1024, 1024, device="cuda", dtype=torch.float16)
    lib.gemm_f16(a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-1)
    x = torch.arange(1000, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    lib.add_one(x, y)
    torch.testing.assert_close(y, x + 1)


def test_a_missing_pack_is_named_with_what_to_install(packs_lib, tmp_path):
    lib, folder = _fresh(packs_lib, tmp_path)
    label = _label()
    (folder / f"libtl_packs_gpu.{label}.tlpack").unlink()
    x = torch.zeros(16, device="cuda")
    with pytest.raises(RuntimeError, match=rf"which is not installed.*pip install 'tl-packs-gpu-{label.replace('_', '')}==1\.0'"):
        lib.add_one(x, torch.empty_like(x))


def test_a_pack_of_another_build_is_refused(packs_lib, tmp_path):
    from tl_aot.pipeline.image_packs import _pack, read_pack

    lib, folder = _fresh(packs_lib, tmp_path)
    pack = folder / f"libtl_packs_gpu.{_label()}.tlpack"
    held = read_pack(pack.read_bytes())
    pack.write_bytes(_pack(held.label, b"\x01" * 32, {bytes.fromhex(d): i for d, i in held.images.items()}))
    x = torch.zeros(16, device="cuda")
    with pytest.raises(RuntimeError, match="belongs to another build"):
        lib.add_one(x, torch.empty_like(x))
