"""cleanup_module under load on a real GPU (issue 42): threads, processes, reloads, a file replaced.

    python -m pytest tests/gpu/test_cleanup_race_gpu.py -q      # TL_AOT_TEST_LIBDIR=<dir>: prebuilt test library

Launches racing ``cleanup()`` must each be correct or raise a clear error, and nothing may crash:
the runtime counts launches in flight and cleanup unloads only after they have drained (the CPU
side of that state machine is tests/unit/cpp/test_launcher_runtime.cc). Sixteen threads and several
processes go through ``bench/cleanup_race_gpu.py`` exactly as documented (small counts here; the
bench's default is 10^6 launches); a library loaded, cleaned up and unloaded in a loop, and one
replaced on disk while loaded, run in processes of their own so a crash is a failed test, not a lost
run. Figures are printed as JSON lines (and appended to $TL_AOT_RELIABILITY_OUT when set).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "cleanup_race_gpu.py"


def sub_env() -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def record(line: dict) -> None:
    text = json.dumps(line, sort_keys=True)
    print(text)
    out = os.environ.get("TL_AOT_RELIABILITY_OUT")
    if out:
        with open(out, "a") as f:
            f.write(text + "\n")


def run_bench(lib: Path, *args: str) -> dict:
    """``python bench/cleanup_race_gpu.py --lib LIB ARGS``: its summary line, after checking it exited 0."""
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--lib", str(lib), *args], capture_output=True, text=True, env=sub_env(), timeout=900
    )
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert lines, f"no output (exit status {proc.returncode})\n{proc.stderr[-3000:]}"
    summary = lines[-1]
    record(summary)
    assert proc.returncode == 0, json.dumps(summary, indent=1)
    return summary


def test_16_threads_launch_while_cleanup_runs(testlib_path):
    """16 threads of one process (add_one chains and TMA gemm_dyn), a cleanup every millisecond."""
    s = run_bench(testlib_path, "--launches", "64000", "--threads", "16", "--entries", "add_one,gemm_dyn")
    assert (s["crashes"], s["wrong"], s["errors_unclear"]) == (0, 0, 0)
    assert s["launches"] == s["verified"] == 64000
    assert s["cleanups"] >= 10, "the cleanups did not overlap the launches"


def test_many_processes_launch_from_one_library(testlib_path):
    """Four processes, each with its own threads and cleanups, launching from one library file."""
    s = run_bench(testlib_path, "--launches", "32000", "--processes", "4", "--threads", "4")
    assert (s["crashes"], s["wrong"], s["errors_unclear"]) == (0, 0, 0)
    assert s["launches"] == s["verified"] == 32000
    assert s["processes"] == 4 and s["cleanups"] >= 4


# A library loaded, used, cleaned up and unloaded over and over (a file only the loop loads, so each
# cycle dlopens it afresh), while threads launch from another copy that a cleanup in every cycle races.
_RELOAD_SCRIPT = textwrap.dedent(
    """
    import gc, json, sys, threading, torch, tl_aot
    path, cycled, cycles = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.path.insert(0, sys.argv[4])
    from support.gpu_memory import process_device_bytes

    def held():
        # this process's own device memory (NVML); the GPU's free memory only where NVML cannot say, which other
        # processes on the GPU move too (the GPU tests run four workers on one GPU)
        own = process_device_bytes()
        return ("nvml", own) if own is not None else ("free memory", -torch.cuda.mem_get_info()[0])
    keep = tl_aot.load(path)
    stop, errors, launches = threading.Event(), [], [0]

    def launcher(i):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            x = torch.arange(2048 + i, device="cuda", dtype=torch.float32); y = torch.empty_like(x)
            while not stop.is_set():
                y.fill_(-1); keep.add_one(x, y); s.synchronize()
                if not torch.equal(y, x + 1): errors.append(f"thread {i}: wrong result"); return
                launches[0] += 1

    threads = [threading.Thread(target=launcher, args=(i,)) for i in range(4)]
    for t in threads: t.start()
    x = torch.randn(4096, device="cuda"); y = torch.empty_like(x); torch.cuda.synchronize()

    def cycle():
        lib = tl_aot.load(cycled)
        y.fill_(float("nan")); lib.add_one(x, y); torch.cuda.synchronize()
        assert torch.equal(y, x + 1)
        assert lib.cleanup() == 0
        del lib; gc.collect()
        assert keep.cleanup() == 0  # while its threads launch

    # Warm-up: the threads' streams, torch's own kernels (loaded lazily on first use) and the allocator's
    # blocks are one-time costs; a leak grows with the cycles, so free memory is read after these.
    while launches[0] < 100 and not errors: cycle()
    for _ in range(10): cycle()
    torch.cuda.synchronize()
    used = [held()]
    for i in range(cycles):
        cycle()
        if (i + 1) % (cycles // 3) == 0: torch.cuda.synchronize(); used.append(held())
    stop.set()
    for t in threads: t.join()
    torch.cuda.synchronize()
    assert keep.cleanup() == 0
    growth = [u[1] - used[0][1] for u in used[1:]]
    measure = "nvml" if all(u[0] == "nvml" for u in used) else "free memory"
    got = {"cycles": cycles, "launches_beside": launches[0], "errors": errors, "growth": growth[-1], "growth_by_third": growth,
           "measure": measure}
    print(json.dumps(got), flush=True)
    """
)


def test_load_cleanup_reload_loop(testlib_path, tmp_path):
    (tmp_path / "kept").mkdir()
    (tmp_path / "cycled").mkdir()
    kept, cycled = tmp_path / "kept" / testlib_path.name, tmp_path / "cycled" / testlib_path.name
    shutil.copy2(testlib_path, kept)
    shutil.copy2(testlib_path, cycled)
    proc = subprocess.run(
        [sys.executable, "-c", _RELOAD_SCRIPT, str(kept), str(cycled), "300", str(ROOT / "tests")],
        capture_output=True,
        text=True,
        env=sub_env(),
        timeout=600,
    )
    assert proc.returncode == 0, f"exit status {proc.returncode}\n{proc.stderr[-3000:]}"
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    record({"figure": "load_cleanup_reload", **got, "device": torch.cuda.get_device_name(0)})
    assert got["errors"] == [] and got["launches_beside"] > 0
    grew = f"device memory grew by {got['growth'] / 2**20:.1f} MiB over {got['cycles']} cycles (read by {got['measure']})"
    assert got["growth"] <= 16 << 20, grew


# The library file replaced (by rename, as tl_aot and pip install do) while threads launch from it:
# the loaded copy keeps working; each new tl_aot.load sees the new file and works beside the old.
_REPLACE_SCRIPT = textwrap.dedent(
    """
    import json, os, shutil, sys, threading, torch, tl_aot
    source, path, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    old = tl_aot.load(path)
    stop, errors, launches = threading.Event(), [], [0]

    def launcher(i):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            x = torch.arange(3000 + i, device="cuda", dtype=torch.float32); y = torch.empty_like(x)
            while not stop.is_set():
                y.fill_(-1); old.add_one(x, y); s.synchronize()
                if not torch.equal(y, x + 1): errors.append(f"thread {i}: wrong result"); return
                launches[0] += 1

    threads = [threading.Thread(target=launcher, args=(i,)) for i in range(4)]
    for t in threads: t.start()
    x = torch.randn(4096, device="cuda"); y = torch.empty_like(x)
    for r in range(rounds):
        tmp = path + ".new"
        shutil.copyfile(source, tmp); os.utime(tmp, ns=(r * 10**9, r * 10**9)); os.replace(tmp, path)
        new = tl_aot.load(path)
        y.fill_(float("nan")); new.add_one(x, y); torch.cuda.synchronize()
        assert torch.equal(y, x + 1), f"round {r}: the reloaded library computed a wrong result"
        assert new.cleanup() == 0
        if r % 5 == 0:
            assert old.cleanup() == 0  # the old handle too, while its threads launch
    stop.set()
    for t in threads: t.join()
    assert old.cleanup() == 0
    print(json.dumps({"rounds": rounds, "launches_beside": launches[0], "errors": errors}), flush=True)
    """
)


def test_library_file_replaced_while_loaded(testlib_path, tmp_path):
    lib = tmp_path / testlib_path.name
    shutil.copy2(testlib_path, lib)
    proc = subprocess.run(
        [sys.executable, "-c", _REPLACE_SCRIPT, str(testlib_path), str(lib), "20"],
        capture_output=True,
        text=True,
        env=sub_env(),
        timeout=600,
    )
    assert proc.returncode == 0, f"exit status {proc.returncode}\n{proc.stderr[-3000:]}"
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    record({"figure": "library_replaced_while_loaded", **got, "device": torch.cuda.get_device_name(0)})
    assert got["errors"] == [] and got["launches_beside"] > 0
