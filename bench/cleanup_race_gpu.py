"""Launches racing ``cleanup_module`` on a GPU (issue 42): many threads and processes, every launch checked.

    python bench/cleanup_race_gpu.py [--lib PATH] [--launches 1000000] [--threads 16] [--processes 1]
                                     [--entries add_one,gemm_dyn] [--cleanup-ms 1] [--out FILE]

Each process loads the library (default ``$TL_AOT_TEST_LIBDIR/libtl_aot_testlib.so``, the test
library of ``tests/kernels/testlib.toml``), starts ``--threads`` threads that launch from it on
streams of their own, and one more thread that calls ``cleanup()`` every ``--cleanup-ms`` while
they do. Every launch is checked: ``add_one`` threads chain their calls (x -> y -> x ...), so after
k calls the last buffer must hold x0 + k exactly, read every ``--check-every`` calls (a launch lost,
doubled or run on a stale module shows); ``gemm_dyn`` threads (a TMA entry) compare with torch at
the same interval. A call that raises is counted by its message and launched nothing, so the chain
goes on. Each process runs as a child of this one, so a crash is counted (its signal), not lost.

Prints one JSON line per process and a summary: launches, launches verified, wrong results,
errors (clear: a Python exception naming the entry; else unclear), cleanups, crashes, launches/s.
Exits 0 when there is no crash, no wrong result and no unclear error. Needs torch and a GPU with
an image in the library (sm_80 or sm_90a for the test library).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: A thread whose calls fail this many times in a row stops (its launches then fall short: the run fails).
MAX_FAILED_IN_A_ROW = 100


def default_lib() -> Path | None:
    libdir = os.environ.get("TL_AOT_TEST_LIBDIR")
    return Path(libdir) / "libtl_aot_testlib.so" if libdir else None


# ---------------------------------------------------------------------------------------------
# One process: threads launching, one thread cleaning up.
# ---------------------------------------------------------------------------------------------


class Counts:
    """What one process saw, added up across its threads under one lock (taken per check, not per call)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.launches = 0
        self.verified = 0
        self.wrong = 0
        self.errors: collections.Counter = collections.Counter()
        self.cleanups = 0
        self.cleanup_errors: collections.Counter = collections.Counter()

    def add(self, launches: int, verified: int, wrong: int) -> None:
        with self.lock:
            self.launches += launches
            self.verified += verified
            self.wrong += wrong

    def error(self, table: collections.Counter, e: BaseException) -> None:
        with self.lock:
            table[f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"] += 1


def _add_one_thread(lib, torch, i: int, calls: int, check_every: int, counts: Counts, start: threading.Barrier) -> None:
    """A chain of add_one calls on a stream of its own: after k calls the last buffer holds x0 + k."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        n = 1024 + 61 * i  # every thread its own size
        x0 = (torch.arange(n, device="cuda", dtype=torch.float32) * 7 + i) % 1000
        bufs = [x0.clone(), torch.empty_like(x0)]
        done = since = failed = 0
        stream.synchronize()
        start.wait()
        while done < calls:
            try:
                lib.add_one(bufs[done % 2], bufs[(done + 1) % 2])
            except Exception as e:  # noqa: BLE001 - counted, the chain goes on (nothing was launched)
                counts.error(counts.errors, e)
                failed += 1
                if failed == MAX_FAILED_IN_A_ROW:
                    msg = f"thread {i}: {failed} calls in a row failed; it stopped"
                    raise RuntimeError(msg) from e
                continue
            failed = 0
            done += 1
            since += 1
            if since == check_every or done == calls:
                stream.synchronize()
                ok = torch.equal(bufs[done % 2], x0 + done)
                counts.add(since, since if ok else 0, 0 if ok else since)
                if not ok:  # start the chain again from a known value
                    bufs[done % 2].copy_(x0 + done)
                since = 0


def _gemm_thread(lib, torch, i: int, calls: int, check_every: int, counts: Counts, start: threading.Barrier) -> None:
    """gemm_dyn (TMA descriptors, a second module) with its own m; every check_every-th result against torch."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        m = 64 + i
        a = torch.randn(m, 512, device="cuda", dtype=torch.float16)
        b = torch.randn(512, 512, device="cuda", dtype=torch.float16)
        c = torch.empty(m, 512, device="cuda", dtype=torch.float16)
        ref = (a.float() @ b.float()).to(torch.float16)
        done = since = failed = 0
        stream.synchronize()
        start.wait()
        while done < calls:
            checking = since + 1 == check_every or done + 1 == calls
            if checking:
                c.fill_(float("nan"))
            try:
                lib.gemm_dyn(a, b, c)
            except Exception as e:  # noqa: BLE001 - counted, the chain goes on (nothing was launched)
                counts.error(counts.errors, e)
                failed += 1
                if failed == MAX_FAILED_IN_A_ROW:
                    msg = f"thread {i}: {failed} calls in a row failed; it stopped"
                    raise RuntimeError(msg) from e
                continue
            failed = 0
            done += 1
            since += 1
            if checking:
                stream.synchronize()
                ok = bool(torch.allclose(c.float(), ref.float(), rtol=2e-2, atol=2e-1))
                counts.add(since, since if ok else 0, 0 if ok else since)
                since = 0


def _guarded(fn, *args) -> None:
    """Runs one thread's work; an error before or outside its calls is counted and releases the others."""
    counts, start = args[-2], args[-1]
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - counted; the launch total then falls short and the run fails
        counts.error(counts.errors, e)
        start.abort()


def child(args) -> int:
    import torch

    import tl_aot

    lib = tl_aot.load(args.lib)
    entries = args.entries.split(",")
    counts = Counts()
    start = threading.Barrier(args.threads + 1)
    per_thread = [args.launches // args.threads + (1 if i < args.launches % args.threads else 0) for i in range(args.threads)]
    kinds = {"add_one": _add_one_thread, "gemm_dyn": _gemm_thread}
    workers = [
        threading.Thread(
            target=_guarded, args=(kinds[entries[i % len(entries)]], lib, torch, i, per_thread[i], args.check_every, counts, start)
        )
        for i in range(args.threads)
    ]
    for w in workers:
        w.start()
    stop = threading.Event()

    def cleaner() -> None:
        try:
            start.wait()
        except threading.BrokenBarrierError:
            return
        while not stop.is_set():
            try:
                rc = lib.cleanup()
                with counts.lock:
                    counts.cleanups += 1
                    if rc != 0:
                        counts.cleanup_errors[f"CUresult {rc}"] += 1
            except Exception as e:  # noqa: BLE001 - counted
                counts.error(counts.cleanup_errors, e)
            time.sleep(args.cleanup_ms / 1000)

    t0 = time.perf_counter()
    c = threading.Thread(target=cleaner)
    c.start()
    for w in workers:
        w.join()
    stop.set()
    c.join()
    seconds = time.perf_counter() - t0
    torch.cuda.synchronize()
    final = lib.cleanup()
    print(
        json.dumps(
            {"figure": "cleanup_race_process", "pid": os.getpid(), "device": torch.cuda.get_device_name(0),
             "threads": args.threads, "entries": entries, "launches": counts.launches, "verified": counts.verified,
             "wrong": counts.wrong, "errors": dict(counts.errors), "cleanups": counts.cleanups,
             "cleanup_errors": dict(counts.cleanup_errors), "final_cleanup": final, "seconds": round(seconds, 3)},
            sort_keys=True,
        ),
        flush=True,
    )  # fmt: skip
    return 0


# ---------------------------------------------------------------------------------------------
# The parent: children, crashes, the summary.
# ---------------------------------------------------------------------------------------------


def is_clear(message: str, entries: list[str]) -> bool:
    """A clear error: a Python exception of the library's kinds whose message names the entry."""
    kind, _, text = message.partition(": ")
    return kind in ("RuntimeError", "ValueError", "TypeError") and any(text.startswith(f"{e}:") for e in entries)


def parent(args) -> int:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    per_child = [args.launches // args.processes + (1 if i < args.launches % args.processes else 0) for i in range(args.processes)]
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--lib", str(args.lib), "--threads", str(args.threads)]
    cmd += ["--entries", args.entries, "--cleanup-ms", str(args.cleanup_ms), "--check-every", str(args.check_every)]
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen([*cmd, "--launches", str(n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for n in per_child
    ]
    lines, crashes = [], []
    for p in procs:
        out, err = p.communicate()
        results = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        if p.returncode != 0 or not results:
            why = f"signal {signal.Signals(-p.returncode).name}" if p.returncode < 0 else f"exit status {p.returncode}"
            crashes.append({"pid": p.pid, "why": why, "stderr": err[-2000:]})
        lines.extend(results)
    seconds = time.perf_counter() - t0
    entries = args.entries.split(",")
    errors: collections.Counter = collections.Counter()
    cleanup_errors: collections.Counter = collections.Counter()
    for line in lines:
        errors.update(line["errors"])
        cleanup_errors.update(line["cleanup_errors"])
    unclear = {m: n for m, n in errors.items() if not is_clear(m, entries)}
    summary = {
        "figure": "cleanup_race",
        "device": lines[0]["device"] if lines else None,
        "processes": args.processes,
        "threads_per_process": args.threads,
        "entries": entries,
        "launches": sum(x["launches"] for x in lines),
        "verified": sum(x["verified"] for x in lines),
        "wrong": sum(x["wrong"] for x in lines),
        "errors_clear": sum(n for m, n in errors.items() if m not in unclear),
        "errors_unclear": sum(unclear.values()),
        "error_messages": dict(errors.most_common(5)),
        "cleanups": sum(x["cleanups"] for x in lines),
        "cleanup_errors": dict(cleanup_errors),
        "crashes": len(crashes),
        "crash_details": crashes,
        "seconds": round(seconds, 2),
        "launches_per_s": round(sum(x["launches"] for x in lines) / seconds) if seconds else 0,
    }
    text = "".join(json.dumps(x, sort_keys=True) + "\n" for x in [*lines, summary])
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text)
    bad = crashes or summary["wrong"] or unclear or cleanup_errors or summary["launches"] != args.launches
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", type=Path, default=default_lib(), help="the library (default: $TL_AOT_TEST_LIBDIR/libtl_aot_testlib.so)")
    ap.add_argument("--launches", type=int, default=1_000_000, help="launches in all, shared by processes and threads")
    ap.add_argument("--threads", type=int, default=16, help="launching threads per process")
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--entries", default="add_one", help="comma-separated, assigned to threads in turn: add_one, gemm_dyn")
    ap.add_argument("--cleanup-ms", type=float, default=1.0, help="pause between two cleanups")
    ap.add_argument("--check-every", type=int, default=100, help="launches between two checks of a thread's results")
    ap.add_argument("--out", help="also append the JSON lines to this file")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.lib is None:
        ap.error("--lib is required when TL_AOT_TEST_LIBDIR is not set")
    bad = [e for e in args.entries.split(",") if e not in ("add_one", "gemm_dyn")]
    if bad or args.threads < 1 or args.processes < 1 or args.launches < args.threads * args.processes:
        ap.error("entries must be add_one or gemm_dyn, and launches at least one per thread")
    return child(args) if args.child else parent(args)


if __name__ == "__main__":
    sys.exit(main())
