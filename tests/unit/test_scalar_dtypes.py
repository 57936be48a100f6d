"""Scalar kernel parameters: the C++ type each TileLang dtype is passed as, and float16's conversion.

TileLang 0.1.15 passes int8..int64, uint8..uint64, bool, float16, float32 and float64 scalars (its
packed call casts the call's int64 or double); it refuses bfloat16 and float8/float4 scalars
(MakePackedAPI asserts ``dtype.is_float()``). tl_aot's launchers take the same set.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from tl_aot.codegen.launcher_args import scalar_ctype, scalar_local
from tl_aot.common.errors import LoweringError
from tl_aot.common.metadata import Param
from tl_aot.cuda.toolchain import RUNTIME_INCLUDE
from tl_aot.lower.cexpr import ctype_of

PASSED = {
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint8": "uint8_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
    "bool": "bool",
    "float16": "rt::f16",
    "float32": "float",
    "float64": "double",
}
REFUSED = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn")


@pytest.mark.parametrize("dtype", sorted(PASSED))
def test_every_scalar_dtype_tilelang_passes_has_the_kernels_c_type(dtype):
    assert ctype_of(dtype, "p") == PASSED[dtype]
    assert scalar_ctype(Param("alpha", "scalar", dtype), "e") == PASSED[dtype]


def test_a_float16_scalar_is_read_as_the_calls_double_and_converted_by_the_runtime():
    line = scalar_local(Param("alpha", "scalar", "float16"), 2, "e")
    assert line == "const rt::f16 a_alpha = static_cast<rt::f16>(x.a[2].f)"


@pytest.mark.parametrize("dtype", REFUSED)
def test_a_scalar_tilelang_cannot_pass_is_refused_naming_parameter_and_dtype(dtype):
    with pytest.raises(LoweringError) as e:
        ctype_of(dtype, "entry 'k' (sm_90a): parameter 'alpha'")
    msg = str(e.value)
    assert msg.startswith(f"entry 'k' (sm_90a): parameter 'alpha': scalar dtype {dtype} cannot be passed")
    assert "float16" in msg and "pass it as float32" in msg


_PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include "tl_aot/runtime/half.h"
int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) std::printf("%u\n", tl_aot::rt::f16(std::strtod(argv[i], nullptr)).bits);
}
"""


def test_f16_rounds_a_double_as_numpy_does_bit_for_bit(tmp_path):
    """rt::f16 against numpy's double -> float16 (round to nearest, ties to even) on edges and a seeded sample."""
    from tl_aot.cuda.toolchain import find_cxx

    src, exe = tmp_path / "f16.cc", tmp_path / "f16"
    src.write_text(_PROGRAM)
    subprocess.run([find_cxx(), "-std=c++17", "-O1", "-I", str(RUNTIME_INCLUDE), str(src), "-o", str(exe)], check=True)
    edges = [0.0, -0.0, 1.0, -2.5, 65504.0, 65519.99, 65520.0, 1e300, -1e300, float("inf"), float("-inf"), 6.1e-5]
    edges += [2.0**-24, 2.0**-25, 2.0**-25 * 1.0000001, 3 * 2.0**-25, 2.0**-14 - 2.0**-25, 1 + 2.0**-11, 1 + 3 * 2.0**-11]
    rng = np.random.default_rng(47)
    sample = np.concatenate([np.array(edges), rng.standard_normal(300) * 10.0 ** rng.integers(-9, 6, 300)])
    out = subprocess.run([str(exe), *(repr(float(v)) for v in sample)], capture_output=True, text=True, check=True).stdout
    got = np.array([int(s) for s in out.split()], dtype=np.uint16)
    with np.errstate(over="ignore"):  # +-1e300 -> +-inf, as the launcher gives
        want = sample.astype(np.float16).view(np.uint16)
    assert (got == want).all(), [(v, g, w) for v, g, w in zip(sample, got, want) if g != w][:5]
    nan = subprocess.run([str(exe), "nan"], capture_output=True, text=True, check=True).stdout
    assert np.isnan(np.array([int(nan)], dtype=np.uint16).view(np.float16)[0])
