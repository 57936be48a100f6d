"""Run the GPU reliability suite and print its figures as JSON lines (for docs/reliability.md).

    python bench/reliability_gpu.py [--out FILE] [-- extra pytest args]

Runs ``tests/gpu/test_reliability_gpu.py`` (and the kernel tests) with pytest, collects the
figures the tests record (bad-input cases, threads x calls x devices, lifecycle cycles, memory,
primary-context references) and ends with one summary line: tests passed / failed / skipped and
the device. Uses a prebuilt library when ``TL_AOT_TEST_LIBDIR`` is set (as on the GPU machine).
Only the standard library is imported here; the tests themselves need torch and a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITE = ["tests/gpu/test_reliability_gpu.py", "tests/gpu/test_kernels_gpu.py"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="also write the JSON lines to this file")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        figures = Path(tmp) / "figures.jsonl"
        env = dict(os.environ, TL_AOT_RELIABILITY_OUT=str(figures), PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join(x for x in (str(ROOT), env.get("PYTHONPATH", "")) if x)
        cmd = [sys.executable, "-m", "pytest", *SUITE, "-q", "-rfEs", "-p", "no:cacheprovider", *args.pytest_args]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        sys.stderr.write(proc.stdout[-20000:] + proc.stderr[-5000:])
        lines = figures.read_text().splitlines() if figures.is_file() else []
    counts = {k: 0 for k in ("passed", "failed", "skipped", "error")}
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    for n, k in re.findall(r"(\d+) (passed|failed|skipped|error)", tail):
        counts[k] = int(n)
    lines.append(json.dumps({"figure": "summary", "pytest_exit": proc.returncode, **counts, "suite": SUITE}, sort_keys=True))
    for line in lines:
        print(line)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
