"""Figure 3: cold start, each in a fresh process: process start → first correct result.

The parent notes the wall clock, spawns ``python bench/coldstart.py --child MODE`` and the child
reports, relative to that instant, when ``import torch`` finished, when the CUDA inputs were
ready, and when the first result was on the host side of a synchronisation (checked afterwards,
outside the timing). Modes:

* ``torch`` — the same work as a torch op (the floor of any torch program);
* ``tl_aot`` — ``tl_aot.load`` + the first call (the library loads its cubin on that call);
* ``jit_warm`` — ``import tilelang`` + ``tilelang.compile`` (tvm_ffi backend) hitting a warm
  TileLang cache (primed by one untimed child first) + the first call;
* ``jit_empty`` — the same with ``TILELANG_CACHE_DIR`` pointing at a new empty folder.

The goal figure is ``beyond_import_torch_s`` = first result − end of ``import torch``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # a child: import bench.* and tl_aot, never bench/'s files as top-level modules
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

__all__ = ["run"]

_MARK = "COLDSTART_JSON "
HERE = Path(__file__).resolve().parent


# ----------------------------------------------------------------------------------------------
# Parent side (inside run.py)
# ----------------------------------------------------------------------------------------------
def _spawn(mode: str, entry: str, libs: Path, factory: tuple, *, env_extra: dict | None = None, timeout: float = 240) -> dict:
    """Run one child; its report, with the parent-measured process wall time added."""
    env = dict(os.environ)
    env.update(env_extra or {})
    env["PYTHONUNBUFFERED"] = "1"
    cmd = [sys.executable, str(HERE / "coldstart.py"), "--child", mode, "--entry", entry, "--libs", str(libs)]
    cmd += ["--function", factory[0], "--kwargs", json.dumps(factory[1])]
    env["TL_AOT_BENCH_T0"] = repr(time.time())
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    wall = time.time() - float(env["TL_AOT_BENCH_T0"])
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(_MARK):
            out = json.loads(line[len(_MARK) :])
            out["process_wall_s"] = wall
            return out
    tail = (p.stderr or p.stdout).strip().splitlines()[-5:]
    msg = f"child {mode} exited {p.returncode} without a result: " + " | ".join(tail)
    raise RuntimeError(msg)


def _measure(rec, ctx, entry: str, mode: str, repeats: int, env_for_repeat) -> None:
    from bench.anchors import factory_args
    from bench.common import summarize

    factory = factory_args(ctx.lib.signature(entry))
    child = "jit" if mode.startswith("jit") else mode

    runs = []
    for i in range(repeats):
        if ctx.deadline.left() < 20:
            break
        extra, cleanup = env_for_repeat(i)
        try:
            runs.append(_spawn(child, entry, ctx.libs, factory, env_extra=extra, timeout=_timeout(ctx)))
        finally:
            cleanup()
    if not runs:
        rec.emit("coldstart", f"{entry}:{mode}", entry=entry, mode=mode, skipped="time budget spent")
        return
    fields = {"entry": entry, "mode": mode, "repeats": len(runs)}
    for key in ("beyond_import_torch_s", "beyond_inputs_s", "first_result_s", "import_torch_s", "process_wall_s"):
        fields[key] = round(summarize([r[key] for r in runs])["median"], 4)
    for key in ("import_s", "load_s", "first_call_s"):  # tl_aot's own steps
        if all(key in r for r in runs):
            fields[key] = round(summarize([r[key] for r in runs])["median"], 4)
    fields["min_beyond_import_torch_s"] = round(min(r["beyond_import_torch_s"] for r in runs), 4)
    fields["ok"] = all(r["ok"] for r in runs)
    rec.emit("coldstart", f"{entry}:{mode}", **fields)


def _timeout(ctx) -> float:
    """A child may use what is left of the run's budget (at least 30 s, at most 240 s)."""
    return min(240.0, max(30.0, ctx.deadline.left()))


def _no_env(_i):
    return {}, lambda: None


