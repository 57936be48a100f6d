"""Run-time reliability on real GPUs: bad input, threads, several GPUs, CUDA graphs, lifecycle.

    python -m pytest tests/gpu/test_reliability_gpu.py -q          # TL_AOT_TEST_LIBDIR=<dir>: prebuilt library

Every bad call must raise a Python exception naming the entry and the argument, launch nothing
(its outputs keep their sentinel values) and leave the library usable (the next good call is
correct). The figures (cases tried, threads x calls x devices, cycles, memory) are printed and,
with ``TL_AOT_RELIABILITY_OUT=<file>``, appended to that file as JSON lines;
``python bench/reliability_gpu.py`` runs this file and collects them for docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from support.fake_cuda import FakeCudaTensor

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]

INT32_MAX = 2**31 - 1


def record(kind: str, **figures) -> None:
    """Print one JSON line of figures and append it to $TL_AOT_RELIABILITY_OUT if set."""
    line = json.dumps({"figure": kind, "device": torch.cuda.get_device_name(0), **figures}, sort_keys=True)
    print(line)
    out = os.environ.get("TL_AOT_RELIABILITY_OUT")
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")


def ngpus() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def need_gpus(n: int) -> None:
    if ngpus() < n:
        pytest.skip(f"needs {n} GPUs, this machine has {ngpus()}")


def is_sm90() -> bool:
    return torch.cuda.get_device_capability(0) == (9, 0)


def sub_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


# ---------------------------------------------------------------------------------------------
# Good calls: one per entry, checked against torch. Used after every bad call.
# ---------------------------------------------------------------------------------------------


def _ref_gemm(a, b):
    return (a.float() @ b.float()).to(a.dtype)


def good_call(lib, entry: str, dev: int = 0) -> None:
    d = f"cuda:{dev}"
    if entry in ("gemm_f16", "gemm_bf16", "gemm_dyn"):
        m, n, k, dt = {
            "gemm_f16": (1024, 1024, 1024, torch.float16),
            "gemm_bf16": (1024, 512, 768, torch.bfloat16),
            "gemm_dyn": (200, 512, 512, torch.float16),
        }[entry]
        a = torch.randn(m, k, device=d, dtype=dt)
        b = torch.randn(k, n, device=d, dtype=dt)
        c = torch.full((m, n), float("nan"), device=d, dtype=dt)
        getattr(lib, entry)(a, b, c)
        torch.testing.assert_close(c, _ref_gemm(a, b), rtol=2e-2, atol=2e-1)
    elif entry in ("add_one", "source_scale", "add_one_l2"):
        n = 65536 if entry == "add_one_l2" else 3000
        x = torch.randn(n, device=d)
        y = torch.full_like(x, float("nan"))
        getattr(lib, entry)(x, y)
        torch.testing.assert_close(y, 3 * x + 1 if entry == "source_scale" else x + 1)
    elif entry == "axpy":
        x = torch.randn(4096, device=d)
        y = torch.randn(4096, device=d)
        ref = 1.5 * x + y + 2
        lib.axpy(x, y, 1.5, 2)
        torch.testing.assert_close(y, ref)
    elif entry == "softmax":
        x = torch.randn(37, 1024, device=d, dtype=torch.float16)
        y = torch.empty_like(x)
        lib.softmax(x, y)
        torch.testing.assert_close(y.float(), torch.softmax(x.float(), dim=1), rtol=1e-2, atol=1e-3)
    elif entry == "two_kernels":
        x = torch.randn(4096, device=d)
        y = torch.empty_like(x)
        z = torch.empty_like(x)
        lib.two_kernels(x, y, z, 3.0)
        torch.testing.assert_close(z, 3 * x + 2)
    elif entry == "conv_im2col":
        data = torch.randn(2, 16, 16, 64, device=d, dtype=torch.float16)
        weight = torch.randn(3, 3, 64, 64, device=d, dtype=torch.float16)
        out = torch.empty(2, 16, 16, 64, device=d, dtype=torch.float16)
        lib.conv_im2col(data, weight, out)
        ref = torch.nn.functional.conv2d(data.permute(0, 3, 1, 2).float(), weight.permute(3, 2, 0, 1).float(), padding=1)
        torch.testing.assert_close(out.float(), ref.permute(0, 2, 3, 1), rtol=2e-2, atol=2e-1)
    elif entry == "cluster_rank":
        y = torch.full((1024,), -1, device=d, dtype=torch.int32)
        lib.cluster_rank(y)
        torch.testing.assert_close(y, (torch.arange(1024, device=d) // 128 % 2).int())
    else:  # pragma: no cover
        raise AssertionError(entry)


# ---------------------------------------------------------------------------------------------
# Bad input: each case builds (args, outputs-to-watch); the call must raise `exc` matching `match`.
# ---------------------------------------------------------------------------------------------

SENTINEL = 7.0


def t(*shape, dtype=torch.float32, dev=0, fill=SENTINEL):
    return torch.full(shape, fill, device=f"cuda:{dev}", dtype=dtype)


def offset_view(n, offset, dtype=torch.float32, shape=None):
    """A view whose data pointer is `offset` elements past a 256-byte aligned allocation."""
    base = t(n + offset, dtype=dtype)
    v = base[offset : offset + n]
    return v.view(*shape) if shape else v


def _f16(*s):
    return t(*s, dtype=torch.float16)


CASES = {
    # add_one(X: float32[n], Y: float32[n])
    "add_one/dtype_Y": ("add_one", lambda: (t(1000), _f16(1000)), TypeError, r"add_one: argument 'Y' expected dtype float32, got float16"),
    "add_one/dtype_X_int": (
        "add_one",
        lambda: (t(1000, dtype=torch.int32), t(1000)),
        TypeError,
        r"add_one: argument 'X' expected dtype float32, got int32",
    ),
    "add_one/ndim": ("add_one", lambda: (t(10, 100), t(10, 100)), ValueError, r"add_one: argument 'X' expected 1 dimension\(s\)"),
    "add_one/symbolic_disagree": (
        "add_one",
        lambda: (t(1000), t(999)),
        ValueError,
        r"add_one: argument 'Y' expected shape \[n\] with dim 0 = n = 1000 \(from 'X' dim 0\), got \[999\]",
    ),
    "add_one/too_few": ("add_one", lambda: (t(1000),), TypeError, r"add_one\(\) takes 2 arguments \(X, Y\) and an optional stream, got 1"),
    "add_one/too_many": (
        "add_one",
        lambda: (t(1000), t(1000), 0, 1),
        TypeError,
        r"add_one\(\) takes 2 arguments \(X, Y\) and an optional stream, got 4",
    ),
    "add_one/cpu_tensor": (
        "add_one",
        lambda: (torch.ones(1000), t(1000)),
        ValueError,
        r"add_one: argument 'X' expected a CUDA tensor, got a tensor on cpu",
    ),
    "add_one/none_tensor": ("add_one", lambda: (t(1000), None), TypeError, r"add_one: argument 'Y' expected a tensor, got None"),
    "add_one/zero_size": (
        "add_one",
        lambda: (t(0), t(0)),
        ValueError,
        r"add_one: argument 'X' expected dim 0 \('n'\) in \[1, 2147483647\], got \[0\]",
    ),
    "add_one/misaligned_4B": (
        "add_one",
        lambda: (offset_view(1000, 1), t(1000)),
        ValueError,
        r"add_one: argument 'X' expected a data pointer aligned to 64 bytes.*got an address 4 bytes past",
    ),
    "add_one/misaligned_16B": (
        "add_one",
        lambda: (t(1000), offset_view(1000, 4)),
        ValueError,
        r"add_one: argument 'Y' expected a data pointer aligned to 64 bytes",
    ),
    "add_one/strided": (
        "add_one",
        lambda: (t(2000)[::2], t(1000)),
        ValueError,
        r"add_one: argument 'X' expected a contiguous tensor with strides \(1\), got strides \(2\)",
    ),
    "add_one/negative_stream": (
        "add_one",
        lambda: (t(1000), t(1000), -1),
        ValueError,
        r"add_one: argument 'stream' expected a non-negative stream handle",
    ),
    "add_one/stream_wrong_type": (
        "add_one",
        lambda: (t(1000), t(1000), 1.5),
        TypeError,
        r"add_one: argument 'stream' expected None, an int handle or a pointer, got float",
    ),
    "add_one/list_for_tensor": ("add_one", lambda: ([1.0, 2.0], t(2)), TypeError, r"add_one: argument 'X' expected a tensor, got"),
    "add_one/device_out_of_range": (
        "add_one",
        lambda: (FakeCudaTensor([1000], device=ngpus()), FakeCudaTensor([1000], device=ngpus())),
        ValueError,
        r"add_one: argument 'X' expected a visible CUDA device \(\d+ visible",
    ),
    "add_one/null_data": (
        "add_one",
        lambda: (FakeCudaTensor([16], address=0), t(16)),
        ValueError,
        r"add_one: argument 'X' expected a tensor with data, got a null data pointer",
    ),
    # gemm_f16(A: float16[1024, 1024], B, C): static shapes, TMA on sm_90a
    "gemm_f16/static_dim": (
        "gemm_f16",
        lambda: (_f16(1024, 1024), _f16(1024, 1024), _f16(1024, 512)),
        ValueError,
        r"gemm_f16: argument 'C' expected shape \[1024, 1024\] with dim 1 = 1024, got \[1024, 512\]",
    ),
    "gemm_f16/dtype_B": (
        "gemm_f16",
        lambda: (_f16(1024, 1024), t(1024, 1024, dtype=torch.bfloat16), _f16(1024, 1024)),
        TypeError,
        r"gemm_f16: argument 'B' expected dtype float16, got bfloat16",
    ),
    "gemm_f16/transposed": (
        "gemm_f16",
        lambda: (_f16(1024, 1024).t(), _f16(1024, 1024), _f16(1024, 1024)),
        ValueError,
        r"gemm_f16: argument 'A' expected a contiguous tensor with strides \(1024, 1\), got strides \(1, 1024\)",
    ),
    "gemm_f16/misaligned_tma": (
        "gemm_f16",
        lambda: (offset_view(1024 * 1024, 1, torch.float16, (1024, 1024)), _f16(1024, 1024), _f16(1024, 1024)),
        ValueError,
        r"gemm_f16: argument 'A' expected a data pointer aligned to 64 bytes",
    ),
    "gemm_f16/ndim": (
        "gemm_f16",
        lambda: (_f16(1, 1024, 1024), _f16(1024, 1024), _f16(1024, 1024)),
        ValueError,
        r"gemm_f16: argument 'A' expected 2 dimension\(s\) \[1024, 1024\], got 3",
    ),
    "gemm_f16/cpu_output": (
        "gemm_f16",
        lambda: (_f16(1024, 1024), _f16(1024, 1024), torch.ones(1024, 1024, dtype=torch.float16)),
        ValueError,
        r"gemm_f16: argument 'C' expected a CUDA tensor, got a tensor on cpu",
    ),
    # gemm_dyn(A: float16[m, 512], B: float16[512, 512], C: float16[m, 512])
    "gemm_dyn/symbolic_disagree": (
        "gemm_dyn",
        lambda: (_f16(64, 512), _f16(512, 512), _f16(65, 512)),
        ValueError,
        r"gemm_dyn: argument 'C' expected shape \[m, 512\] with dim 0 = m = 64 \(from 'A' dim 0\), got \[65, 512\]",
    ),
    "gemm_dyn/zero_rows": (
        "gemm_dyn",
        lambda: (_f16(0, 512), _f16(512, 512), _f16(0, 512)),
        ValueError,
        r"gemm_dyn: argument 'A' expected dim 0 \('m'\) in \[1, 2147483647\], got \[0, 512\]",
    ),
    "gemm_dyn/static_dim": (
        "gemm_dyn",
        lambda: (_f16(64, 256), _f16(512, 512), _f16(64, 512)),
        ValueError,
        r"gemm_dyn: argument 'A' expected shape \[m, 512\] with dim 1 = 512, got \[64, 256\]",
    ),
    "gemm_dyn/misaligned_tma": (
        "gemm_dyn",
        lambda: (offset_view(129 * 512, 1, torch.float16, (129, 512)), _f16(512, 512), _f16(129, 512)),
        ValueError,
        r"gemm_dyn: argument 'A' expected a data pointer aligned to 64 bytes",
    ),
    "gemm_dyn/row_slice_of_wider": (
        "gemm_dyn",
        lambda: (_f16(64, 1024)[:, :512], _f16(512, 512), _f16(64, 512)),
        ValueError,
        r"gemm_dyn: argument 'A' expected a contiguous tensor with strides \(512, 1\), got strides \(1024, 1\)",
    ),
    # axpy(X: float32[4096], Y: float32[4096], alpha: float32, shift: int32)
    "axpy/int_scalar_is_float": (
        "axpy",
        lambda: (t(4096), t(4096), 1.0, 2.5),
        TypeError,
        r"axpy: argument 'shift' expected an int \(int32\), got float",
    ),
    "axpy/int_scalar_out_of_range": (
        "axpy",
        lambda: (t(4096), t(4096), 1.0, 2**40),
        ValueError,
        r"axpy: argument 'shift' expected a value in range of int32, got 1099511627776",
    ),
    "axpy/float_scalar_is_str": (
        "axpy",
        lambda: (t(4096), t(4096), "2.0", 1),
        TypeError,
        r"axpy: argument 'alpha' expected a float \(float32\), got",
    ),
    "axpy/none_scalar": (
        "axpy",
        lambda: (t(4096), t(4096), None, 1),
        TypeError,
        r"axpy: argument 'alpha' expected a float \(float32\), got None",
    ),
    "axpy/tensor_as_scalar": (
        "axpy",
        lambda: (t(4096), t(4096), 1.0, t(1)),
        TypeError,
        r"axpy: argument 'shift' expected an int \(int32\), got",
    ),
    "axpy/static_len": (
        "axpy",
        lambda: (t(4096), t(4095), 1.0, 1),
        ValueError,
        r"axpy: argument 'Y' expected shape \[4096\] with dim 0 = 4096, got \[4095\]",
    ),
    # softmax(X: float16[m, 1024], Y: float16[m, 1024]): 16-byte vector loads
    "softmax/column_slice": (
        "softmax",
        lambda: (_f16(8, 2048)[:, :1024], _f16(8, 1024)),
        ValueError,
        r"softmax: argument 'X' expected a contiguous tensor with strides \(1024, 1\), got strides \(2048, 1\)",
    ),
    "softmax/misaligned": (
        "softmax",
        lambda: (offset_view(8 * 1024, 8, torch.float16, (8, 1024)), _f16(8, 1024)),
        ValueError,
        r"softmax: argument 'X' expected a data pointer aligned to 64 bytes.*16 bytes past",
    ),
    "softmax/misaligned_2B": (  # 16-byte vector loads from a 2-byte offset: a misaligned-address fault
        "softmax",
        lambda: (_f16(8, 1024), offset_view(8 * 1024, 1, torch.float16, (8, 1024))),
        ValueError,
        r"softmax: argument 'Y' expected a data pointer aligned to 64 bytes.*2 bytes past",
    ),
    "softmax/rows_disagree": (
        "softmax",
        lambda: (_f16(8, 1024), _f16(9, 1024)),
        ValueError,
        r"softmax: argument 'Y' expected shape \[m, 1024\] with dim 0 = m = 8 \(from 'X' dim 0\)",
    ),
    "softmax/dtype_float32": (
        "softmax",
        lambda: (t(8, 1024), t(8, 1024)),
        TypeError,
        r"softmax: argument 'X' expected dtype float16, got float32",
    ),
    # two_kernels(X, Y, Z: float32[4096], alpha: float32): nothing of the first kernel may run
    "two_kernels/third_tensor_dim": (
        "two_kernels",
        lambda: (t(4096), t(4096), t(4095), 2.0),
        ValueError,
        r"two_kernels: argument 'Z' expected shape \[4096\] with dim 0 = 4096, got \[4095\]",
    ),
    "two_kernels/missing_scalar": (
        "two_kernels",
        lambda: (t(4096), t(4096), t(4096)),
        TypeError,
        r"two_kernels\(\) takes 4 arguments \(X, Y, Z, alpha\) and an optional stream, got 3",
    ),
    "two_kernels/misaligned_last": (
        "two_kernels",
        lambda: (t(4096), t(4096), offset_view(4096, 2), 2.0),
        ValueError,
        r"two_kernels: argument 'Z' expected a data pointer aligned to 64 bytes",
    ),
    # source_scale(X: float32[n], Y: float32[n]): a hand-written CUDA kernel
    "source_scale/dtype_float64": (
        "source_scale",
        lambda: (t(1000, dtype=torch.float64), t(1000)),
        TypeError,
        r"source_scale: argument 'X' expected dtype float32, got float64",
    ),
    "source_scale/symbolic_disagree": (
        "source_scale",
        lambda: (t(1000), t(1001)),
        ValueError,
        r"source_scale: argument 'Y' expected shape \[n\] with dim 0 = n = 1000",
    ),
    # add_one_l2(X, Y: float32[65536])
    "add_one_l2/static_len": ("add_one_l2", lambda: (t(65536), t(65535)), ValueError, r"add_one_l2: argument 'Y' expected shape \[65536\]"),
    # conv_im2col(data: float16[2, 16, 16, 64], kernel: float16[3, 3, 64, 64], out): im2col TMA (sm_90a)
    "conv_im2col/data_shape": (
        "conv_im2col",
        lambda: (_f16(2, 16, 16, 32), _f16(3, 3, 64, 64), _f16(2, 16, 16, 64)),
        ValueError,
        r"conv_im2col: argument 'data' expected shape \[2, 16, 16, 64\] with dim 3 = 64, got \[2, 16, 16, 32\]",
    ),
    "conv_im2col/nchw_view": (
        "conv_im2col",
        lambda: (_f16(2, 64, 16, 16).permute(0, 2, 3, 1), _f16(3, 3, 64, 64), _f16(2, 16, 16, 64)),
        ValueError,
        r"conv_im2col: argument 'data' expected a contiguous tensor",
    ),
    # cluster_rank(Y: int32[1024]): a cluster launch (sm_90a)
    "cluster_rank/dtype": ("cluster_rank", lambda: (t(1024),), TypeError, r"cluster_rank: argument 'Y' expected dtype int32, got float32"),
}

SM90_ONLY = {"conv_im2col", "cluster_rank"}


def _outputs(args):
    return [a for a in args if isinstance(a, torch.Tensor) and a.is_cuda]


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_raises_launches_nothing_and_library_stays_usable(testlib, case):
    entry, build, exc, match = CASES[case]
    if entry in SM90_ONLY and not is_sm90():
        pytest.skip(f"{entry} is built for sm_90a only")
    args = build()
    watched = [(a, a.clone()) for a in _outputs(args)]
    torch.cuda.synchronize()
    with pytest.raises(exc, match=match):
        getattr(testlib, entry)(*args)
    torch.cuda.synchronize()
    for a, before in watched:  # nothing was launched: every CUDA tensor still holds what it held
        assert torch.equal(a, before), f"{case}: a tensor changed although the call was refused"
    good_call(testlib, entry)  # the library is still usable and correct


def test_bad_input_figures():
    record("bad_input", cases=len(CASES), entries=len({e for e, *_ in CASES.values()}))
    assert len(CASES) >= 30


def test_tensors_on_two_gpus_are_refused(testlib):
    need_gpus(2)
    a = _f16(1024, 1024)
    b = t(1024, 1024, dtype=torch.float16, dev=1)
    c = _f16(1024, 1024)
    with pytest.raises(ValueError, match=r"gemm_f16: argument 'B' expected a tensor on cuda:0 like 'A', got a tensor on cuda:1"):
        testlib.gemm_f16(a, b, c)
    torch.cuda.synchronize()
    assert torch.all(c == SENTINEL)
    good_call(testlib, "gemm_f16", 0)
    good_call(testlib, "gemm_f16", 1)


def test_stream_of_another_gpu_is_refused(testlib):
    need_gpus(2)
    x, y = t(1000), t(1000)
    other = torch.cuda.Stream(device=1)
    with pytest.raises((RuntimeError, ValueError), match=r"add_one: .*(stream|launching)") as info:
        testlib.add_one(x, y, other.cuda_stream)
    record("other_gpu_stream", message=str(info.value).splitlines()[0])
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    assert torch.all(y == SENTINEL)
    good_call(testlib, "add_one", 0)
    good_call(testlib, "add_one", 1)


def test_prepare_with_a_bad_device_is_refused(testlib):
    with pytest.raises(ValueError, match=r"tl_aot_prepare: argument 'device' expected a value in range"):
        testlib.prepare(-1)
    with pytest.raises(ValueError, match=r"tl_aot_prepare: argument 'device' expected a visible CUDA device"):
        testlib.prepare(ngpus())
    testlib.prepare(0)
    good_call(testlib, "add_one")


# ---------------------------------------------------------------------------------------------
# Threads: many callers of one entry at once, the first (lazy-init) call included.
# ---------------------------------------------------------------------------------------------


def _hammer(lib, devices, threads_per_device: int, calls: int, entries=("add_one",)):
    """Start every thread at once right after cleanup (so module loading races), check every result."""
    lib.cleanup()
    nthreads = threads_per_device * len(devices)
    barrier = threading.Barrier(nthreads)
    errors: list = []

    def worker(i: int) -> None:
        dev = devices[i % len(devices)]
        entry = entries[i % len(entries)]
        try:
            torch.cuda.set_device(dev)
            stream = torch.cuda.Stream(device=dev)
            n = 1000 + 37 * i  # every thread its own dynamic size
            with torch.cuda.stream(stream):
                if entry == "gemm_dyn":
                    a = torch.randn(64 + i, 512, device=f"cuda:{dev}", dtype=torch.float16)
                    b = torch.randn(512, 512, device=f"cuda:{dev}", dtype=torch.float16)
                    c = torch.empty(64 + i, 512, device=f"cuda:{dev}", dtype=torch.float16)
                    ref = _ref_gemm(a, b)
                else:
                    x = torch.randn(n, device=f"cuda:{dev}")
                    y = torch.empty_like(x)
                stream.synchronize()
                barrier.wait()
                for k in range(calls):
                    if entry == "gemm_dyn":
                        c.fill_(float("nan"))
                        lib.gemm_dyn(a, b, c)
                        stream.synchronize()
                        if not torch.allclose(c.float(), ref.float(), rtol=2e-2, atol=2e-1):
                            raise AssertionError(f"thread {i} call {k}: gemm_dyn wrong on cuda:{dev}")
                    else:
                        y.fill_(float("nan"))
                        lib.add_one(x, y)
                        stream.synchronize()
                        if not torch.equal(y, x + 1):
                            raise AssertionError(f"thread {i} call {k}: add_one wrong on cuda:{dev}")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(f"thread {i} (cuda:{dev}, {entry}): {type(e).__name__}: {e}")
            barrier.abort()

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(nthreads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    assert not errors, "\n".join(errors[:5])
    return nthreads


@pytest.mark.parametrize("entries", [("add_one",), ("add_one", "gemm_dyn")], ids=["add_one", "add_one+gemm_dyn"])
def test_threads_one_gpu_first_call_included(testlib, entries):
    threads, calls = 32, 200
    _hammer(testlib, [0], threads, calls, entries)
    record("threads", entries=list(entries), threads=threads, calls_per_thread=calls, devices=1, total_calls=threads * calls)


def test_threads_two_gpus_first_call_included(testlib):
    need_gpus(2)
    per_dev, calls = 16, 200
    n = _hammer(testlib, [0, 1], per_dev, calls, ("add_one", "gemm_dyn"))
    record("threads", entries=["add_one", "gemm_dyn"], threads=n, calls_per_thread=calls, devices=2, total_calls=n * calls)


# ---------------------------------------------------------------------------------------------
# Several GPUs.
# ---------------------------------------------------------------------------------------------


def test_tensors_on_gpu1_run_on_gpu1(testlib):
    """Ordered after earlier work on cuda:1's current stream: the kernel ran on device 1, in its context."""
    need_gpus(2)
    testlib.cleanup()
    with torch.cuda.device(1):
        src = torch.randn(1 << 20, device="cuda:1")
        x = torch.zeros_like(src)
        y = torch.empty_like(src)
        torch.cuda.synchronize(1)
        s = torch.cuda.Stream(device=1)
        with torch.cuda.stream(s):
            torch.cuda._sleep(100_000_000)
            x.copy_(src)
            testlib.add_one(x, y)
        s.synchronize()
    torch.testing.assert_close(y, src + 1)
    for e in ("gemm_f16", "gemm_dyn", "softmax", "two_kernels", "source_scale", "add_one_l2"):
        good_call(testlib, e, 1)
    if torch.cuda.get_device_capability(1) == (9, 0):
        good_call(testlib, "conv_im2col", 1)
        good_call(testlib, "cluster_rank", 1)


