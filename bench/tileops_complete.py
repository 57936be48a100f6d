"""The test files a stopped pytest run finished: every test collected from them has a result in its ``-rA`` summary.

Used by ``bench/tileops_whole_gpu.sh``: a capture stopped at its time limit keeps what it recorded, and only the
files whose every test ran are served afterwards (a file cut short may lack kernels its later tests ask for).
Usage: ``python bench/tileops_complete.py [--missing] COLLECTED.txt RUN.log...`` (COLLECTED: ``pytest --collect-only -q``
output). Several logs (a capture continued over several calls): a file is complete when one run finished it.
``--missing``: the collected files no run finished, for the next call to capture.
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
    missing = "--missing" in argv
    args = [a for a in argv[1:] if a != "--missing"]
    want = collected(Path(args[0]).read_text().splitlines())
    got: collections.Counter = collections.Counter()
    for log in args[1:]:
        if Path(log).is_file():
            for f, n in per_file(Path(log).read_text(errors="replace").splitlines()).items():
                got[f] = max(got[f], n)  # one run finished it; runs are not added (a file cut short runs again)
    done = sorted(f for f, n in want.items() if got[f] >= n)
    print("\n".join(sorted(set(want) - set(done)) if missing else done))
    print(f"{len(done)} of {len(want)} files complete ({sum(want[f] for f in done)} of {sum(want.values())} tests)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
