"""The test files a stopped pytest run finished: every test collected from them has a result in its ``-rA`` summary.

Used by ``bench/tileops_whole_gpu.sh``: a capture stopped at its time limit keeps what it recorded, and only the
files whose every test ran are served afterwards (a file cut short may lack kernels its later tests ask for).
Usage: ``python bench/tileops_complete.py COLLECTED.txt RUN.log`` (COLLECTED: ``pytest --collect-only -q`` output).
"""

from __future__ import annotations

import collections
import re
import sys
from pathlib import Path

_RESULT = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (\S+?)(?:::| )")
_SKIP = re.compile(r"^SKIPPED \[(\d+)\] (\S+?):\d+")


def per_file(lines) -> collections.Counter:
    """Test results per file in a ``-rA`` summary (a ``SKIPPED [n] file:line`` row counts n)."""
    got: collections.Counter = collections.Counter()
    for line in lines:
        if m := _SKIP.match(line):
            got[m[2]] += int(m[1])
        elif m := _RESULT.match(line):
            got[m[2].split("::")[0]] += 1
    return got


def collected(lines) -> collections.Counter:
    """Tests per file in ``pytest --collect-only -q`` output."""
    return collections.Counter(line.split("::")[0] for line in lines if "::" in line)


def main(argv: list[str]) -> int:
    want = collected(Path(argv[1]).read_text().splitlines())
    got = per_file(Path(argv[2]).read_text(errors="replace").splitlines())
    done = sorted(f for f, n in want.items() if got[f] >= n)
    print("\n".join(done))
    print(f"{len(done)} of {len(want)} files complete ({sum(want[f] for f in done)} of {sum(want.values())} tests)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
