"""The shared cache on an object store that fails partially (issue 42): builds against an S3 API server injecting faults.

    python bench/s3_faults.py [--seed 42] [--min-faults 300] [--rate 0.5] [--out s3_faults.json]

A real S3 API server (moto's, ``moto[server]``, on 127.0.0.1) behind a seeded fault injector
(``tests/support/s3faults.py``: timeouts, 5xx, slow answers, truncated and stale objects) holds the
shared cache of ``python -m tl_aot build --cache-url s3://bucket/tl_aot`` (s3fs). Builds of a
three-variant library run, each from an empty local cache and with a seeded share of the shared
entries deleted, until ``--min-faults`` faults were injected. Each build must finish with the
library and every local cache entry byte-identical to an undisturbed build's (no unverified byte
used), or fail with one clean error line. Tools are replayed after the first build (the bench
measures the cache, not nvcc). Needs ``pip install -e '.[test]'`` (moto, s3fs) and TileLang + nvcc.
Prints the figures and writes them as JSON; exits 1 if any build went wrong.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the harness: support.s3faults, support.faultfs (ToolMemo), support.helpers (the kernel)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--min-faults", type=int, default=300)
    parser.add_argument("--rate", type=float, default=0.5, help="share of requests failed")
    parser.add_argument("--max-builds", type=int, default=400)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    from support.s3faults import sweep

    with tempfile.TemporaryDirectory(prefix="tl_aot-s3-") as tmp:
        total = sweep(
            Path(tmp),
            seed=args.seed,
            builds=args.max_builds,
            rate=args.rate,
            min_faults=args.min_faults,
            log=lambda s: print(s, file=sys.stderr),
        )
    print(total.summary())
    for bad in total.bad:
        print(bad)
    figures = {
        "seed": args.seed,
        "rate": args.rate,
        "builds": total.builds,
        "requests": total.requests,
        "faults": total.faults,
        "faults_by_kind": total.injected,
        "finished_identical": total.finished,
        "fell_back": total.fell_back,
        "failed_cleanly": total.failed_cleanly,
        "bad": len(total.bad),
        "seconds": round(total.seconds, 1),
    }
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1) + "\n")
    return 1 if total.bad else 0


if __name__ == "__main__":
    sys.exit(main())
