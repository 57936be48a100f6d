"""Builds killed at random instants, every stage and front end (issue 42): the sweep.

Each front end's undisturbed build from empty folders is measured once (its process tree's CPU
seconds: other work on the machine stretches wall time, not CPU time); then each kill draws a
front end and an instant uniformly within that CPU time (a seeded ``random.Random``: the same
``--seed`` gives the same front ends and instants), starts the build from empty folders,
SIGKILLs its process group at that instant, and checks what the next build sees
(``tests/support/chaos.py``: outputs absent or whole, every cache entry verified, no tool outliving the
build, then a clean build byte-identical to the undisturbed one). ``cluster-worker`` kills the
busiest Dask worker of a local cluster mid-build instead; that build must finish with the same bytes.

    python bench/chaos_kills.py --kills 500 --minutes 60 --out chaos.jsonl

Runs on the CPU machine (TileLang + nvcc, ``tl_aot[cluster]``, cmake and ninja). One JSON line per
kill, then a summary line (kills, damaged, per front end, the stages hit); exit status 1 if any
kill left damage. ``--front-ends cli,cmake`` restricts the draw; ``--summary chaos.jsonl``
summarizes the lines of a sweep (one stopped early included).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support import chaos

ALL = (*chaos.FRONT_ENDS, "cluster-worker")


def _stage(line: str) -> str:
    """A short name for where a kill landed, from the last line the build printed."""
    text = line.lower()
    words = ("killed (working)", "killed (idle)", "finished first", "nothing printed", "waiting", "compiler:", "launcher", "nvcc", "lower")
    for word in (*words, "link", "built", "cluster"):
        if word in text:
            return word
    return "other"


def summarize(rows: list[dict]) -> dict:
    """Kills, kills that landed, kills that left damage, per front end, and where they landed, from the kill lines."""
    per: dict = collections.defaultdict(lambda: {"kills": 0, "landed": 0, "damaged": 0})
    stages: collections.Counter = collections.Counter()
    for r in rows:
        per[r["front_end"]]["kills"] += 1
        per[r["front_end"]]["landed"] += int(r["killed"])
        per[r["front_end"]]["damaged"] += int(bool(r["damage"]))
        stages[f"{r['front_end']}:{r['where']}"] += 1
    return {
        "kills": len(rows),
        "landed": sum(int(r["killed"]) for r in rows),
        "damaged": sum(int(bool(r["damage"])) for r in rows),
        "per_front_end": dict(sorted(per.items())),
        "stages": dict(sorted(stages.items())),
        "load_avg": round(os.getloadavg()[0], 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=500, help="kills to make (default 500)")
    ap.add_argument("--minutes", type=float, default=0.0, help="stop drawing kills after this long (0: no limit)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--front-ends", default=",".join(ALL), help=f"comma-separated, of {', '.join(ALL)}")
    ap.add_argument("--out", type=Path, help="JSONL file (default: stdout only)")
    ap.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    ap.add_argument("--summary", type=Path, help="print the summary of a JSONL file of an earlier (or stopped) sweep and exit")
    args = ap.parse_args(argv)
    if args.summary:
        rows = [json.loads(line) for line in args.summary.read_text().splitlines() if '"kill"' in line]
        print(json.dumps(summarize(rows), sort_keys=True))
        return 1 if any(r["damage"] for r in rows) else 0
    names = [n for n in args.front_ends.split(",") if n]
    unknown = set(names) - set(ALL)
    if unknown:
        ap.error(f"unknown front end(s) {sorted(unknown)}; known: {', '.join(ALL)}")

    work = args.work or Path(tempfile.mkdtemp(prefix="tl_aot-chaos-"))
    sink = open(args.out, "a") if args.out else None

    def emit(record: dict) -> None:
        line = json.dumps(record, sort_keys=True)
        print(line, flush=True)
        if sink:
            sink.write(line + "\n")
            sink.flush()

    cluster = chaos.LocalCluster(work / "cluster") if {"cluster-driver", "cluster-worker"} & set(names) else None
    try:
        if cluster:
            for w in ("w1", "w2"):
                cluster.add_worker(w)
        builds, refs = {}, {}
        for name in names:
            fe = "cluster-driver" if name == "cluster-worker" else name
            ws = work / name
            kw = {"cluster": cluster.address} if cluster and fe == "cluster-driver" else {}
            if fe == "link":
                kw["parts"] = chaos.shard_parts(ws)
            builds[name] = chaos.front_end(fe, ws, **kw)
            workers = tuple(cluster.procs[w].pid for w in cluster.workers()) if fe == "cluster-driver" else ()
            chaos.undisturbed(builds[name], workers)  # a first build warms what every later one shares (workers' lowering pools, ninja)
            refs[name] = ref = chaos.undisturbed(builds[name], workers)
            files = {n: len(b) for n, b in ref.outputs.items()}
            emit({"undisturbed": name, "wall_s": round(ref.wall_s, 2), "cpu_s": round(ref.cpu_s, 2), "files": files})
        libs = {n: next(b for n, b in r.outputs.items() if n.endswith(".so")) for n, r in refs.items()}
        one_machine = {n for n in libs if n != "link"}
        if len({libs[n] for n in one_machine}) > 1:
            emit({"error": "front ends disagree on the library's bytes", "front_ends": sorted(one_machine)})
            return 1

        rng = random.Random(args.seed)
        t_start = time.monotonic()
        trials: list = []
        for i in range(args.kills):
            if args.minutes and time.monotonic() - t_start > args.minutes * 60:
                break
            name = rng.choice(names)
            at = rng.random()
            seed = args.seed * 100_000 + i
            if name == "cluster-worker":
                trial = chaos.worker_kill_trial(builds[name], refs[name], cluster, at=at, seed=seed, log_dir=work / "logs")
            else:
                trial = chaos.kill_trial(builds[name], refs[name], at=at, seed=seed, log_dir=work / "logs")
            trials.append(trial)
            emit({"kill": i, **dataclasses.asdict(trial), "where": _stage(trial.stage)})

        summary = summarize([dataclasses.asdict(t) | {"where": _stage(t.stage)} for t in trials])
        emit({"summary": True, "seed": args.seed, "minutes": round((time.monotonic() - t_start) / 60, 1), **summary})
        damaged = summary["damaged"]
        return 1 if damaged else 0
    finally:
        if cluster:
            cluster.close()
        if sink:
            sink.close()


if __name__ == "__main__":
    sys.exit(main())
