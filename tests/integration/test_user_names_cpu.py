"""Parameters named like generated code's identifiers, under stacked decorators, built for real (CPU) and called on a GPU.

tests/kernels/user_names.toml: four entries of tests/kernels/user_names.py, each two float16 tensors,
a float16 and an int32 scalar, named ``x``/``out``/``half``/``int``, ``NULL``/``self``/``float``/``rt``,
``tvm``/``ffi``/``kernel``/``device``, ``tensor``/``main``/``stream``/``n``; dims named ``out`` (like the
tensor it sizes), ``args`` and ``n`` (like a scalar); reached through ``functools.wraps`` over ``@tilelang.jit(out_idx=...)``,
``@autotune`` + ``@tilelang.jit``, ``functools.wraps`` over ``lru_cache`` and a closure's prim_func.
One build for the file: the launcher compiles, the manifest, ``inspect``, the header, the run-time
checks and the torch op schemas all keep the names as the user spelled them.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from support.builds import build_spec
from support.helpers import ok, tl_aot_cli

pytest.importorskip("tilelang")

KERNELS = Path(__file__).parents[1] / "kernels"
#: entry -> its parameters, as spelled in tests/kernels/user_names.py
PARAMS = {
    "jit_out": ["x", "half", "int", "out"],
    "tuned": ["NULL", "self", "float", "rt"],
    "cached": ["tvm", "ffi", "kernel", "device"],
    "closure_prim": ["tensor", "main", "stream", "n"],
}


@pytest.fixture(scope="module")
def built(tmp_path_factory, cache_dir):
    return build_spec(KERNELS / "user_names.toml", tmp_path_factory, cache_dir)


def test_the_manifest_keeps_every_name_as_spelled(built):
    result, lib = built
    entries = {e.name: e for e in result.manifest.entries}
    assert {name: [p.name for p in e.params] for name, e in entries.items()} == PARAMS
    assert {name: [p.dtype for p in e.params if p.kind == "scalar"] for name, e in entries.items()} == dict.fromkeys(
        PARAMS, ["float16", "int32"]
    )
    # a dim named like its tensor, or like a scalar, is numbered as TileLang's CUDA numbers it; `args` is free
    assert {name: [s.name for s in e.symbols] for name, e in entries.items()} == {
        "jit_out": ["out_1"],
        "tuned": [],
        "cached": ["args"],
        "closure_prim": ["n_1"],
    }
    assert lib.signature("jit_out").signature() == "jit_out(x: float16[out_1], half: float16, int: int32) -> out: float16[out_1]"
    assert lib.signature("tuned").signature() == "tuned(NULL: float16[256], float: float16, rt: int32) -> self: float16[256]"


def test_inspect_names_the_params_as_spelled(built):
    """``python -m tl_aot inspect lib.so`` as a process: each param, dim and the config the autotuned entry was built with."""
    result, _ = built
    text = ok(tl_aot_cli("inspect", result.library)).stdout
    assert "closure_prim(tensor: float16[n_1], main: float16[n_1], stream: float16, n: int32)" in text
    for name, params in PARAMS.items():
        block = text.split(f"\n{name}(", 1)[1].split("\n\n", 1)[0]
        assert [line.split()[1].rstrip(":") for line in block.splitlines() if line.startswith("  param ")] == params
    assert "  dynamic: out_1 = x.shape[0]" in text and "  dynamic: n_1 = tensor.shape[0]" in text
    assert "config (default): block=128" in text
    # each entry's path through its decorators, by the names the user gave them (a wrapper over a jit object included)
    assert "built from jit_out() -> main  [" in text and "built from tuned(block=128)  [" in text
    assert "built from cached() -> prim_func  [" in text and "built from prim_func  [" in text


def test_the_header_compiles_in_a_program_calling_every_overload(built, tmp_path):
    """A C++ user's program: the names the header had to change (``int``, ``float``, ``NULL``, ``main``, the stream) still call."""
    pytest.importorskip("tvm_ffi")
    from tl_aot.cuda.toolchain import find_cxx, tvm_ffi_paths

    result, _ = built
    header = result.header.read_text()
    assert "jit_out(::tvm::ffi::TensorView x, double half, int32_t int_, ::tvm::ffi::TensorView out, void* stream);" in header
    assert "closure_prim(::tvm::ffi::TensorView tensor, ::tvm::ffi::TensorView main_, double stream, int32_t n, void* stream_);" in header
    prog = tmp_path / "prog.cc"
    prog.write_text(
        f'#include <cstddef>\n#include "{result.header}"\n'
        "using namespace tl_aot::tl_user_names;\nvoid use(::tvm::ffi::TensorView a, ::tvm::ffi::TensorView b, void* s) {\n"
        "  ::tvm::ffi::Tensor r = jit_out(a, 0.5, 3);\n  jit_out(a, 0.5, 3, b, s);\n"
        "  ::tvm::ffi::Tensor t = tuned(a, 0.5, 3, s);\n  tuned(a, b, 0.5, 3);\n"
        "  cached(a, b, 0.5, 3);\n  closure_prim(a, b, 0.5, 3, s);\n  (void)r; (void)t;\n}\n"
    )
    p = tvm_ffi_paths()
    cmd = [find_cxx(), "-std=c++17", "-fsyntax-only", "-I", p["include"], "-I", p["dlpack"], str(prog)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_argument_errors_name_the_parameter_as_spelled(built):
    torch = pytest.importorskip("torch")
    _, lib = built
    x = torch.zeros(300, dtype=torch.float16)
    with pytest.raises(TypeError, match=r"^jit_out: argument 'int' expected an int \(int32\), got float"):
        lib.jit_out(x, 1.0, 2.5)
    with pytest.raises(TypeError, match=r"^tuned: argument 'float' expected a float \(float16\)"):
        lib.tuned(x, "half", 2)
    with pytest.raises(ValueError, match=r"^cached: argument 'tvm' expected a CUDA tensor, got a tensor on cpu"):
        lib.cached(x, x, 1.0, 1)


def test_torch_ops_take_the_names_as_spelled(built):
    """Schemas with arguments named ``self``, ``float``, ``int``, ``NULL``; the fake implementation sizes ``out``."""
    torch = pytest.importorskip("torch")
    _, lib = built
    ops = lib.register_torch_ops("tlun_" + uuid.uuid4().hex[:8], backend="python")
    schemas = {name: str(getattr(ops, name).default._schema).split("::", 1)[1] for name in PARAMS}
    assert schemas == {
        "jit_out": "jit_out(Tensor x, float half, int int) -> Tensor",
        "tuned": "tuned(Tensor NULL, float float, int rt) -> Tensor",
        "cached": "cached(Tensor(a!) tvm, Tensor(b!) ffi, float kernel, int device) -> ()",
        "closure_prim": "closure_prim(Tensor(a!) tensor, Tensor(b!) main, float stream, int n) -> ()",
    }
    out = ops.jit_out(torch.empty(300, dtype=torch.float16, device="meta"), 0.5, 3)
    assert (out.shape, out.dtype) == ((300,), torch.float16)


@pytest.mark.gpu
def test_every_entry_matches_torch_on_the_gpu(built):
    import torch

    _, lib = built
    scale, shift = 0.1 + 2.0**-12, -3  # not a float16: the launcher rounds it as TileLang does
    h, s = torch.tensor(scale, dtype=torch.float16), torch.tensor(float(shift), dtype=torch.float16)

    def want(x):
        return x * h.cuda() + s.cuda()

    x = torch.randn(300, device="cuda", dtype=torch.float16)  # not a multiple of the block: the bounds check counts
    torch.testing.assert_close(lib.jit_out(x, scale, shift), want(x), rtol=1e-3, atol=1e-2)
    x256 = x[:256].contiguous()
    torch.testing.assert_close(lib.tuned(x256, scale, shift), want(x256), rtol=1e-3, atol=1e-2)
    for name in ("cached", "closure_prim"):
        y = torch.full_like(x, 7.0)
        getattr(lib, name)(x, y, scale, shift)
        torch.testing.assert_close(y, want(x), rtol=1e-3, atol=1e-2, msg=name)
