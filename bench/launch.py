"""Figure 1: host launch overhead per call of the 1024-element kernel, and its floor.

Every candidate runs in this one process on the same tensors, interleaved round by round: a
round times BATCH back-to-back calls with ``time.perf_counter`` (host cost only), then
synchronises outside the timed region, so a tiny kernel's GPU time never becomes the bottleneck.

* ``tl_aot`` — the library entry (``lib.add_one(x, y)``, one tvm-ffi call); ``tl_aot_explicit_stream``
  passes torch's current stream handle instead of letting the launcher look it up;
* ``jit_tvm_ffi`` / ``jit_cython`` — TileLang's JIT kernel of the same code, called the documented
  way (``kernel(x, y)``); ``jit_tvm_ffi_executable`` calls the JIT's tvm-ffi function directly,
  without its Python wrapper (for the profile, not a goal);
* ``torch_add`` — ``torch.add(x, 1, out=y)``, the same work as a torch op;
* the floor: ``noop`` (a TVM-FFI function that does nothing, same arguments) + ``culaunch`` (a C++
  loop of ``cuLaunchKernel`` on the cubin tl_aot embedded, same batching).

An extra figure, ``tma_gemm:*``, times the same way a 256³ TMA GEMM (``gemm_small``: three TMA
descriptors encoded on the host per call) through tl_aot and the JIT, with the no-op as reference:
the launch path's descriptor cost, for the profile.
"""

from __future__ import annotations

import functools
import gc
import json
import subprocess
import time
from pathlib import Path

__all__ = ["run"]

ENTRY = "add_one"
TMA_ENTRY = "gemm_small"
DISPATCH_ENTRY = "add_one_16"