def run(ctx, rec) -> None:
    opts = ctx.options
    warm_cache = os.environ.get("TILELANG_CACHE_DIR", "")
    for entry in opts.cold_entries:
        modes = ["torch", "tl_aot"]
        if not opts.no_jit:
            modes.append("jit_warm")
            if entry == "add_one" or opts.cold_empty_all:
                modes.append("jit_empty")
        for mode in modes:
            try:
                if mode == "jit_warm":
                    from bench.anchors import factory_args

                    # One untimed child fills the warm cache, should the earlier sections not have.
                    prime = _spawn("jit", entry, ctx.libs, factory_args(ctx.lib.signature(entry)), timeout=_timeout(ctx))
                    t = round(prime["first_result_s"], 3)
                    rec.emit(
                        "coldstart",
                        f"{entry}:jit_prime",
                        entry=entry,
                        mode="jit_prime",
                        first_result_s=t,
                        ok=prime["ok"],
                        cache_dir=warm_cache,
                    )
                    _measure(rec, ctx, entry, mode, opts.cold_repeats, _no_env)
                elif mode == "jit_empty":

                    def empty_cache(_i):
                        d = tempfile.mkdtemp(prefix="tilelang-empty-cache-")
                        return {"TILELANG_CACHE_DIR": d}, lambda: shutil.rmtree(d, ignore_errors=True)

                    _measure(rec, ctx, entry, mode, opts.cold_repeats, empty_cache)
                else:
                    _measure(rec, ctx, entry, mode, opts.cold_repeats, _no_env)
            except Exception as e:  # noqa: BLE001 (the next mode still runs)
                rec.emit("coldstart", f"{entry}:{mode}", entry=entry, mode=mode, error=f"{type(e).__name__}: {e}")


# ----------------------------------------------------------------------------------------------
# Child side: a fresh interpreter; imports only what its mode needs.
# ----------------------------------------------------------------------------------------------
def _child(mode: str, entry_name: str, libs: Path, function: str, kwargs: dict) -> dict:
    t0 = float(os.environ["TL_AOT_BENCH_T0"])
    interpreter = time.time() - t0
    import torch

    import_torch = time.time() - t0
    args = _make_inputs(entry_name, torch)
    torch.cuda.synchronize()
    inputs = time.time() - t0
    parts: dict[str, float] = {}
    if mode == "torch":
        _torch_reference(entry_name, args, torch)
    elif mode == "tl_aot":
        t = time.time()
        import tl_aot

        parts["import_s"] = time.time() - t
        t = time.time()
        lib = tl_aot.load(libs / "libtl_aot_bench.so")
        parts["load_s"] = time.time() - t
        t = time.time()
        lib[entry_name](*args)
        torch.cuda.synchronize()
        parts["first_call_s"] = time.time() - t
    elif mode == "jit":
        import tilelang

        from bench import kernels

        kernel = tilelang.compile(getattr(kernels, function)(**kwargs), target="cuda", execution_backend="tvm_ffi")
        kernel(*args)
    else:
        raise SystemExit(f"unknown mode {mode}")
    torch.cuda.synchronize()
    done = time.time() - t0
    return {
        "mode": mode,
        "entry": entry_name,
        "ok": _check(entry_name, args, torch),
        "first_result_s": done,
        "import_torch_s": import_torch,
        "interpreter_s": interpreter,
        "inputs_s": inputs,
        "beyond_import_torch_s": done - import_torch,
        "beyond_inputs_s": done - inputs,
        **parts,
    }


def _make_inputs(entry: str, torch):
    gen = torch.Generator(device="cuda").manual_seed(0)
    if entry == "add_one":
        x = torch.randn(1024, device="cuda", generator=gen)
        return [x, torch.empty_like(x)]
    if entry.startswith("gemm"):
        dt = torch.bfloat16 if entry.endswith("bf16") else torch.float16
        a = torch.randn(8192, 8192, device="cuda", dtype=dt, generator=gen)
        b = torch.randn(8192, 8192, device="cuda", dtype=dt, generator=gen)
        return [a, b, torch.empty_like(a)]
    raise SystemExit(f"no cold-start inputs for {entry}")


def _torch_reference(entry: str, args, torch) -> None:
    if entry == "add_one":
        torch.add(args[0], 1, out=args[1])
    else:
        torch.matmul(args[0], args[1], out=args[2])


def _check(entry: str, args, torch) -> bool:
    if entry == "add_one":
        return bool(torch.equal(args[1], args[0] + 1))
    ref = (args[0].float() @ args[1].float()).to(args[2].dtype)
    return bool(((args[2].float() - ref.float()).abs().max() / ref.float().abs().max()) < 2e-2)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="one cold-start child (spawned by bench/run.py)")
    ap.add_argument("--child", required=True, choices=["torch", "tl_aot", "jit"])
    ap.add_argument("--entry", default="add_one")
    ap.add_argument("--libs", required=True)
    ap.add_argument("--function", default="add_one", help="factory in bench/kernels.py (jit mode)")
    ap.add_argument("--kwargs", default="{}", help="its arguments as JSON (jit mode)")
    a = ap.parse_args(argv)
    out = _child(a.child, a.entry, Path(a.libs), a.function, json.loads(a.kwargs))
    print(_MARK + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
