"""Figure: host time per call of the 1024-element kernel when the call returns its output (issue 12).

Timed exactly like ``launch`` (interleaved batches, ``time.perf_counter``, synchronised outside the
timed region), all in this process on the same input:

* ``tl_aot_returns`` — ``y = lib.add_one_ret(x)``: the entry allocates Y through torch's allocator
  (TVMFFIEnvTensorAlloc) and returns it; ``tl_aot_explicit`` — ``lib.add_one(x, y)`` (today's path);
* ``jit_tvm_ffi_returns`` — TileLang's JIT of the same factory with ``out_idx=[-1]``: ``y = kernel(x)``;
* ``torch_op`` — ``torch.ops.tl_aot_bench.add_one_ret(x)`` (the entry registered as a torch op), eager;
* ``compiled_op`` / ``compiled_op_x8`` — ``torch.compile(fullgraph=True)`` of a function calling the
  op once / 8 times in a chain; ``direct_x8`` calls the entry 8 times in a chain. The op's cost
  inside a compiled graph is ``(compiled_op_x8 - compiled_op) / 7``, beside the direct call's
  ``(direct_x8 - tl_aot_returns) / 7``: torch.compile's fixed cost per call (guards, the wrapper)
  is the same for both and drops out. ``compiled_direct`` compiles ``x + 1`` for that fixed cost;
* anchors: ``noop`` (a TVM-FFI function doing nothing, same argument), ``noop_alloc`` (a TVM-FFI
  function that allocates the output through the environment allocator and returns it) and
  ``torch_empty`` (``torch.empty(1024, device="cuda")``); with ``launch``'s ``culaunch`` the floor
  is ``noop + torch_empty + culaunch``.
"""

from __future__ import annotations

__all__ = ["run"]

ENTRY = "add_one_ret"


def run(ctx, rec) -> None:
    import torch

    from bench.launch import _culaunch, time_and_emit

    opts = ctx.options
    try:
        ctx.lib.signature(ENTRY)
    except KeyError:
        rec.emit("returns", ENTRY, skipped="the bench library has no add_one_ret entry (rebuild it)")
        return
    x = torch.randn(1024, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    want = x + 1
    cands = {}

    def add(name, getter, check=True):
        try:
            fn, args = getter()
            if check:
                out = fn(*args)
                torch.cuda.synchronize()
                got = y if out is None else out
                if not torch.equal(got, want):
                    raise RuntimeError(f"{name} computed a wrong result")
            cands[name] = (fn, args)
        except Exception as e:  # noqa: BLE001 (one anchor failing must not lose the others)
            rec.emit("returns", name, error=f"{type(e).__name__}: {e}")

    def op():
        ops = ctx.lib.register_torch_ops("tl_aot_bench")
        return ops.add_one_ret, (x,)

    def compiled(body):
        fn = torch.compile(body, fullgraph=True)
        for _ in range(3):
            fn(x)
        return fn, (x,)

    def chain(fn, n=8):
        def call(t):
            for _ in range(n):
                t = fn(t)
            return t

        return call

    add("tl_aot_returns", lambda: (ctx.lib[ENTRY], (x,)))
    add("tl_aot_explicit", lambda: (ctx.lib["add_one"], (x, y)))
    add("noop", lambda: (ctx.noop("noop"), (x,)), check=False)
    add("noop_alloc", lambda: (ctx.noop("noop_alloc"), (x,)), check=False)
    add("direct_x8", lambda: (chain(ctx.lib[ENTRY]), (x,)), check=False)
    add("torch_empty", lambda: (lambda: torch.empty(1024, device="cuda"), ()), check=False)
    add("torch_op", op)
    add("compiled_op", lambda: compiled(lambda t: torch.ops.tl_aot_bench.add_one_ret(t)))
    add("compiled_op_x8", lambda: compiled(chain(lambda t: torch.ops.tl_aot_bench.add_one_ret(t))), check=False)
    add("compiled_direct", lambda: compiled(lambda t: t + 1))
    if not opts.no_jit:
        add("jit_tvm_ffi_returns", lambda: (ctx.jit(ENTRY, "tvm_ffi", rec, "returns"), (x,)))
    figures = time_and_emit(rec, "returns", cands, opts, torch)
    try:
        c = _culaunch(ctx, calls=opts.calls, batch=opts.batch)
        figures["culaunch"] = c["us_per_launch"]
        rec.emit("returns", "culaunch", us=round(c["us_per_launch"], 4), calls=c["calls"], batch=c["batch"])
    except Exception as e:  # noqa: BLE001
        rec.emit("returns", "culaunch", error=f"{type(e).__name__}: {e}")
    if all(k in figures for k in ("compiled_op", "compiled_op_x8", "direct_x8", "tl_aot_returns")):
        in_graph = (figures["compiled_op_x8"] - figures["compiled_op"]) / 7
        direct = (figures["direct_x8"] - figures["tl_aot_returns"]) / 7
        rec.emit("returns", "op_in_compiled_graph", us=round(in_graph, 4), direct_us=round(direct, 4), adds_us=round(in_graph - direct, 4))
    if all(k in figures for k in ("noop", "torch_empty", "culaunch")):
        parts = {k: round(figures[k], 4) for k in ("noop", "torch_empty", "culaunch")}
        rec.emit("returns", "floor", us=round(sum(parts.values()), 4), parts=parts)
