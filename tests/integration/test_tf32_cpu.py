"""A ``T.tfloat32`` tensor parameter builds, and is bound as TileLang's host code binds it.

DeepSeek's mHC pre-GEMM (TileLang's ``examples/deepseek_mhc/example_mhc_pre.py``) declares its weight
``T.Tensor(..., T.tfloat32)``; TileLang's JIT takes it as a ``torch.float32`` tensor. Before, the
build left every such variant out ("tensor dtype custom[tfloat32] is not supported by tl_aot
launchers"). ``tests/kernels/tf32.toml`` (one kernel of ours of that shape) is built here on the
CPU; the launcher's accepted DLPack dtypes are checked against TileLang's own host code. The call
itself is in ``tests/gpu/test_tf32_gpu.py``.
"""

from __future__ import annotations

import json
import re

import pytest
from support.helpers import KERNELS, ok, tl_aot_here

pytest.importorskip("tilelang")


def test_a_tfloat32_tensor_parameter_builds_and_is_a_float32_tensor_to_the_caller(tmp_path, cache_dir):
    ok(tl_aot_here("build", "--spec", KERNELS / "tf32.toml", "-o", tmp_path, "--cache-dir", cache_dir))
    text = ok(tl_aot_here("inspect", tmp_path / "libtl_tf32.so")).stdout
    assert "tf32_scale_rows(x: float32[m, 64], w: tfloat32[64]) -> out: float32[m, 64]" in text
    assert "param w: tensor tfloat32[64]" in text  # as TileLang users write it (T.tfloat32), not TVM's custom[tfloat32]
    man = json.loads(ok(tl_aot_here("inspect", "--json", tmp_path / "libtl_tf32.so")).stdout)
    (entry,) = man["entries"]
    assert [(p["name"], p["dtype"]) for p in entry["params"]] == [("x", "float32"), ("w", "custom[tfloat32]"), ("out", "float32")]
    assert not man["left_out"]


def test_the_dlpack_dtypes_a_tfloat32_tensor_takes_are_tilelangs_own():
    """TileLang's host code asserts (code, bits, lanes) of a tfloat32 argument: tl_aot's table names the same pairs."""
    import importlib.util

    import tilelang
    from tvm.target import Target

    from tl_aot.common.cpp_spelling import DLPACK_DTYPES
    from tl_aot.runtime.torch_fakes import TORCH_DTYPES

    spec = importlib.util.spec_from_file_location("tl_aot_test_tf32", KERNELS / "tf32.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    with target:
        host = str(tilelang.lower(module.tf32_scale_rows.get_tir(), target=target).host_mod)
    check = next(line for line in host.splitlines() if "input w dtype mismatch" in line)
    pairs = re.findall(
        r'w_handle, 0, 5, "uint8"\) == T\.uint8\((\d+)\) and T\.tvm_struct_get\(w_handle, 0, 6, "uint8"\) == T\.uint8\((\d+)\)', check
    )
    assert sorted((int(c), int(b)) for c, b in pairs) == sorted(DLPACK_DTYPES["custom[tfloat32]"])
    assert DLPACK_DTYPES["custom[tfloat32]"][0] == (2, 32) and TORCH_DTYPES["custom[tfloat32]"] == "float32"
