"""Tuning (issue 13): ``python -m tl_aot tune`` beside TileLang's own autotuner, same configs, same GPU, one run.

    python bench/tune.py --out $OUT/tune.jsonl [--record $OUT/tuned.tune.json]

For the ``@autotune`` GEMM and flash-attention forward of ``tests/kernels/tuned.toml``, each in a
fresh process with fresh caches (tl_aot's variant cache, TileLang's kernel and autotuner caches):

* ``tl_aot``: ``python -m tl_aot tune`` of that one entry, end to end (build the candidates through
  tl_aot's pipeline in parallel, check and time them with CUDA events);
* ``tilelang``: the decorated function called as TileLang users call it, which runs TileLang's
  autotuner over the same configs (it too compiles them in parallel), end to end.

Then TileLang's chosen config is looked up in tl_aot's record, whose times were measured in one
process: ``chosen_ratio`` = tl_aot's choice / TileLang's choice (≤ 1.02 is the goal). Finally the
whole spec is tuned into ``--record`` (the file the CPU build reads). Needs a GPU, TileLang, nvcc.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPEC = ROOT / "tests" / "kernels" / "tuned.toml"

_TILELANG = """
import importlib.util, json, sys, time
spec = importlib.util.spec_from_file_location("k", sys.argv[1]); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
fn = getattr(m, sys.argv[2]); args = json.loads(sys.argv[3])
t0 = time.perf_counter(); kernel = fn(**args); wall = time.perf_counter() - t0
(best_kernel, config), = fn._tuner_cache.values()
print(json.dumps({"wall_s": wall, "config": {k: v for k, v in config.items() if k != "pass_configs"}}))
"""


def _entry(name: str) -> dict:
    import tomllib

    data = tomllib.loads(SPEC.read_text())
    return next(e for e in data["entry"] if e["name"] == name)


def tl_aot_tune(name: str, work: Path) -> dict:
    e = _entry(name)
    record = work / f"{name}.tune.json"
    cmd = [sys.executable, "-m", "tl_aot", "tune", f"{SPEC.parent / e['source']}:{e['function']}", "--name", name,
           "--arch", "90a", "-o", str(record), "--cache-dir", str(work / f"cache-{name}")]  # fmt: skip
    cmd += [f"--arg={k}={v!r}" for k, v in e["args"].items()]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"tl_aot tune {name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    (item,) = json.loads(record.read_text())["items"]
    return {"wall_s": round(wall, 2), "item": item}


def tilelang_tune(name: str, work: Path) -> dict:
    e = _entry(name)
    env = dict(os.environ, TILELANG_CACHE_DIR=str(work / f"tilelang-cache-{name}"))
    cmd = [sys.executable, "-c", _TILELANG, str(SPEC.parent / e["source"]), e["function"], json.dumps(e["args"])]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env, cwd=work)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"TileLang autotune {name} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"process_wall_s": round(wall, 2), "tune_wall_s": round(out["wall_s"], 2), "config": out["config"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="tune.jsonl")
    ap.add_argument("--record", help="also tune the whole spec into this record")
    ap.add_argument("--entries", default="gemm,flash_fwd")
    a = ap.parse_args(argv)
    lines = []

    def emit(name: str, **fields) -> None:
        rec = {"section": "tune", "name": name, **fields}
        lines.append(rec)
        print(json.dumps(rec), flush=True)
        Path(a.out).write_text("".join(json.dumps(r) + "\n" for r in lines))

    with tempfile.TemporaryDirectory(prefix="tl_aot_bench_tune-") as tmp:
        work = Path(tmp)
        for name in [n for n in a.entries.split(",") if n]:
            ours = tl_aot_tune(name, work)
            theirs = tilelang_tune(name, work)
            item = ours["item"]
            times = {json.dumps(dict(c["config"]), sort_keys=True): c["ms"] for c in item["candidates"]}
            their_key = json.dumps({k: repr(v) for k, v in theirs["config"].items()}, sort_keys=True)
            their_ms = times.get(their_key)
            emit(
                name,
                tl_aot_wall_s=ours["wall_s"],
                tilelang_wall_s=theirs["process_wall_s"],
                tilelang_tune_s=theirs["tune_wall_s"],
                wall_ratio=round(ours["wall_s"] / theirs["process_wall_s"], 3),
                tl_aot_config=dict(item["chosen"]),
                tl_aot_ms=item["ms"],
                tilelang_config=theirs["config"],
                tilelang_config_ms=their_ms,
                chosen_ratio=None if not their_ms else round(item["ms"] / their_ms, 4),
                candidates=len(item["candidates"]),
            )
        if a.record:
            cmd = [
                sys.executable,
                "-m",
                "tl_aot",
                "tune",
                "--spec",
                str(SPEC),
                "-o",
                a.record,
                "--dim",
                "m=8192",
                "--cache-dir",
                str(work / "cache-all"),
            ]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
            print(proc.stdout[-4000:], proc.stderr[-2000:], flush=True)
            emit("record", ok=proc.returncode == 0, wall_s=round(time.perf_counter() - t0, 2), record=a.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
