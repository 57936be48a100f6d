"""Conformance on the GPU: each kernel of tests/kernels/conformance built by tl_aot, run beside TileLang's JIT.

    python bench/conformance.py --lib <dir with libtl_aot_conformance.so> --out docs/conformance.md

For each kind of kernel: did it build, did it run, does it match the JIT's output (bit for bit, or
within tolerance) on the same inputs, and its device time over the JIT's (CUDA events, median of
repeats; ratio = JIT time / tl_aot time, >= 0.99 is the goal for kernels over 0.1 ms). A JIT that
cannot compile a kernel is compared against a torch reference instead, and the table says so.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
KERNELS = HERE.parent / "tests" / "kernels" / "conformance"
sys.path.insert(0, str(KERNELS))
sys.path.insert(0, str(HERE.parent))


def device_ms(fn, warmup=10, iters=50, repeats=5) -> float:
    """Median over ``repeats`` of the mean device time of ``fn`` (CUDA events)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop) / iters)
    return sorted(times)[len(times) // 2]


def rand(*shape, dtype=torch.float16):
    return torch.randn(*shape, device="cuda", dtype=dtype)


def cases(lib):
    """(kind, entry, make_inputs, make_outputs, jit_factory, torch_reference) per kernel; sizes from the manifest."""
    import ast

    import flash_fwd_autotune
    import gemm_48k
    import hostile_names
    import new_style_gemm
    import persistent_gemm
    import splitkv_decode
    import tilelang

    def gemm_ref(a, b):
        return (a.float() @ b.float()).half()

    def attn_ref(q, k, v):
        qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))
        s = qf @ kf.transpose(-1, -2) / q.shape[-1] ** 0.5
        n = s.shape[-1]
        s = s.masked_fill(torch.triu(torch.ones(n, n, device="cuda", dtype=torch.bool), 1), float("-inf"))
        return (torch.softmax(s, -1) @ vf).transpose(1, 2).half()

    def decode_ref(q, k, v):
        g = q.shape[1] // k.shape[2]
        kf = k.float().repeat_interleave(g, dim=2).transpose(1, 2)
        vf = v.float().repeat_interleave(g, dim=2).transpose(1, 2)
        s = (q.float().unsqueeze(2) @ kf.transpose(-1, -2)) / q.shape[-1] ** 0.5
        return (torch.softmax(s, -1) @ vf).squeeze(2).half()

    def hostile_ref(t, s):
        ten, (delete, default, register, int_) = t, s
        return (
            ten[0]
            + ten[1] * delete
            + ten[2]
            + ten[3]
            + ten[4]
            + ten[6]
            + ten[7]
            + ten[8]
            + ten[9]
            + ten[10]
            + ten[11] * default
            + register
            + int_
        )

    def rms_ref(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).half()

    def a(entry):
        return {k: ast.literal_eval(v) for k, v in lib.signature(entry).args}

    g48, gns, rs, fa, dec, pg, rn = (
        a(e) for e in ("gemm_48k", "gemm_new_style", "row_scale", "flash_fwd", "decode_splitkv", "persistent_gemm", "new")
    )
    out = []
    # (kind, entry, inputs(), outputs(inputs), jit() -> callable(inputs)->out, reference(inputs))
    out.append(
        (
            "48 KiB-smem TMA GEMM (factory)",
            "gemm_48k",
            lambda: [rand(g48["M"], g48["K"]), rand(g48["K"], g48["N"])],
            lambda ins: [torch.empty(g48["M"], g48["N"], device="cuda", dtype=torch.float16)],
            lambda: _explicit(tilelang.compile(gemm_48k.gemm_48k(**g48), target="cuda")),
            lambda ins: gemm_ref(*ins),
        )
    )
    out.append(
        (
            "new-style @tilelang.jit GEMM (T.const, T.empty)",
            "gemm_new_style",
            lambda: [rand(gns["M"], gns["K"]), rand(gns["K"], gns["N"])],
            lambda ins: [torch.empty(gns["M"], gns["N"], device="cuda", dtype=torch.float16)],
            lambda: _returned(lambda a, b: new_style_gemm.gemm(a, b)),
            lambda ins: gemm_ref(*ins),
        )
    )
    out.append(
        (
            "eager @autotune + @tilelang.jit (explicit config)",
            "row_scale",
            lambda: [rand(rs["M"], rs["N"]), rand(rs["N"])],
            lambda ins: [torch.empty(rs["M"], rs["N"], device="cuda", dtype=torch.float16)],
            lambda: _returned_kernel(new_style_gemm.row_scale.jit_impl, dict(block=rs["block"], threads=rs["threads"])),
            lambda ins: ins[0] * ins[1],
        )
    )
    fa_shape = (fa["batch"], fa["seq_len"], fa["heads"], fa["dim"])
    out.append(
        (
            "@autotune flash-attention forward (out_idx)",
            "flash_fwd",
            lambda: [rand(*fa_shape) for _ in range(3)],
            lambda ins: [torch.empty(*fa_shape, device="cuda", dtype=torch.float16)],
            lambda: _returned(flash_fwd_autotune.flash_fwd.jit_impl.compile(**fa)),
            lambda ins: attn_ref(*ins),
        )
    )
    kv_shape = (dec["batch"], dec["seqlen"], dec["kv_heads"], dec["dim"])
    out.append(
        (
            "split-KV decode, T.alloc_global partials (2 kernels)",
            "decode_splitkv",
            lambda: [rand(dec["batch"], dec["heads"], dec["dim"]), rand(*kv_shape), rand(*kv_shape)],
            lambda ins: [torch.empty(dec["batch"], dec["heads"], dec["dim"], device="cuda", dtype=torch.float16)],
            lambda: _returned(splitkv_decode.decode_splitkv(**dec)),
            lambda ins: decode_ref(*ins),
        )
    )
    out.append(
        (
            "persistent GEMM (driver.get_num_sms at build)",
            "persistent_gemm",
            lambda: [rand(pg["M"], pg["K"]), rand(pg["K"], pg["N"])],
            lambda ins: [torch.empty(pg["M"], pg["N"], device="cuda", dtype=torch.float16)],
            lambda: _explicit(tilelang.compile(persistent_gemm.persistent_gemm(**pg), target="cuda")),
            lambda ins: gemm_ref(*ins),
        )
    )
    out.append(
        (
            "hostile parameter names (x, stream, new, this, delete, int, ...)",
            "hostile",
            lambda: [torch.randn(4096, device="cuda") for _ in range(12)] + [1.5, 0.5, 3, 2],
            lambda ins: [],
            lambda: _explicit(tilelang.compile(hostile_names.hostile(), target="cuda")),
            lambda ins: hostile_ref(ins[:12], ins[12:]),
        )
    )
    out.append(
        (
            "RMS norm, tensor 'x', entry named 'new'",
            "new",
            lambda: [rand(rn["M"], rn["N"]), rand(rn["N"])],
            lambda ins: [torch.empty(rn["M"], rn["N"], device="cuda", dtype=torch.float16)],
            lambda: _explicit(tilelang.compile(hostile_names.rms_norm(**rn), target="cuda")),
            lambda ins: rms_ref(*ins),
        )
    )
    return out