def _on_device(lib, dev: int, rounds: int, errors: list) -> None:
    try:
        torch.cuda.set_device(dev)
        for _ in range(rounds):
            for e in ("gemm_f16", "add_one", "two_kernels"):
                good_call(lib, e, dev)
    except BaseException as e:  # noqa: BLE001 - reported by the caller
        errors.append(f"cuda:{dev}: {type(e).__name__}: {e}")


def test_two_gpus_in_parallel_then_cleanup_then_both_again(testlib):
    need_gpus(2)
    rounds = 20
    for _ in range(2):
        errors: list = []
        ts = [threading.Thread(target=_on_device, args=(testlib, d, rounds, errors)) for d in (0, 1)]
        for th in ts:
            th.start()
        for th in ts:
            th.join()
        assert not errors, errors
        assert testlib.cleanup() == 0  # modules loaded on both devices: all unloaded, both contexts released
    record("two_gpus_parallel", devices=2, rounds=rounds, entries=3, cleanups=2)


# ---------------------------------------------------------------------------------------------
# CUDA graphs.
# ---------------------------------------------------------------------------------------------


def test_cuda_graph_capture_and_replay_after_prepare(testlib):
    testlib.cleanup()
    testlib.prepare(0)  # load every module now: nothing may be loaded during capture
    x = torch.randn(4096, device="cuda")
    y = torch.empty_like(x)
    z = torch.empty_like(x)
    w = torch.empty_like(x)
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    c = torch.empty(1024, 1024, device="cuda", dtype=torch.float16)
    sx = torch.randn(100, 1024, device="cuda", dtype=torch.float16)
    sy = torch.empty_like(sx)
    lx = torch.randn(65536, device="cuda")
    ly = torch.empty_like(lx)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # captures on torch's side stream
        testlib.add_one(x, y)
        testlib.two_kernels(y, z, w, 2.0)  # reads what add_one wrote: order inside the graph matters
        testlib.gemm_f16(a, b, c)  # TMA descriptors passed by value
        testlib.softmax(sx, sy)
        testlib.add_one_l2(lx, ly)  # its L2 window is skipped while capturing
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        a.copy_(torch.randn_like(a))
        sx.copy_(torch.randn_like(sx))
        lx.copy_(torch.randn_like(lx))
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(z, 2 * (x + 1))
        torch.testing.assert_close(w, 2 * (x + 1) + 2)
        torch.testing.assert_close(c, _ref_gemm(a, b), rtol=2e-2, atol=2e-1)
        torch.testing.assert_close(sy.float(), torch.softmax(sx.float(), dim=1), rtol=1e-2, atol=1e-3)
        torch.testing.assert_close(ly, lx + 1)
    record("cuda_graph", entries_captured=5, replays=3)


