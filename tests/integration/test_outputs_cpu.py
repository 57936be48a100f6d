"""Entries that return their outputs (out_idx, T.empty, a spec's out_idx): built and checked here, without a GPU.

Calls use tensors that claim to be on cuda:0 (fake_cuda): every argument check runs; a call that
passes them fails at allocation (no torch allocator for these tensors) or at the missing driver.
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
def outputs(tmp_path_factory, cache_dir):
    return build_spec(KERNELS / "outputs.toml", tmp_path_factory, cache_dir)


def test_outputs_come_from_out_idx_t_empty_and_the_spec(outputs):
    _, lib = outputs
    outs = {e.name: [p.name for p in e.outputs] for e in lib.manifest.entries}
    assert outs == {"scale_add": ["y"], "row_stats": ["total", "peak"], "axpy_first": ["out"], "scale_add_inplace": []}
    assert lib.signature("scale_add").signature() == "scale_add(x: float16[m, 1024], b: float16[1024]) -> y: float16[m, 1024]"
    assert lib.signature("row_stats").signature() == "row_stats(x: float32[64, 512]) -> (total: float32[64], peak: float32[64])"
    assert lib.signature("axpy_first").signature() == "axpy_first(a: float32[4096], alpha: float32, c: float32[4096]) -> out: float32[4096]"


def test_inspect_and_header_mark_the_outputs(outputs):
    result, lib = outputs
    text = ok(tl_aot_cli("inspect", lib.path)).stdout
    assert "param y: tensor float16[m, 1024] (output: returned when the call passes the inputs alone)" in text
    assert "param y: tensor float16[m, 1024]\n" in text  # the in-place entry: an ordinary parameter
    header = result.header.read_text()
    assert "::tvm::ffi::Tensor scale_add(::tvm::ffi::TensorView x, ::tvm::ffi::TensorView b);" in header
    assert "std::tuple<::tvm::ffi::Tensor, ::tvm::ffi::Tensor> row_stats(::tvm::ffi::TensorView x, void* stream);" in header
    assert "void scale_add(::tvm::ffi::TensorView x, ::tvm::ffi::TensorView b, ::tvm::ffi::TensorView y);" in header


def test_wrong_argument_counts_name_both_forms(outputs):
    _, lib = outputs
    with pytest.raises(
        TypeError, match=r"scale_add\(\) takes its inputs \(x, b\) and returns its outputs, or takes every parameter \(x, b, y\)"
    ):
        lib.scale_add(FakeCudaTensor([4, 1024], "float16"))
    with pytest.raises(TypeError, match="got 5 arguments"):
        lib.scale_add(*[FakeCudaTensor([4, 1024], "float16")] * 5)


def test_outputs_passed_explicitly_are_checked(outputs):
    _, lib = outputs
    x, b = FakeCudaTensor([4, 1024], "float16"), FakeCudaTensor([1024], "float16")
    with pytest.raises(
        ValueError, match=r"scale_add: argument 'y' expected shape \[m, 1024\] with dim 0 = m = 4 \(from 'x' dim 0\), got \[5, 1024\]"
    ):
        lib.scale_add(x, b, FakeCudaTensor([5, 1024], "float16"))
    with pytest.raises(TypeError, match="scale_add: argument 'y' expected dtype float16"):
        lib.scale_add(x, b, FakeCudaTensor([4, 1024], "float32"))


def test_allocating_without_an_allocator_says_how_to_fix_it_and_the_library_stays_usable(outputs):
    _, lib = outputs
    x, b = FakeCudaTensor([4, 1024], "float16"), FakeCudaTensor([1024], "float16")
    for _ in range(2):
        with pytest.raises(RuntimeError, match="scale_add: allocating 'y' needs a tensor allocator and none is set: call from torch"):
            lib.scale_add(x, b)
    with pytest.raises(ValueError, match="argument 'b' expected shape"):  # inputs are checked before anything is allocated
        lib.scale_add(x, FakeCudaTensor([1023], "float16"))


def test_inputs_plus_stream_and_every_parameter_are_told_apart(outputs):
    """axpy_first(out, a, alpha, c): three inputs + a stream and all four parameters have the same count."""
    _, lib = outputs
    a, c = FakeCudaTensor([4096], "float32"), FakeCudaTensor([4096], "float32")
    with pytest.raises(RuntimeError, match="allocating 'out'"):  # inputs, then a stream: allocates
        lib.axpy_first(a, 2.0, c, None)
    with pytest.raises(Exception) as e:  # every parameter: passes every check, then needs the GPU
        lib.axpy_first(FakeCudaTensor([4096], "float32"), a, 2.0, c)
    assert "allocating" not in str(e.value) and "argument" not in str(e.value)


def test_build_refuses_outputs_it_cannot_allocate(tmp_path, cache_dir):
    src = tmp_path / "k.py"
    src.write_text(
        "import tilelang.language as T\n\n\n"
        "def k(N=256):\n"
        "    n = T.dynamic('n')\n\n"
        "    @T.prim_func\n"
        "    def main(a: T.Tensor((N,), 'float32'), s: T.float32, o: T.Tensor((n,), 'float32')):\n"
        "        with T.Kernel(1, threads=128) as bx:\n"
        "            for i in T.Parallel(N):\n"
        "                o[i] = a[i] * s\n\n"
        "    return main\n"
    )

    def build(*extra):
        return tl_aot_cli("build", f"{src}:k", "--arch", "90a", "-o", tmp_path / "out", "--cache-dir", cache_dir, *extra)

    no_input_gives = "output 'o' has dim 'n', which no input tensor's shape or scalar argument gives"
    cases = {
        ("--out-idx", "o"): no_input_gives,
        ("--out-idx", "s"): "out_idx 's' is the scalar 's'; only tensors can be outputs",
        ("--out-idx", "3"): "out_idx 3 is out of range for 3 parameters (a, s, o)",
        ("--out-idx", "q"): "out_idx names 'q', which is not a parameter (a, s, o)",
        # every tensor an output is fine (allocated on the current device), but n must still come from somewhere
        ("--out-idx", "0", "--out-idx", "2"): no_input_gives,
    }
    for extra, message in cases.items():
        proc = build(*extra)
        assert proc.returncode == 1, proc.stderr
        assert message in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
