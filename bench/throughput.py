"""Figure 2: device throughput, CUDA-event timed: tl_aot vs TileLang's JIT (same code) vs torch/cuBLAS.

For each kernel the three implementations write separate outputs from the same inputs, are checked
against torch, then timed in interleaved rounds (events around ``reps`` back-to-back calls, the
median round reported), so clock and thermal drift hit all three alike.
"""

from __future__ import annotations

__all__ = ["run", "KERNELS"]

KERNELS = ("gemm_f16", "gemm_bf16", "softmax")
_TORCH_DTYPES = {"float16": "float16", "bfloat16": "bfloat16", "float32": "float32"}


def _inputs(entry, torch):
    """Input tensors per the entry's signature, and the torch reference (callable, work figures)."""
    from bench.anchors import factory_args

    function, _ = factory_args(entry)
    shapes = {p.name: tuple(int(d) for d in p.shape) for p in entry.params}
    dtype = getattr(torch, _TORCH_DTYPES[entry.params[0].dtype])
    gen = torch.Generator(device="cuda").manual_seed(0)
    if function == "matmul":
        a = torch.randn(shapes["A"], device="cuda", dtype=dtype, generator=gen)
        b = torch.randn(shapes["B"], device="cuda", dtype=dtype, generator=gen)
        m, k = shapes["A"]
        n = shapes["B"][1]

        def torch_fn(out):
            torch.matmul(a, b, out=out)

        return (a, b), shapes["C"], dtype, torch_fn, {"flop": 2 * m * n * k}
    if function == "softmax":
        x = torch.randn(shapes["X"], device="cuda", dtype=dtype, generator=gen)

        def torch_fn(out):
            torch.softmax(x, dim=-1, out=out)

        return (x,), shapes["Y"], dtype, torch_fn, {"bytes": 2 * x.numel() * x.element_size()}
    raise RuntimeError(f"no throughput inputs for factory {function!r}")


def _rel_err(out, ref) -> float:
    return float((out.float() - ref.float()).abs().max() / ref.float().abs().max().clamp_min(1e-30))


def _bench_kernel(ctx, rec, name, torch) -> None:
    opts = ctx.options
    entry = ctx.lib.signature(name)
    ins, out_shape, dtype, torch_fn, work = _inputs(entry, torch)
    ref = torch.empty(out_shape, device="cuda", dtype=dtype)
    torch_fn(ref)
    impls = {"torch": torch_fn}
    outs = {"torch": ref}
    aot = ctx.lib[name]
    outs["tl_aot"] = torch.empty_like(ref)
    impls["tl_aot"] = lambda out: aot(*ins, out)
    if not opts.no_jit:
        try:
            jk = ctx.jit(name, "tvm_ffi", rec, "throughput")
            outs["jit_tvm_ffi"] = torch.empty_like(ref)
            impls["jit_tvm_ffi"] = lambda out: jk(*ins, out)
        except Exception as e:  # noqa: BLE001
            rec.emit("throughput", f"{name}:jit_tvm_ffi", kernel=name, impl="jit_tvm_ffi", error=f"{type(e).__name__}: {e}")
    errors = {}
    for impl, fn in impls.items():
        fn(outs[impl])
    torch.cuda.synchronize()
    for impl in impls:
        errors[impl] = _rel_err(outs[impl], ref)
    reps = opts.gemm_reps if "flop" in work else opts.reps
    for impl, fn in impls.items():  # warm-up
        for _ in range(2):
            fn(outs[impl])
    torch.cuda.synchronize()
    times = {impl: [] for impl in impls}
    for _ in range(opts.rounds):
        for impl, fn in impls.items():
            out = outs[impl]
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _i in range(reps):
                fn(out)
            end.record()
            end.synchronize()
            times[impl].append(start.elapsed_time(end) / reps)
    from bench.common import summarize

    for impl, t in times.items():
        st = summarize(t)
        ms = st["median"]
        fields = {"kernel": name, "impl": impl, "ms": round(ms, 5), "min_ms": round(st["min"], 5), "max_ms": round(st["max"], 5)}
        if "flop" in work:
            fields["tflops"] = round(work["flop"] / (ms * 1e-3) / 1e12, 2)
        else:
            fields["gbps"] = round(work["bytes"] / (ms * 1e-3) / 1e9, 1)
        tol = 2e-2 if "flop" in work else 1e-2
        fields["max_rel_err"] = float(f"{errors[impl]:.3g}")
        fields["ok"] = bool(errors[impl] <= tol)
        fields["reps"] = reps
        fields["rounds"] = opts.rounds
        rec.emit("throughput", f"{name}:{impl}", **fields)


def run(ctx, rec) -> None:
    import torch

    for name in KERNELS:
        if ctx.deadline.left() < 30:
            rec.emit("throughput", name, kernel=name, skipped="time budget spent")
            continue
        try:
            _bench_kernel(ctx, rec, name, torch)  # its tensors are freed on return
        except Exception as e:  # noqa: BLE001 (the next kernel still runs)
            import traceback

            traceback.print_exc()
            rec.emit("throughput", name, kernel=name, error=f"{type(e).__name__}: {e}")
        torch.cuda.empty_cache()