def test_cuda_graph_first_call_during_capture_fails_clearly(testlib):
    testlib.cleanup()
    x = torch.randn(4096, device="cuda")
    y = torch.empty_like(x)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=r"add_one: first call on cuda:0 happened during CUDA graph capture.*tl_aot_prepare\(0\)"):
        with torch.cuda.graph(g):
            testlib.add_one(x, y)
    torch.cuda.synchronize()
    good_call(testlib, "add_one")  # the process and the library are fine afterwards


# ---------------------------------------------------------------------------------------------
# Lifecycle.
# ---------------------------------------------------------------------------------------------


def test_call_cleanup_call_1000_cycles_no_memory_growth(testlib):
    x = torch.randn(4096, device="cuda")
    y = torch.empty_like(x)
    a = torch.randn(128, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    c = torch.empty(128, 512, device="cuda", dtype=torch.float16)
    testlib.add_one(x, y)
    testlib.gemm_dyn(a, b, c)
    assert testlib.cleanup() == 0
    torch.cuda.synchronize()
    free_before, _ = torch.cuda.mem_get_info()
    cycles = 1000
    for i in range(cycles):
        testlib.add_one(x, y)
        if i % 10 == 0:  # a TMA entry (a second module) too, every tenth cycle
            testlib.gemm_dyn(a, b, c)
        assert testlib.cleanup() == 0
        testlib.add_one(x, y)
    assert testlib.cleanup() == 0
    torch.cuda.synchronize()
    free_after, _ = torch.cuda.mem_get_info()  # before the checks below allocate their temporaries
    growth = free_before - free_after
    torch.testing.assert_close(y, x + 1)
    torch.testing.assert_close(c, _ref_gemm(a, b), rtol=2e-2, atol=2e-1)
    record("lifecycle", cycles=cycles, device_memory_growth_bytes=int(growth))
    assert growth <= 4 << 20, f"device memory grew by {growth / 2**20:.1f} MiB over {cycles} cycles"


_REFCOUNT_SCRIPT = textwrap.dedent(
    """
    import ctypes, json, os, sys, torch, tl_aot
    lib = tl_aot.load(sys.argv[1]); cycles = int(sys.argv[2]); final_cleanup = sys.argv[3] == "1"
    x = torch.randn(1024, device="cuda"); y = torch.empty_like(x); torch.cuda.synchronize()
    for _ in range(cycles):
        lib.add_one(x, y); assert lib.cleanup() == 0
    if cycles:
        lib.add_one(x, y)
        if final_cleanup:
            assert lib.cleanup() == 0
    torch.cuda.synchronize()
    cuda = ctypes.CDLL("libcuda.so.1")
    dev = ctypes.c_int(); assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    flags, active = ctypes.c_uint(), ctypes.c_int()
    refs = 0
    while True:  # count the retained references by releasing them (the process exits right after)
        assert cuda.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(active)) == 0
        if not active.value or refs > 100:
            break
        assert cuda.cuDevicePrimaryCtxRelease_v2(dev) == 0
        refs += 1
    print(json.dumps({"refs": refs}), flush=True)
    os._exit(0)
    """
)


def _primary_ctx_refs(lib_path, cycles: int, final_cleanup: bool) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _REFCOUNT_SCRIPT, str(lib_path), str(cycles), "1" if final_cleanup else "0"],
        capture_output=True,
        text=True,
        env=sub_env(),
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])["refs"]


