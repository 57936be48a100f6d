"""How often TileLang spells a kernel's same-named shared-memory aliases another way (CPU machine, TileLang only).

The row norm and the ``@tilelang.jit`` row softmax of ``tests/kernels/twin_reductions.py`` (two
block-wide reductions, two ``workspace`` aliases at one offset) and the row stats of
``tests/kernels/loop_reductions.py`` (two reductions in one loop: two ``workspace`` buffers at two
offsets, which one where the process's) are lowered ``--rounds`` times in
each of ``--processes`` fresh processes, one ``PYTHONHASHSEED`` each, after another kernel each
round, as a JIT worker lowers them among others, with a seeded number of IR objects left alive.
Each process prints the digests it saw; the parent checks that every digest is TileLang's source in
one of its alias spellings (:func:`tl_aot.capture.alias_order.alias_orders` of
the first source seen) and prints one JSON line per kernel: the processes, the distinct digests,
the processes that saw more than one. Run: ``python bench/alias_order_flip.py --processes 4 --rounds 4``
(about 4 s a process on 2 cores). Measured (TileLang 0.1.15, 4 processes of 4 rounds): the row
norm came out both ways in 1 process, the row stats (a workspace moved between offsets) in 2, the
softmax one way; every digest one of the source's spellings.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

__all__ = ["main"]

KERNELS = Path(__file__).resolve().parents[1] / "tests" / "kernels"

_CHILD = """
import json, random, sys
sys.path.insert(0, {kernels!r})
import twin_reductions as t
import loop_reductions as l
from tilelang import tvm
from tl_aot.capture.device_code import digest, lower

target = tvm.target.Target({{"kind": "cuda", "arch": "sm_90a"}})
made = {{"row_norm": lambda: t.row_norm(), "row_softmax": lambda: t.row_softmax().get_tir(16, 256), "row_stats": lambda: l.row_stats()}}
seen = {{name: [] for name in made}}
sources = {{}}
rng = random.Random({seed})
held = []  # objects left alive between rounds, as a long-lived JIT process's heap holds them
for i in range({rounds}):
    held += [tvm.tirx.Var("v", "int32") for _ in range(rng.randint(0, 4000))]
    with target:
        lower(t.row_norm(N=256 * (i % 3 + 1)), target, {{}})  # other work first, as a JIT worker's
    for name, make in made.items():
        with target:
            src = lower(make(), target, {{}}).kernel_source
        seen[name].append(digest(src))
        sources.setdefault(name, src)
print(json.dumps({{"seen": seen, "sources": sources}}))
"""


def main(argv: list[str] | None = None) -> int:
    """Lower in fresh processes; one JSON line per kernel; 1 if a digest is not an alias order of the source."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args(argv)
    from tl_aot.capture.alias_order import alias_orders
    from tl_aot.capture.device_code import digest

    runs = []
    for seed in range(args.processes):
        child = _CHILD.format(kernels=str(KERNELS), rounds=args.rounds, seed=seed)
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        out = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, check=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    bad = 0
    for name in runs[0]["seen"]:
        orders = {digest(s) for s in alias_orders(runs[0]["sources"][name])}
        seen = [run["seen"][name] for run in runs]
        distinct = sorted({d for ds in seen for d in ds})
        strays = [d for d in distinct if d not in orders]
        bad += len(strays)
        line = {"kernel": name, "processes": len(runs), "rounds": args.rounds, "distinct": distinct, "alias_orders": len(orders)}
        line |= {"processes_with_both": sum(len(set(ds)) > 1 for ds in seen), "not_an_alias_order": strays}
        print(json.dumps(line))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
