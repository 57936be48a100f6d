"""Builds killed at random instants, every stage and front end (issue 42): the sweep.

Each front end's undisturbed build is measured once per warmth (``tests/support/chaos.py``'s
:data:`WARMTHS`: from empty folders in a new Python, or with the cache partly or wholly filled
from the undisturbed build's own cache and the build forked from a warm Python that has TileLang
imported, ``tests/support/chaos_warm.py``), as its process tree's CPU seconds (other work on the machine
stretches wall time, not CPU time). Then each kill draws a front end, a warmth (weighted by
``--warmths``) and an instant uniformly within that CPU time (a seeded ``random.Random``: the same
``--seed`` draws the same kills), starts the build, SIGKILLs its process group at that instant, and
checks what the next build sees: outputs absent or whole, every cache entry verified (incrementally:
a file already verified is not read again), no process the build started outliving it, then a clean build
byte-identical to the undisturbed cold one. ``cluster-worker`` kills the busiest Dask worker of a
local cluster mid-build instead; that build must finish with the same bytes.

    nice -n 10 python bench/chaos_kills.py --kills 500 --minutes 80 --lanes 2 --out chaos.jsonl

``--lanes N`` runs N trials at once, each lane with its own folders, CMake build tree and warm
Python (trials through the cluster take turns: a worker kill would reach the other lane's build).
Runs on the CPU machine (TileLang + nvcc, ``tl_aot[cluster]``, cmake and ninja). One JSON line per
kill, then a summary line (kills, damaged, per front end, per warmth, the stages hit); exit status
1 if any kill left damage. ``--front-ends cli,cmake`` restricts the draw; ``--summary chaos.jsonl``
summarizes the lines of a sweep (one stopped early included).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import io
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support import chaos, chaos_warm  # noqa: E402 (tests/ on the path first)

ALL = (*chaos.FRONT_ENDS, "cluster-worker")
#: The default mix of warmths: some cold (a new Python, imports and all), the rest spread over the
#: later stages (``runtime``: cold lowering in a warm Python).
WARMTH_MIX = "cold=0.15,runtime=0.35,variant=0.3,full=0.2"
#: What a worker kill can be drawn in: the warmths that leave the workers work.
WORKER_WARMTHS = ("cold", "runtime")


def summarize(rows: list[dict]) -> dict:
    """Kills, kills that landed, kills that left damage, per front end, per warmth and where they landed, from the kill lines."""
    per: dict = collections.defaultdict(lambda: {"kills": 0, "landed": 0, "damaged": 0})
    warmths: collections.Counter = collections.Counter()
    stages: collections.Counter = collections.Counter()
    for r in rows:
        per[r["front_end"]]["kills"] += 1
        per[r["front_end"]]["landed"] += int(r["killed"])
        per[r["front_end"]]["damaged"] += int(bool(r["damage"]))
        warmths[f"{r['front_end']}:{r.get('warmth', 'cold')}"] += 1
        stages[f"{r['front_end']}:{r['where']}"] += 1
    return {
        "kills": len(rows),
        "landed": sum(int(r["killed"]) for r in rows),
        "damaged": sum(int(bool(r["damage"])) for r in rows),
        "per_front_end": dict(sorted(per.items())),
        "warmths": dict(sorted(warmths.items())),
        "stages": dict(sorted(stages.items())),
        "load_avg": round(os.getloadavg()[0], 1),
    }


def _library_bytes(ref: chaos.Reference) -> bytes:
    """The library an undisturbed build made: an output, or the member of its wheel."""
    for name, data in ref.outputs.items():
        if name.endswith(".so"):
            return data
        if name.endswith(".whl"):
            with zipfile.ZipFile(io.BytesIO(data)) as whl:
                return whl.read(next(n for n in whl.namelist() if n.endswith(".so")))
    msg = f"no library among {sorted(ref.outputs)}"
    raise ValueError(msg)


def _weights(text: str) -> dict[str, float]:
    out = {}
    for part in text.split(","):
        name, _, w = part.partition("=")
        if name not in chaos.WARMTHS:
            msg = f"unknown warmth {name!r} (one of {', '.join(chaos.WARMTHS)})"
            raise ValueError(msg)
        out[name] = float(w or 1)
    return out


@dataclasses.dataclass(frozen=True)
class Draw:
    """One kill to make: its number, front end, warmth and instant (a fraction of the build's CPU time at that warmth)."""

    i: int
    name: str
    warmth: str
    at: float


def draws(seed: int, n: int, names: list[str], weights: dict[str, float]) -> list[Draw]:
    """The ``n`` kills of ``seed``: the same on every run, whatever the lanes."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        name = rng.choice(names)
        allowed = {w: x for w, x in weights.items() if name != "cluster-worker" or w in WORKER_WARMTHS} or {"cold": 1.0}
        warmth = rng.choices(sorted(allowed), [allowed[w] for w in sorted(allowed)])[0]
        out.append(Draw(i, name, warmth, rng.random()))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=500, help="kills to make (default 500)")
    ap.add_argument("--minutes", type=float, default=0.0, help="stop drawing kills after this long (0: no limit)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--front-ends", default=",".join(ALL), help=f"comma-separated, of {', '.join(ALL)}")
    ap.add_argument("--out", type=Path, help="JSONL file (default: stdout only)")
    ap.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    ap.add_argument("--lanes", type=int, default=1, help="trials run at once (default 1)")
    ap.add_argument("--warmths", default=WARMTH_MIX, help=f"warmths and their weights (default {WARMTH_MIX})")
    ap.add_argument("--resume", type=Path, help="a JSONL file of this --seed's sweep: make only the kills it lacks (append with --out)")
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
    try:
        weights = _weights(args.warmths)
    except ValueError as e:
        ap.error(str(e))

    todo = draws(args.seed, args.kills, names, weights)
    if args.resume:
        done = {json.loads(line)["kill"] for line in args.resume.read_text().splitlines() if '"kill"' in line}
        todo = [d for d in todo if d.i not in done]
        names = [n for n in names if any(d.name == n for d in todo)]  # only these need an undisturbed build

    work = args.work or Path(tempfile.mkdtemp(prefix="tl_aot-chaos-"))
    sink = open(args.out, "a") if args.out else None  # noqa: SIM115 (closed at the end)
    said = threading.Lock()

    def emit(record: dict) -> None:
        line = json.dumps(record, sort_keys=True)
        with said:
            print(line, flush=True)
            if sink:
                sink.write(line + "\n")
                sink.flush()

    cluster = chaos.LocalCluster(work / "cluster") if {"cluster-driver", "cluster-worker"} & set(names) else None
    warms: list[chaos_warm.WarmPython] = []
    try:
        if cluster:
            for w in ("w1", "w2"):
                cluster.add_worker(w)
        warms = [chaos_warm.WarmPython(chaos.child_env()) for _ in range(args.lanes)]
        parts = chaos.shard_parts(work / "shards") if "link" in names else None

        def build_of(lane: int, name: str) -> chaos.Build:
            fe = "cluster-driver" if name == "cluster-worker" else name
            kw = {"cluster": cluster.address} if cluster and fe == "cluster-driver" else {}
            if fe == "link":
                kw["parts"] = parts
            return chaos.front_end(fe, work / f"lane{lane}" / name, **kw)

        builds = {(lane, n): build_of(lane, n) for lane in range(args.lanes) for n in names}
        refs: dict[str, chaos.Reference] = {}
        cpu: dict[tuple[str, str], float] = {}
        snapshots: dict[str, Path] = {}
        for name in names:
            build = builds[0, name]
            workers = tuple(cluster.procs[w].pid for w in cluster.workers()) if name.startswith("cluster") else ()
            if name in ("cmake", "cluster-driver", "cluster-worker"):
                chaos.undisturbed(build, workers)  # a first build warms what later ones share (workers' lowering pools, ninja)
            refs[name] = ref = chaos.undisturbed(build, workers)
            snapshots[name] = chaos.take_snapshot(build, work / "snapshots" / name)
            cpu[name, "cold"] = ref.cpu_s
            emit({"undisturbed": name, "warmth": "cold", "wall_s": round(ref.wall_s, 2), "cpu_s": round(ref.cpu_s, 2)})
            for warmth in weights:
                if warmth == "cold" or (name == "cluster-worker" and warmth not in WORKER_WARMTHS):
                    continue
                again = chaos.undisturbed(build, workers, warmth=warmth, snapshot=snapshots[name], warm=warms[0])
                if again.outputs != ref.outputs:
                    emit({"error": f"{name} at warmth {warmth} built other bytes than from empty folders in a new Python"})
                    return 1
                cpu[name, warmth] = again.cpu_s
                emit({"undisturbed": name, "warmth": warmth, "wall_s": round(again.wall_s, 2), "cpu_s": round(again.cpu_s, 2)})
        libs = {n: _library_bytes(r) for n, r in refs.items()}
        one_machine = {n for n in libs if n != "link"}
        if len({libs[n] for n in one_machine}) > 1:
            emit({"error": "front ends disagree on the library's bytes", "front_ends": sorted(one_machine)})
            return 1

        t_start = time.monotonic()
        trials: list[chaos.Trial] = []
        turn = threading.Condition()
        cluster_busy = [False]

        stop = threading.Event()  # SIGTERM: each lane ends its kill, then the summary of those made
        signal.signal(signal.SIGTERM, lambda *_: stop.set())

        def take() -> Draw | None:
            """The next kill this lane may make (cluster trials take turns), or None when done, out of time or stopped."""
            with turn:
                while todo:
                    if stop.is_set() or (args.minutes and time.monotonic() - t_start > args.minutes * 60):
                        return None
                    for k, d in enumerate(todo):
                        if not d.name.startswith("cluster") or not cluster_busy[0]:
                            cluster_busy[0] |= d.name.startswith("cluster")
                            return todo.pop(k)
                    turn.wait(1.0)
                return None

        def lane(k: int) -> None:
            while (d := take()) is not None:
                build, seed = builds[k, d.name], args.seed * 100_000 + d.i
                kw = {"at": d.at, "seed": seed, "log_dir": work / "logs", "warmth": d.warmth, "snapshot": snapshots[d.name]}
                kw |= {"warm": warms[k], "cpu_s": cpu[d.name, d.warmth]}
                try:
                    if d.name == "cluster-worker":
                        trial = chaos.worker_kill_trial(build, refs[d.name], cluster, **kw)
                    else:
                        # the driver's clock counts the workers' CPU, as when its undisturbed build was measured
                        workers = tuple(cluster.procs[w].pid for w in cluster.workers()) if d.name == "cluster-driver" else ()
                        trial = chaos.kill_trial(build, refs[d.name], workers=workers, **kw)
                except Exception as e:  # the harness's own failure: said, and counted as damage by no one
                    emit({"error": f"kill {d.i} ({d.name}, {d.warmth}) did not run: {e!r}"})
                    continue
                finally:
                    if d.name.startswith("cluster"):
                        with turn:
                            cluster_busy[0] = False
                            turn.notify_all()
                with turn:
                    trials.append(trial)
                emit({"kill": d.i, "lane": k, **dataclasses.asdict(trial), "where": trial.where})

        threads = [threading.Thread(target=lane, args=(k,), name=f"lane{k}") for k in range(args.lanes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        summary = summarize([dataclasses.asdict(t) | {"where": t.where} for t in trials])
        minutes = round((time.monotonic() - t_start) / 60, 1)
        emit({"summary": True, "seed": args.seed, "lanes": args.lanes, "minutes": minutes, **summary})
        return 1 if summary["damaged"] else 0
    finally:
        for w in warms:
            w.close()
        if cluster:
            cluster.close()
        if sink:
            sink.close()


if __name__ == "__main__":
    sys.exit(main())