def test_primary_context_references_do_not_grow(testlib_path):
    baseline = _primary_ctx_refs(testlib_path, 0, True)  # torch's own reference(s)
    after_cycles = _primary_ctx_refs(testlib_path, 1000, True)
    still_loaded = _primary_ctx_refs(testlib_path, 1000, False)
    record("primary_context_refs", torch_only=baseline, after_1000_cycles_and_cleanup=after_cycles, loaded=still_loaded)
    assert after_cycles == baseline, "call/cleanup cycles leaked retained primary-context references"
    assert still_loaded == baseline + 1, "a loaded library holds exactly one reference per device"


def test_cleanup_twice_is_harmless(testlib):
    good_call(testlib, "add_one")
    assert testlib.cleanup() == 0
    assert testlib.cleanup() == 0
    good_call(testlib, "add_one")


def test_cleanup_with_a_kernel_in_flight(testlib):
    """Unloading right after an asynchronous launch: the queued kernel still completes correctly."""
    x = torch.randn(1 << 20, device="cuda")
    y = torch.empty_like(x)
    testlib.add_one(x, y)
    torch.cuda.synchronize()
    torch.cuda._sleep(200_000_000)  # the launch below waits behind this on the current stream
    y.fill_(float("nan"))
    testlib.add_one(x, y)
    assert testlib.cleanup() == 0
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x + 1)