def _explicit(kernel):
    """A JIT kernel that writes its result into an argument: call it on fresh result buffers."""

    def call(args, result_index):
        args = list(args)
        args[result_index] = torch.empty_like(args[result_index])
        kernel(*args)
        return args[result_index]

    return call


def _returned(kernel):
    """A JIT kernel that allocates and returns its output (it takes the inputs alone)."""
    return lambda args, result_index: kernel(*args[:result_index])


def _returned_kernel(jit_impl, config):
    """An eager @tilelang.jit function compiled once for these inputs and ``config``."""
    cache = {}

    def call(args, result_index):
        ins = args[:result_index]
        if "k" not in cache:
            cache["k"] = jit_impl.compile(*ins, **config)
        return cache["k"](*ins)

    return call


def run(lib_dir: Path) -> list[dict]:
    import tl_aot

    lib = tl_aot.load(lib_dir / "libtl_aot_conformance.so")
    rows = []
    for kind, entry, make_inputs, make_outputs, jit_factory, reference in cases(lib):
        row = {"kind": kind, "entry": entry, "built": True, "ran": False, "matches": "", "ratio": None}
        torch.manual_seed(0)
        ins = make_inputs()
        outs = make_outputs(ins)
        args = [*ins, *outs]
        result_index = len(ins) if outs else 5  # hostile writes its 6th tensor, 'result'
        fn = getattr(lib, entry)
        try:
            fn(*args)
            torch.cuda.synchronize()
            got = args[result_index]
            row["ran"] = True
        except Exception as e:  # noqa: BLE001 - the table records what broke
            row["error"] = f"{type(e).__name__}: {e}"
            rows.append(row)
            continue
        if lib.signature(entry).outputs:  # called as the JIT calls it: inputs alone, output returned
            try:
                row["returned_equal"] = bool(torch.equal(fn(*ins), got))
            except Exception as e:  # noqa: BLE001
                row["returned_equal"] = False
                row["returned_error"] = f"{type(e).__name__}: {e}"
        ref = reference(ins)
        row["vs_torch_max_err"] = float((got.float() - ref.float()).abs().max())
        expect = None
        try:
            t0 = time.perf_counter()
            jit = jit_factory()
            expect = jit(args, result_index)
            torch.cuda.synchronize()
            row["jit_compile_s"] = round(time.perf_counter() - t0, 2)
        except Exception as e:  # noqa: BLE001
            row["jit_error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200]}"
        if expect is not None:
            row["bitwise"] = bool(torch.equal(expect, got))
            row["matches"] = "bit for bit" if row["bitwise"] else f"max abs diff {float((expect.float() - got.float()).abs().max()):.3g}"
            t_aot = device_ms(lambda fn=fn, args=args: fn(*args))
            t_jit = device_ms(lambda jit=jit, args=args, ri=result_index: jit(args, ri))
            row.update(aot_ms=round(t_aot, 4), jit_ms=round(t_jit, 4), ratio=round(t_jit / t_aot, 3))
        else:
            ok = torch.allclose(got.float(), ref.float(), rtol=2e-2, atol=5e-2)
            row["matches"] = "no JIT to compare; matches torch" if ok else "MISMATCH vs torch"
            row["aot_ms"] = round(device_ms(lambda fn=fn, args=args: fn(*args)), 4)
        rows.append(row)
    return rows


def table(rows, device: str) -> str:
    lines = [
        f"Device: {device}; torch {torch.__version__}; one run of `python bench/conformance.py`.",
        "",
        "| kind of kernel | entry | built | ran | `out = entry(inputs)` | matches JIT | tl_aot ms | JIT ms | JIT / tl_aot |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        ratio = "" if r.get("ratio") is None else f"{r['ratio']:.3f}"
        returned = {None: "n/a (no outputs)", True: "equals in-place", False: "NO: " + r.get("returned_error", "differs")}
        lines.append(
            f"| {r['kind']} | `{r['entry']}` | {'yes' if r['built'] else 'no'} | {'yes' if r['ran'] else 'no: ' + r.get('error', '')} "
            f"| {returned[r.get('returned_equal')]} | {r['matches']} | {r.get('aot_ms', '')} | {r.get('jit_ms', '')} | {ratio} |"
        )
    notes = [f"- `{r['entry']}`: TileLang's JIT fails: {r['jit_error']}" for r in rows if r.get("jit_error")]
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows = run(args.lib)
    dev = torch.cuda.get_device_name()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table(rows, dev))
    args.out.with_suffix(".json").write_text(json.dumps({"device": dev, "rows": rows}, indent=1))
    print(table(rows, dev))


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
