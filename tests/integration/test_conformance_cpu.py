"""The conformance kernels (written as TileLang users write them) build unchanged, here without a GPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.builds import build_spec
from support.fake_cuda import FakeCudaTensor
from support.helpers import ok, tl_aot_cli
from support.tilelang_release import tilelang_at_least

pytest.importorskip("tilelang")

KERNELS = Path(__file__).parents[1] / "kernels" / "conformance"


#: TileLang 0.1.12 refuses persistent_gemm itself: its warp-specialisation pass stops at "ProducerConsumerWS: failed to
#: replace pipeline loop" (``tilelang.lower`` alone, no tl_aot); 0.1.13 on lowers it.
PERSISTENT_GEMM_LOWERS = tilelang_at_least("0.1.13")
REFUSAL = "InternalError: Check failed: (replaced.defined()) is false: ProducerConsumerWS: failed to replace pipeline loop"


@pytest.fixture(scope="module")
def conformance(tmp_path_factory, cache_dir):
    """The library; on a TileLang that refuses persistent_gemm, built keep-going, its refusal recorded as TileLang words it."""
    result, lib = build_spec(KERNELS / "conformance.toml", tmp_path_factory, cache_dir, keep_going=not PERSISTENT_GEMM_LOWERS)
    if not PERSISTENT_GEMM_LOWERS:
        assert [(x.entry, x.arch, x.error) for x in result.left_out] == [("persistent_gemm", "sm_90a", REFUSAL)]
    return result, lib


def test_every_kind_builds(conformance):
    result, lib = conformance
    names = {e.name for e in lib.manifest.entries}
    kinds = {"gemm_48k", "gemm_new_style", "row_scale", "flash_fwd", "decode_splitkv", "persistent_gemm", "hostile", "new"}
    assert names == (kinds if PERSISTENT_GEMM_LOWERS else kinds - {"persistent_gemm"})


def test_48k_gemm_uses_exactly_48k_of_dynamic_shared_memory(conformance):
    _, lib = conformance
    (k,) = lib.signature("gemm_48k").variants[0].kernels
    assert k.dynamic_smem == str(48 * 1024)


def test_autotuned_functions_build_the_config_given(conformance):
    _, lib = conformance
    fa = lib.signature("flash_fwd").variants[0]
    assert fa.config_source == "explicit"
    assert dict(fa.config) == {"block_M": "128", "block_N": "128", "num_stages": "2", "threads": "256"}
    rs = lib.signature("row_scale").variants[0]
    assert dict(rs.config) == {"block": "4", "threads": "256"}
    assert rs.kernels[0].grid[0] == str(65536 // 4)


def test_alloc_global_buffers_become_workspaces(conformance):
    _, lib = conformance
    v = lib.signature("decode_splitkv").variants[0]
    assert {w.name: (w.dtype, w.elem_bits) for w in v.workspaces} == {"partial_out": ("float32", 32), "partial_lse": ("float32", 32)}
    assert len(v.kernels) == 2
    # the combine kernel reads both workspaces: pointer arguments name them, not tensors
    assert {a.value for a in v.kernels[1].args if a.ctype == "void*"} >= {"w_partial_out", "w_partial_lse"}


@pytest.mark.skipif(not PERSISTENT_GEMM_LOWERS, reason="TileLang 0.1.12 refuses persistent_gemm (ProducerConsumerWS)")
def test_device_queries_at_build_time_answer_from_the_named_gpu(conformance):
    _, lib = conformance
    v = lib.signature("persistent_gemm").variants[0]
    assert v.device == "H100-SXM"
    assert v.kernels[0].grid[0] == "132"  # one block per SM of an H100 SXM
    text = ok(tl_aot_cli("inspect", lib.path)).stdout
    assert "device queries answered as H100-SXM" in text
    assert "workspace partial_out: float32[" in text
    assert "config (explicit): block_M=128" in text


def test_header_spells_keyword_names_readably(conformance):
    result, _ = conformance
    header = result.header.read_text()
    assert "void new_(::tvm::ffi::TensorView x, ::tvm::ffi::TensorView w, ::tvm::ffi::TensorView y);" in header
    assert "::tvm::ffi::TensorView stream, ::tvm::ffi::TensorView new_, ::tvm::ffi::TensorView this_" in header
    assert "float delete_, float default_, int32_t register_, int32_t int_, void* stream_);" in header


@pytest.mark.parametrize("bad", ["x", "X", "stream", "new", "this", "has_stream", "device", "entry", "args", "result", "a", "t"])
def test_hostile_names_are_named_in_errors(conformance, bad):
    """Every parameter is checked and named as the user wrote it, whatever it collides with in C++."""
    _, lib = conformance
    names = [p.name for p in lib.signature("hostile").params if p.is_tensor]
    tensors = [FakeCudaTensor([4096]) for _ in names]
    tensors[names.index(bad)] = FakeCudaTensor([4095])
    with pytest.raises(ValueError, match=f"hostile: argument '{bad}' expected shape \\[4096\\] with dim 0 = 4096, got \\[4095\\]"):
        lib.hostile(*tensors, 1.0, 2.0, 3, 4)
    with pytest.raises(TypeError, match="hostile: argument 'int' expected an int"):
        lib.hostile(*[FakeCudaTensor([4096]) for _ in names], 1.0, 2.0, 3, "four")


def test_autotune_without_a_config_lists_the_candidates(tmp_path, cache_dir):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tl_aot",
            "build",
            f"{KERNELS / 'flash_fwd_autotune.py'}:flash_fwd",
            "--arch",
            "90a",
            "-o",
            str(tmp_path),
            "--arg",
            "batch=1",
            "--arg",
            "heads=1",
            "--arg",
            "seq_len=128",
            "--arg",
            "dim=64",
            "--cache-dir",
            str(cache_dir),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert "flash_fwd is @autotune'd over 4 configs and none was chosen" in proc.stderr
    assert "--arg block_M=128 --arg block_N=64 --arg num_stages=2 --arg threads=256" in proc.stderr
    assert "Traceback" not in proc.stderr