_EXIT_SCRIPT = textwrap.dedent(
    """
    import atexit, sys, torch, tl_aot
    lib = tl_aot.load(sys.argv[1]); mode = sys.argv[2]
    x = torch.randn(1 << 20, device="cuda"); y = torch.empty_like(x)
    devices = range(torch.cuda.device_count())
    for d in devices:
        xd = x.to(f"cuda:{d}"); yd = torch.empty_like(xd); lib.add_one(xd, yd)
    if mode == "cleanup":
        torch.cuda.synchronize(); assert lib.cleanup() == 0
    elif mode == "atexit":
        atexit.register(lib.cleanup)
    elif mode == "in_flight":
        torch.cuda._sleep(100_000_000); lib.add_one(x, y)  # exit while the kernel is queued
    print("ok", flush=True)
    """
)


@pytest.mark.parametrize("mode", ["no_cleanup", "cleanup", "atexit", "in_flight"])
def test_no_crash_at_interpreter_exit(testlib_path, mode):
    out = subprocess.run(
        [sys.executable, "-c", _EXIT_SCRIPT, str(testlib_path), mode], capture_output=True, text=True, env=sub_env(), timeout=300
    )
    assert out.returncode == 0, f"exit status {out.returncode}\n{out.stderr[-3000:]}"
    assert out.stdout.strip() == "ok"
