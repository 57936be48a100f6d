"""One entry, many specialisations (tests/kernels/specialised.toml), built and dispatched here without a GPU.

Calls pass tensors that claim to be on cuda:0 (fake_cuda): the entry picks a specialisation, whose
own checks then run; an output of the wrong shape makes the picked one say which it is.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.builds import build_spec
from support.fake_cuda import FakeCudaTensor
from support.helpers import ok, tl_aot_cli

pytest.importorskip("tilelang")

KERNELS = Path(__file__).parents[1] / "kernels"


@pytest.fixture(scope="module")
def special(tmp_path_factory, cache_dir):
    return build_spec(KERNELS / "specialised.toml", tmp_path_factory, cache_dir)


def picked(lib, a_shape, b_shape, dtype="float16"):
    """Which specialisation the gemm entry picks for A, B (its error for a C of the wrong shape names it)."""
    a, b = FakeCudaTensor(a_shape, dtype), FakeCudaTensor(b_shape, dtype)
    with pytest.raises(ValueError) as e:
        lib.gemm(a, b, FakeCudaTensor([a_shape[0], 3], dtype))
    text = str(e.value)
    assert "argument 'C' expected shape" in text, text
    return text.split(":")[0]


def test_one_function_per_entry(special):
    result, lib = special
    assert sorted(lib.entries) == ["gemm", "rms_norm"]
    assert len(lib.specialisations("gemm")) == 8 and len(lib.specialisations("rms_norm")) == 4
    assert not hasattr(lib, "gemm__s0")
    header = result.header.read_text()
    assert header.count("::tvm::ffi::Tensor gemm(::tvm::ffi::TensorView A, ::tvm::ffi::TensorView B);") == 1
    assert "gemm(A: bfloat16[m, 512], B: bfloat16[512, 2048]) -> C: bfloat16[m, 2048]" in header
    text = ok(tl_aot_cli("inspect", lib.path)).stdout
    assert "library tl_special: 2 entries" in text
    assert "gemm: 8 specialisations, one function picking by the input tensors' dtypes and sizes" in text
    assert "when m in [1, 64]   [specialisation 1/8]" in text and "(fallback)   [specialisation 8/8]" in text


def test_dtype_static_sizes_ranges_and_the_fallback_pick(special):
    _, lib = special
    assert picked(lib, [64, 1024], [1024, 1024]) == "gemm (specialisation 1/8)"  # m in [1, 64]
    assert picked(lib, [65, 1024], [1024, 1024]) == "gemm (specialisation 2/8)"  # m in [65, ...]
    assert picked(lib, [1, 512], [512, 2048]) == "gemm (specialisation 3/8)"
    assert picked(lib, [7, 1024], [1024, 1024], "bfloat16") == "gemm (specialisation 5/8)"
    assert picked(lib, [7, 2048], [2048, 512], "bfloat16") == "gemm (specialisation 7/8)"
    assert picked(lib, [7, 300], [300, 700]) == "gemm (specialisation 8/8)"  # fp16, no static match: the fallback


def test_nothing_matching_lists_what_was_built_and_launches_nothing(special):
    _, lib = special
    a, b = FakeCudaTensor([7, 300], "bfloat16"), FakeCudaTensor([300, 700], "bfloat16")
    with pytest.raises(ValueError) as e:
        lib.gemm(a, b)
    text = str(e.value)
    assert text.startswith("gemm: no specialisation takes A: bfloat16[7, 300], B: bfloat16[300, 700]; built: ")
    assert "A: bfloat16[m, 1024], B: bfloat16[1024, 1024]" in text and "A: float16[m, k], B: float16[k, n] (fallback)" in text
    with pytest.raises(ValueError, match="rms_norm: no specialisation takes x: float16\\[4, 1000\\], w: float16\\[1000\\]"):
        lib.rms_norm(FakeCudaTensor([4, 1000], "float16"), FakeCudaTensor([1000], "float16"))
    with pytest.raises(TypeError, match="gemm\\(\\) takes its inputs \\(A, B\\)"):
        lib.gemm(a)
    with pytest.raises(TypeError, match="argument 'A' expected a tensor"):  # not a tensor: named by the first specialisation
        lib.gemm(3, b)


def _lib_spec(tmp_path, specialisations: str):
    (tmp_path / "k.toml").write_text(
        f'[library]\nname = "bad"\narchs = ["90a"]\n[[entry]]\nname = "norm"\nsource = "{KERNELS / "specialised.py"}"\n'
        f'function = "rms_norm"\nspecialisations = {specialisations}\n'
    )
    return tmp_path / "k.toml"


@pytest.mark.parametrize(
    ("specialisations", "message"),
    [
        (
            "[{ args = { N = 2048 } }, { args = { N = 2048, threads = 128 } }]",
            "specialisations #1 (x: float16[m, 2048], w: float16[2048]) and "
            "#2 (x: float16[m, 2048], w: float16[2048]) can both take the same call",
        ),
        (
            "[{ args = { N = 2048 }, when = { q = 4 } }]",
            "when names 'q', which is not a dynamic dim of this specialisation (its dynamic dims: m)",
        ),
        ("[{ args = { N = 2048 }, when = { m = [64, 1] } }]", "when.m = [64, 1]: expected a positive int or a [lo, hi] range"),
    ],
)
def test_bad_specialisations_are_build_errors(tmp_path, cache_dir, specialisations, message):
    from tl_aot.common.errors import TlAotError
    from tl_aot.pipeline.library import build_library
    from tl_aot.spec import load_spec_file

    with pytest.raises(TlAotError) as e:
        build_library(load_spec_file(_lib_spec(tmp_path, specialisations)), out_dir=tmp_path / "o", cache_dir=cache_dir, log=None)
    assert message in str(e.value)


def test_a_lone_specialisation_still_holds_to_its_range(tmp_path, cache_dir):
    import tl_aot
    from tl_aot.pipeline.library import build_library
    from tl_aot.spec import load_spec_file

    spec = load_spec_file(_lib_spec(tmp_path, "[{ args = { N = 2048 }, when = { m = [1, 8] } }]"))
    lib = tl_aot.load(build_library(spec, out_dir=tmp_path / "o", cache_dir=cache_dir, log=None).library)
    w = FakeCudaTensor([2048], "float16")
    with pytest.raises(
        ValueError, match=r"norm: no specialisation takes x: float16\[9, 2048\], w: float16\[2048\]; built: .*\(m in \[1, 8\]\)"
    ):
        lib.norm(FakeCudaTensor([9, 2048], "float16"), w)
    with pytest.raises(RuntimeError, match="allocating 'y'"):  # m = 8 fits: picked, checked, then needs an allocator
        lib.norm(FakeCudaTensor([8, 2048], "float16"), w)