def _time_interleaved(cands: dict, *, calls: int, batch: int, warmup: int, sync) -> dict:
    """Per-call µs samples (one per batch) of each candidate ``name -> (fn, args)``, interleaved."""
    for fn, args in cands.values():
        for _ in range(warmup):
            fn(*args)
    sync()
    samples = {name: [] for name in cands}
    perf = time.perf_counter
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(max(1, calls // batch)):
            for name, (fn, args) in cands.items():
                rng = range(batch)
                t0 = perf()
                for _i in rng:
                    fn(*args)
                t1 = perf()
                sync()
                samples[name].append((t1 - t0) * 1e6 / batch)
    finally:
        if gc_was:
            gc.enable()
    return samples


def time_and_emit(rec, section: str, cands: dict, opts, torch) -> dict:
    """Time ``cands`` interleaved (:func:`_time_interleaved`), emit one line each; name -> median µs."""
    from bench.common import summarize

    samples = _time_interleaved(cands, calls=opts.calls, batch=opts.batch, warmup=opts.warmup, sync=torch.cuda.synchronize)
    figures = {}
    for name, s in samples.items():
        st = summarize(s)
        figures[name] = st["median"]
        rec.emit(section, name, us=round(st["median"], 4), min=round(st["min"], 4), p90=round(st["p90"], 4),
                 calls=st["n"] * opts.batch, batch=opts.batch)  # fmt: skip
    return figures


def _run_tool(ctx, name: str, argv: list[str], env: dict | None = None) -> tuple[dict, bool]:
    """Run the carried ``<libs>/<name>`` (``bench/cpp/<name>.cc``); if it does not run here, rebuild it with g++ and retry.

    Returns its JSON line and whether it was rebuilt here.
    """
    import tempfile

    p = subprocess.run([str(ctx.libs / name), *argv], capture_output=True, text=True, timeout=180, check=False, env=env)
    rebuilt = False
    if p.returncode != 0:
        from bench.build_libs import build_tool

        first = p.stderr.strip() or f"exit {p.returncode}"
        exe = build_tool(name, Path(tempfile.mkdtemp(prefix=f"{name}-")))
        p = subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=180, check=False, env=env)
        if p.returncode != 0:
            msg = f"{name} failed ({first}); rebuilt here, it failed again: {p.stderr.strip() or p.returncode}"
            raise RuntimeError(msg)
        rebuilt = True
    out = {}
    for line in p.stdout.strip().splitlines():  # the tool's JSON lines, merged
        if line.startswith("{"):
            out.update(json.loads(line))
    return out, rebuilt


def _launch_config(ctx) -> tuple[dict, list[str]]:
    """The launch entry's kernel config (``culaunch.json``) and the cubin/kernel/grid/block/smem arguments."""
    cfg = json.loads((ctx.libs / "culaunch.json").read_text())
    return cfg, [str(ctx.libs / cfg["cubin"]), cfg["kernel"], str(cfg["grid"][0]), str(cfg["block"][0]), str(cfg["smem"])]


def _culaunch(ctx, *, calls: int, batch: int) -> dict:
    """The C++ loop of cuLaunchKernel on the launch entry's cubin (``cpp/culaunch.cc``)."""
    cfg, kernel_args = _launch_config(ctx)
    out, rebuilt = _run_tool(ctx, "culaunch", [*kernel_args, str(cfg["num_ptr_args"]), str(cfg["bytes"]), str(calls), str(batch)])
    out["rebuilt_here"] = rebuilt
    out["kernel"] = cfg["kernel"]
    return out


def _candidates(ctx, rec, x, y, torch) -> dict:
    """Each candidate that could be set up and gives a correct result; the others get an error line."""
    cands = {}
    stream = torch.cuda.current_stream().cuda_stream

    def add(name, getter, check=True):
        try:
            fn, args = getter()
            if check:
                y.zero_()
                fn(*args)
                torch.cuda.synchronize()
                if not torch.equal(y, x + 1):
                    raise RuntimeError(f"{name} computed a wrong result")
            cands[name] = (fn, args)
        except Exception as e:  # noqa: BLE001 (one anchor failing must not lose the others)
            rec.emit("launch", name, error=f"{type(e).__name__}: {e}")

    add("tl_aot", lambda: (ctx.lib[ENTRY], (x, y)))
    add("tl_aot_explicit_stream", lambda: (ctx.lib[ENTRY], (x, y, stream)))
    add("noop", lambda: (ctx.noop("noop"), (x, y)), check=False)
    add("noop_env_stream", lambda: (ctx.noop("noop_env_stream"), (x, y)), check=False)
    add("torch_add", lambda: (functools.partial(torch.add, out=y), (x, 1)))
    if not ctx.options.no_jit:
        add("jit_tvm_ffi", lambda: (ctx.jit(ENTRY, "tvm_ffi", rec, "launch"), (x, y)))
        add("jit_tvm_ffi_executable", lambda: (_jit_executable(ctx.jit(ENTRY, "tvm_ffi")), (x, y)))
        add("jit_cython", lambda: (ctx.jit(ENTRY, "cython", rec, "launch"), (x, y)))
    return cands


def _jit_executable(kernel):
    """The tvm-ffi function behind a JIT kernel of the tvm_ffi backend (TileLang 0.1.15 internals).

    The adapter calls its executable module, whose ``__call__`` forwards to the module's ``main``
    function; taking ``main`` itself leaves exactly one tvm-ffi call, like a tl_aot entry.
    """
    adapter = kernel.adapter
    get = getattr(adapter, "_get_executable", None)
    module = get() if get is not None else adapter.executable
    if module is None:
        raise RuntimeError("this TileLang's JIT adapter exposes no executable")
    try:
        return module.main
    except AttributeError:
        return module


def run(ctx, rec) -> None:
    import torch

    opts = ctx.options
    x = torch.randn(1024, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    cands = _candidates(ctx, rec, x, y, torch)
    figures = time_and_emit(rec, "launch", cands, opts, torch)
    try:
        c = _culaunch(ctx, calls=opts.calls, batch=opts.batch)
        figures["culaunch"] = c["us_per_launch"]
        rec.emit("launch", "culaunch", us=round(c["us_per_launch"], 4), min=c["min"], back_to_back_us=c["back_to_back_us"],
                 calls=c["calls"], batch=c["batch"], rebuilt_here=c["rebuilt_here"])  # fmt: skip
    except Exception as e:  # noqa: BLE001
        rec.emit("launch", "culaunch", error=f"{type(e).__name__}: {e}")
    if "noop" in figures and "culaunch" in figures:
        rec.emit(
            "launch",
            "floor",
            us=round(figures["noop"] + figures["culaunch"], 4),
            parts={"noop": figures["noop"], "culaunch": figures["culaunch"]},
        )
    try:
        e = _entrycall(ctx, calls=opts.calls, batch=opts.batch)
        rec.emit("launch", "tl_aot_from_cpp", us=round(e["entry_us"], 4), culaunch_same_process_us=round(e["culaunch_us"], 4),
                 launcher_overhead_us=round(e["launcher_overhead_us"], 4), ctx_get_current_us=round(e["ctx_get_current_us"], 4),
                 env_stream_us=round(e["env_stream_us"], 4), calls=e["calls"], batch=e["batch"])  # fmt: skip
        figures["tl_aot_from_cpp"] = e["entry_us"]
        figures["culaunch_same_process"] = e["culaunch_us"]
        if "entry2_us" in e:
            n = len(ctx.lib.specialisations(DISPATCH_ENTRY))
            rec.emit("launch", "dispatch_from_cpp", entry=DISPATCH_ENTRY, specialisations=n, us=round(e["entry2_us"], 4),
                     direct_us=round(e["entry_us"], 4), adds_us=round(e["entry2_us"] - e["entry_us"], 4),
                     min_us=e["entry2_min_us"], direct_min_us=e["entry_min_us"])  # fmt: skip
    except Exception as err:  # noqa: BLE001
        rec.emit("launch", "tl_aot_from_cpp", error=f"{type(err).__name__}: {err}")
    _profile(rec, figures)
    if ctx.deadline.left() > 60:
        _tma_gemm(ctx, rec, torch)


def _entrycall(ctx, *, calls: int, batch: int) -> dict:
    """The launch entry called from C++, interleaved with plain cuLaunchKernel (``cpp/entrycall.cc``)."""
    import math
    import os

    import tvm_ffi.libinfo

    from tl_aot.codegen.render import DLPACK_DTYPES

    _, kernel_args = _launch_config(ctx)
    tensors = [p for p in ctx.lib.signature(ENTRY).params if p.is_tensor]
    (code, bits), *_ = DLPACK_DTYPES[tensors[0].dtype]
    elems = math.prod(int(d) for d in tensors[0].shape)
    argv = [str(ctx.lib.path.resolve()), ENTRY, str(len(tensors)), str(elems), str(code), str(bits), *kernel_args, str(calls), str(batch)]
    if DISPATCH_ENTRY in ctx.lib.entries:  # the same kernel behind 16 specialisations, the matching one last
        argv.append(DISPATCH_ENTRY)
    libdir = str(Path(tvm_ffi.libinfo.find_libtvm_ffi()).parent)  # the library links libtvm_ffi
    env = {**os.environ, "LD_LIBRARY_PATH": libdir + os.pathsep + os.environ.get("LD_LIBRARY_PATH", "")}
    return _run_tool(ctx, "entrycall", argv, env)[0]


def _profile(rec, figures: dict) -> None:
    """Where tl_aot's per-call µs go: Python + tvm-ffi, the launcher's own code, and the driver.

    ``python_and_tvm_ffi`` is the no-op called with the same tensors; ``launcher`` is the entry
    called from C++ minus plain cuLaunchKernel in that same process (``entrycall``); ``driver`` is
    the rest of the Python call: the driver's launch as reached from the interpreter.
    """
    need = ("tl_aot", "noop", "tl_aot_from_cpp", "culaunch_same_process")
    if not all(k in figures for k in need):
        return
    python_ffi = figures["noop"]
    launcher = figures["tl_aot_from_cpp"] - figures["culaunch_same_process"]
    driver = figures["tl_aot"] - python_ffi - launcher
    rec.emit("launch", "profile", tl_aot_us=round(figures["tl_aot"], 4), python_and_tvm_ffi_us=round(python_ffi, 4),
             launcher_us=round(launcher, 4), driver_launch_us=round(driver, 4),
             culaunch_loops_us=[round(figures.get("culaunch", float("nan")), 4), round(figures["culaunch_same_process"], 4)])  # fmt: skip


def _tma_gemm(ctx, rec, torch) -> None:
    """Launch overhead of a small TMA GEMM: tl_aot vs JIT (tvm_ffi), noop with the same tensors."""
    from bench.common import summarize

    opts = ctx.options
    try:
        sig = ctx.lib.signature(TMA_ENTRY)
    except KeyError:
        rec.emit("launch", f"tma_gemm:{TMA_ENTRY}", skipped="the bench library has no gemm_small entry (rebuild it)")
        return
    shapes = [tuple(int(d) for d in p.shape) for p in sig.params]
    a, b, c = (torch.randn(s, device="cuda", dtype=torch.float16) for s in shapes)
    ref = a @ b
    cands = {}

    def add(name, getter, check=True):
        try:
            fn, args = getter()
            if check:
                c.zero_()
                fn(*args)
                torch.cuda.synchronize()
                err = float((c.float() - ref.float()).abs().max() / ref.float().abs().max())
                if err > 2e-2:
                    raise RuntimeError(f"{name} computed a wrong result (relative error {err:.3g})")
            cands[name] = (fn, args)
        except Exception as e:  # noqa: BLE001
            rec.emit("launch", f"tma_gemm:{name}", error=f"{type(e).__name__}: {e}")

    add("tl_aot", lambda: (ctx.lib[TMA_ENTRY], (a, b, c)))
    add("noop", lambda: (ctx.noop("noop"), (a, b, c)), check=False)
    if not opts.no_jit:
        add("jit_tvm_ffi", lambda: (ctx.jit(TMA_ENTRY, "tvm_ffi", rec, "launch"), (a, b, c)))
    calls = max(opts.batch, opts.calls // 3)
    samples = _time_interleaved(cands, calls=calls, batch=opts.batch, warmup=opts.warmup // 4, sync=torch.cuda.synchronize)
    for name, s in samples.items():
        st = summarize(s)
        rec.emit("launch", f"tma_gemm:{name}", entry=TMA_ENTRY, us=round(st["median"], 4), min=round(st["min"], 4), p90=round(st["p90"], 4),
                 calls=st["n"] * opts.batch, batch=opts.batch)  # fmt: skip
