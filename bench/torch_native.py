"""Figure: the 1024-element returning entry as a native torch op (issue 27), beside the direct call.

Timed like ``returns`` (interleaved batches, synchronised outside the timed region), in this process:

* ``direct`` — ``lib.add_one_ret(x)``, the direct tvm-ffi call; ``direct_x8`` chains it 8 times;
* ``native_op`` — ``torch.ops.tl_aot_bench.add_one_ret(x)`` served by the companion's C++ kernel
  (``lib<name>_torch.so``), eager; ``python_op`` — the same op registered the Python way
  (namespace ``tl_aot_bench_py``), for comparison;
* ``compiled_native`` / ``compiled_native_x8`` — ``torch.compile(fullgraph=True)`` of one / 8
  chained native ops: the op's cost inside a graph is ``(x8 - x1) / 7``, beside the direct call's
  ``(direct_x8 - direct) / 7`` (the compiled wrapper's fixed cost drops out);
* ``native_op_default`` — ``torch.ops.tl_aot_bench.add_one_ret.default(x)``, the overload a compiled
  graph's Python wrapper calls; ``compiled_native_cpp`` / ``_x8`` — the same graphs with Inductor's
  C++ wrapper (``options={"cpp_wrapper": True}``), which calls the op without Python;
* anchors: ``jit_tvm_ffi_returns`` (TileLang's JIT, ``out_idx=[-1]``) and ``torch_add``
  (``torch.add(x, 1)``, a plain torch op of the same work).

Emits ``native_in_compiled_graph`` (the goal's difference) and which backend served each namespace.
"""

from __future__ import annotations

__all__ = ["run"]

ENTRY = "add_one_ret"


def _chain(fn, n=8):
    def call(t):
        for _ in range(n):
            t = fn(t)
        return t

    return call


def run(ctx, rec) -> None:
    import torch

    from bench.launch import time_and_emit

    opts = ctx.options
    if ctx.lib.torch_companion is None:
        rec.emit("torch_native", "skipped", skipped="the bench library has no torch companion (rebuild it: bench.toml torch_ops)")
        return
    native = ctx.lib.register_torch_ops("tl_aot_bench", backend="native")
    python = ctx.lib.register_torch_ops("tl_aot_bench_py", backend="python")
    rec.emit("torch_native", "backends", native=native.backend, python=python.backend, torch=torch.__version__)
    x = torch.randn(1024, device="cuda", dtype=torch.float32)
    want = x + 1
    cands = {}

    def add(name, getter, check=True):
        try:
            fn, args = getter()
            if check:
                out = fn(*args)
                torch.cuda.synchronize()
                if not torch.equal(out, want):
                    raise RuntimeError(f"{name} computed a wrong result")
            cands[name] = (fn, args)
        except Exception as e:  # noqa: BLE001 (one candidate failing must not lose the others)
            rec.emit("torch_native", name, error=f"{type(e).__name__}: {e}")

    def compiled(body, **options):
        fn = torch.compile(body, fullgraph=True, options=options or None)
        for _ in range(3):
            fn(x)
        return fn, (x,)

    op = getattr(native, ENTRY)
    add("direct", lambda: (ctx.lib[ENTRY], (x,)))
    add("direct_x8", lambda: (_chain(ctx.lib[ENTRY]), (x,)), check=False)
    add("native_op", lambda: (op, (x,)))
    add("python_op", lambda: (getattr(python, ENTRY), (x,)))
    add("compiled_native", lambda: compiled(lambda t: torch.ops.tl_aot_bench.add_one_ret(t)))
    add("compiled_native_x8", lambda: compiled(_chain(lambda t: torch.ops.tl_aot_bench.add_one_ret(t))), check=False)
    add("native_op_default", lambda: (op.default, (x,)))
    add("compiled_native_cpp", lambda: compiled(lambda t: torch.ops.tl_aot_bench.add_one_ret(t), cpp_wrapper=True))
    add("compiled_native_cpp_x8", lambda: compiled(_chain(lambda t: torch.ops.tl_aot_bench.add_one_ret(t)), cpp_wrapper=True), check=False)
    add("torch_add", lambda: (torch.add, (x, 1)))
    if not opts.no_jit:
        add("jit_tvm_ffi_returns", lambda: (ctx.jit(ENTRY, "tvm_ffi", rec, "torch_native"), (x,)))
    figures = time_and_emit(rec, "torch_native", cands, opts, torch)
    if all(k in figures for k in ("compiled_native", "compiled_native_x8", "direct_x8", "direct")):
        in_graph = (figures["compiled_native_x8"] - figures["compiled_native"]) / 7
        direct = (figures["direct_x8"] - figures["direct"]) / 7
        figs = {"us": round(in_graph, 4), "direct_us": round(direct, 4), "adds_us": round(in_graph - direct, 4)}
        rec.emit("torch_native", "native_in_compiled_graph", **figs)
        if all(k in figures for k in ("compiled_native_cpp", "compiled_native_cpp_x8")):
            cpp = (figures["compiled_native_cpp_x8"] - figures["compiled_native_cpp"]) / 7
            figs = {"us": round(cpp, 4), "direct_us": round(direct, 4), "adds_us": round(cpp - direct, 4)}
            rec.emit("torch_native", "native_in_compiled_graph_cpp_wrapper", **figs)
