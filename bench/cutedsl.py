"""CuTeDSL-backend entries on the GPU, beside TileLang's own CuTeDSL JIT and the same kernels' CUDA-backend entries.

    python bench/cutedsl.py --lib <dir with libtl_aot_cutedsl.so and libtl_aot_cutedsl_cuda.so>

Per kernel of tests/kernels/cutedsl.toml: TileLang's CuTeDSL JIT (``target="cutedsl"``) compiles the
same prim_func; outputs are compared bit for bit on the same inputs, and device times measured with
CUDA events in one run (median of rounds in rotating order): the JIT, tl_aot's CuTeDSL entry, tl_aot's CUDA entry.
Host launch overhead: a loop of calls of the small ``scale`` entry (n = 256), both backends.

On the GPU machine (CUDA 13, Python 3.12) TileLang's JIT needs CuTeDSL: nvidia-cutlass-dsl,
-libs-base, -libs-core and -libs-cu13 4.8.1 (cp312; the cu13 wheel is ~92 MB, so split it with
``split -b 33000000`` and ``cat`` the parts there) and protobuf, all in ONE ``pip install --target
/tmp/site`` (they share the ``nvidia_cutlass_dsl`` folder). ``--target`` skips the wheel's .pth
file, so add ``/tmp/site/nvidia_cutlass_dsl/dsl_packages`` to PYTHONPATH. The libraries are built
on the CPU machine: ``python -m tl_aot build --spec tests/kernels/cutedsl.toml --arch 90a`` and
``python -m tl_aot build --spec bench/cutedsl_cuda.toml`` (the same entries as CUDA C++).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
KERNELS = HERE.parent / "tests" / "kernels"
sys.path.insert(0, str(KERNELS))
sys.path.insert(0, str(KERNELS / "conformance"))
sys.path.insert(0, str(HERE.parent))

from bench.conformance import device_ms, rand  # noqa: E402

FLASH = dict(batch=2, heads=8, seq_len=1024, dim=128, causal=True, block_M=128, block_N=128, num_stages=2, threads=256)
#: ``--big``: kernels over 0.1 ms on an H100 (bench/cutedsl_big_cutedsl.toml and _cuda.toml build them).
FLASH_BIG = {**FLASH, "heads": 16, "seq_len": 4096}


def big_cases():
    """A 4096³ GEMM and a 2×16×4096×128 causal flash forward: the device-time comparison of the issue."""
    import flash_fwd_autotune
    import gemm

    q, k, v = (rand(2, 4096, 16, 128) for _ in range(3))
    c16 = torch.empty(4096, 4096, device="cuda", dtype=torch.float16)
    fwd = flash_fwd_autotune.flash_fwd.jit_impl.get_tir(**FLASH_BIG)
    return [
        ("gemm_tma", gemm.matmul(4096, 4096, 4096), None, {}, [rand(4096, 4096), rand(4096, 4096)], [c16]),
        ("flash_fwd", fwd, [3], _fast(), [q, k, v], [torch.empty_like(q)]),
    ]


def _fast() -> dict:
    import tilelang

    return {tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True}


def cases():
    """(entry, prim_func, out_idx, pass_configs, inputs, outputs): the arguments every side is called with."""
    import cutedsl as scale_mod
    import flash_fwd_autotune
    import gemm
    import multi
    import tilelang

    n = 1 << 20
    x = rand(n, dtype=torch.float32)
    q, k, v = (rand(2, 1024, 8, 128) for _ in range(3))
    fast = {tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True}
    c16 = torch.empty(1024, 1024, device="cuda", dtype=torch.float16)
    y2 = [torch.empty(4096, device="cuda") for _ in range(2)]
    return [
        ("gemm_tma", gemm.matmul(1024, 1024, 1024), None, {}, [rand(1024, 1024), rand(1024, 1024)], [c16]),
        ("scale", scale_mod.scale_cutedsl.get_tir(), None, {}, [x], [torch.empty_like(x)], 1.5),
        ("two", multi.scale_then_shift(4096), None, {}, [rand(4096, dtype=torch.float32)], y2, 0.5),
        ("flash_fwd", flash_fwd_autotune.flash_fwd.jit_impl.get_tir(**FLASH), [3], fast, [q, k, v], [torch.empty_like(q)]),
    ]


def _args(case):
    _, _, _, _, inputs, outputs, *scalars = case
    return [*inputs, *outputs, *scalars]


def _jit_call(jit, case):
    entry, _, out_idx, *_ = case
    args = _args(case)
    if out_idx:
        return lambda: jit(*[a for i, a in enumerate(args) if i not in out_idx])
    return lambda: jit(*args)


def interleaved_ms(fns: dict, rounds: int = 6) -> dict:
    """Median device ms of each of ``fns``, measured in rounds whose order rotates.

    The JIT and the CuTeDSL entry launch the same cubin with the same grid, block, shared memory and
    TMA descriptors, yet read 4-7% apart when always measured in the same order (GEMMs over 0.1 ms
    are power bound: clocks drift between back-to-back measurements). Rotating the order gives each
    fn the same share of every position.
    """
    names = list(fns)
    times = {n: [] for n in names}
    for r in range(rounds):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            times[n].append(device_ms(fns[n], repeats=1))
    return {n: sorted(t)[len(t) // 2] for n, t in times.items()}


def run(lib_dir: Path, big: bool = False) -> list[dict]:
    import tilelang

    import tl_aot

    aot = tl_aot.load(lib_dir / "libtl_aot_cutedsl.so")
    cuda = tl_aot.load(lib_dir / "libtl_aot_cutedsl_cuda.so")
    rows = []
    for case in big_cases() if big else cases():
        entry, func, out_idx, pass_configs = case[:4]
        row = {"entry": entry}
        t0 = time.perf_counter()
        jit = tilelang.compile(func, out_idx=out_idx, target="cutedsl", pass_configs=pass_configs)
        row["jit_compile_s"] = round(time.perf_counter() - t0, 1)
        args = _args(case)
        outs = case[5]
        jit_call = _jit_call(jit, case)
        got = jit_call()
        torch.cuda.synchronize()
        ref = [o.clone() for o in outs] if not out_idx else [got]
        for o in outs:
            o.zero_()
        getattr(aot, entry)(*args)
        torch.cuda.synchronize()
        row["bit_identical"] = all(torch.equal(a, b) for a, b in zip(ref, [o.clone() for o in outs]))
        for o in outs:
            o.zero_()
        getattr(cuda, entry)(*args)
        torch.cuda.synchronize()
        row["cuda_max_abs_diff"] = max(float((a.float() - b.float()).abs().max()) for a, b in zip(ref, outs))
        aot_fn, cuda_fn = getattr(aot, entry), getattr(cuda, entry)
        timed = interleaved_ms(
            {"jit_ms": jit_call, "aot_cutedsl_ms": lambda f=aot_fn, a=args: f(*a), "aot_cuda_ms": lambda f=cuda_fn, a=args: f(*a)}
        )
        row.update(timed)
        row["ratio_jit_over_aot"] = round(row["jit_ms"] / row["aot_cutedsl_ms"], 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if not big:
        rows.append(host_overhead(aot, cuda))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def host_overhead(aot, cuda, calls: int = 20000) -> dict:
    """Microseconds per call of ``scale`` on 256 elements (host-bound), each backend, best of 5 loops."""
    x = rand(256, dtype=torch.float32)
    y = torch.empty_like(x)
    out = {"entry": "host launch overhead (scale, n=256)"}
    for name, lib in (("aot_cutedsl_us", aot), ("aot_cuda_us", cuda)):
        fn = lib.scale
        for _ in range(1000):
            fn(x, y, 1.5)
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn(x, y, 1.5)
            torch.cuda.synchronize()
            best = min(best, (time.perf_counter() - t0) / calls * 1e6)
        out[name] = round(best, 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", type=Path, required=True)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--big", action="store_true", help="kernels over 0.1 ms (libraries from bench/cutedsl_big_*.toml)")
    args = ap.parse_args()
    rows = run(args.lib, args.big)
    if args.out:
        args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
