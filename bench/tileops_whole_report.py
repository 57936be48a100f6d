"""The goals table of issue 39's demonstration, read from what ``bench/tileops_whole_gpu.sh`` left in its folder.

Each step of the script writes its log, its JUnit report and a ``times/STEP`` line (``STEP exit N after S s``) in
``$W``; this reads them back and prints one row per goal (measured, goal, met or not), so a run's figures come
from its own files rather than being copied by hand. A step that was not run reads "not run".
Usage: ``python bench/tileops_whole_report.py W`` (``bash bench/tileops_whole_gpu.sh report`` calls it).
"""

from __future__ import annotations

import gzip
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Row", "ServedLines", "rows", "served_lines", "main"]

_AFTER = re.compile(r"^(\S+) exit (\d+) after ([\d.]+) s(.*)$")
_PYTEST = re.compile(r"(\d+) passed.* in ([\d.]+)s")
_SERVE_LINE = re.compile(
    r"tl_aot serve \(pid \d+\): (\d+) served, (\d+) compiled by the JIT, (\d+) refused;.*? (\d+) lookups in ([\d.]+) ms"
    r"(?:, ([\d.]+) ms of CPU)?.*?\((\d+) in [\d.]+ ms, [\d.]+ ms each by call key, (\d+) in"
)
_KB, _MIB = 1000, 1024 * 1024


@dataclass(frozen=True)
class Row:
    """One goal: what was measured, the goal, and whether it was met (None: no pass/fail, or not run)."""

    figure: str
    measured: str
    goal: str
    met: bool | None


@dataclass(frozen=True)
class ServedLines:
    """The served processes' exit lines (``tl_aot serve (pid N): ...``), summed."""

    processes: int
    served: int
    compiled: int
    refused: int
    lookups: int
    traced: int
    clean_processes: int  # processes whose every lookup was by call key (none traced a prim_func)
    clean_lookups: int
    clean_ms: float  # their lookups' time: CPU when the lines carry it ($TL_AOT_SERVE_CPU_TIME=1), else wall
    cpu: bool


def served_lines(text: str) -> ServedLines:
    """Sum the exit lines a served run printed (one per process that served)."""
    found = [m.groups() for m in _SERVE_LINE.finditer(text)]
    cpu = bool(found) and all(g[5] is not None for g in found)
    clean = [g for g in found if int(g[7]) == 0]
    return ServedLines(
        processes=len(found),
        served=sum(int(g[0]) for g in found),
        compiled=sum(int(g[1]) for g in found),
        refused=sum(int(g[2]) for g in found),
        lookups=sum(int(g[3]) for g in found),
        traced=sum(int(g[7]) for g in found),
        clean_processes=len(clean),
        clean_lookups=sum(int(g[3]) for g in clean),
        clean_ms=sum(float(g[5] if cpu else g[4]) for g in clean),
        cpu=cpu,
    )


def _read(path: Path) -> str:
    """A file's text ('' when absent), gunzipped when it ends in .gz."""
    if not path.is_file():
        return ""
    return gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()


def _log(w: Path, name: str) -> str:
    return _read(w / name) or _read(w / f"{name}.gz")


def _times(w: Path) -> dict[str, list[tuple[float, str]]]:
    """Step -> [(seconds, what follows them)] from ``times/*`` (a step run twice, e.g. capture then capture-rest, twice)."""
    got: dict[str, list[tuple[float, str]]] = {}
    for path in sorted((w / "times").glob("*")):
        for line in path.read_text().splitlines():
            if m := _AFTER.match(line.strip()):
                got.setdefault(path.name, []).append((float(m[3]), m[4].strip()))
    return got


def _results(path: Path) -> dict[str, str]:
    """Test id -> outcome (passed, failure, error, skipped) from a JUnit report (empty when absent)."""
    text = _read(path)
    if not text:
        return {}
    outcome = {}
    for case in ET.fromstring(text).iter("testcase"):
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        outcome[f"{case.get('classname')}::{case.get('name')}"] = kinds[0] if kinds else "passed"
    return outcome


def _row(figure: str, measured: str | None, goal: str, met: bool | None) -> Row:
    return Row(figure, measured if measured is not None else "not run", goal, met if measured is not None else None)


def rows(w: Path) -> list[Row]:
    """The goals table of the run in folder ``w``."""
    times, facts = _times(w), _read(w / "served-facts.txt")
    lines = served_lines(_log(w, "serve.log"))
    return [
        _served_row(w, lines, facts),
        *_capture_rows(w, times),
        _build_row(times),
        _wheel_row(w),
        *_load_rows(facts),
        _lookup_row(lines),
        _ratio_row(times),
    ]


def _served_row(w: Path, lines: ServedLines, facts: str) -> Row:
    """Files complete of collected; tests the JIT passes that fail served (JUnit reports); compiles; TileLang's cache."""
    figure, goal = "smoke files captured, built, served", "every test the JIT passes, 0 compiles"
    served = _results(w / "serve.xml.gz") or _results(w / "serve.xml")
    jit = _results(w / "jit-warm.xml.gz") or _results(w / "jit-warm.xml")
    if not (served and jit):
        return _row(figure, None, goal, None)
    collected = {ln.split("::")[0] for ln in _read(w / "collected.txt").splitlines() if "::" in ln}
    complete = [ln for ln in _read(w / "complete.txt").splitlines() if ln.strip()]
    cache = re.search(r"TileLang cache: (\d+)", facts)
    passed = {k for k, v in served.items() if v == "passed"}
    jit_passed = {k for k, v in jit.items() if v == "passed"}
    lost = len(jit_passed - passed)
    measured = (
        f"{len(complete)} of {len(collected)} files; served strictly {len(passed)} passed, the JIT {len(jit_passed)}"
        f" ({lost} the JIT passes fail served); {lines.compiled} compiled by the JIT"
        + (f", {cache[1]} files in TileLang's cache" if cache else "")
    )
    ok = lost == 0 and lines.compiled == 0 and len(complete) == len(collected) and (not cache or cache[1] == "0")
    return _row(figure, measured, goal, ok)


def _capture_rows(w: Path, times: dict[str, list[tuple[float, str]]]) -> list[Row]:
    """The whole suite's capture (every capture call of the run summed) and the capture again after one kernel changed."""
    capture, recapture = times.get("capture"), times.get("recapture")
    kernels = re.findall(r"tl_aot capture: (\d+) kernels in", _log(w, "capture.log"))
    compiled = re.search(r"(\d+) compiled by TileLang's JIT", _log(w, "recapture.log"))
    total = sum(s for s, _ in capture or ())
    return [
        _row("capture of the whole smoke suite", f"{total:.1f} s ({kernels[-1] if kernels else '?'} kernels)" if capture else None,
             "<= 15 min", total <= 900),
        _row("a second capture after one kernel changes",
             f"{recapture[-1][0]:.1f} s ({compiled[1] if compiled else '?'} compiled)" if recapture else None,
             "<= 2 min", bool(recapture) and recapture[-1][0] <= 120),
    ]  # fmt: skip


def _build_row(times: dict[str, list[tuple[float, str]]]) -> Row:
    """The build's wall time against the goal for its core count (10 min on 64 cores, 30 on 16)."""
    if not times.get("build"):
        return _row("build of the whole capture", None, "<= 30 min on 16 cores, <= 10 on 64", None)
    seconds, rest = times["build"][-1]
    jobs = re.search(r"-j (\d+)", rest)
    cores = int(jobs[1]) if jobs else 16
    limit = 600 if cores >= 64 else 1800
    return _row("build of the whole capture", f"{seconds:.1f} s {rest}", f"<= {limit // 60} min on {cores} cores", seconds <= limit)


def _wheel_row(w: Path) -> Row:
    """The largest wheel, and the library and its packs installed per image (kernel-arch)."""
    figure, goal = "largest wheel; installed bytes per kernel-arch", "<= 100 MiB; <= 40 KB"
    wheels = sorted((w / "dist").glob("*.whl"), key=lambda p: p.stat().st_size)
    if not wheels:
        return _row(figure, None, goal, None)
    images = re.search(r"; (\d+) images", _log(w, "build.log"))
    lib = w / "lib"
    installed = sum(p.stat().st_size for p in lib.glob("*") if p.suffix in (".so", ".tlpack")) if lib.is_dir() else 0
    per_image = installed / int(images[1]) / _KB if images and installed else None
    per = f"; installed {per_image:.1f} KB per kernel-arch (library and packs over {images[1]} images)" if images and per_image else ""
    biggest = wheels[-1].stat().st_size / _MIB
    ok = biggest <= 100 and (per_image is None or per_image <= 40)
    return _row(figure, f"{biggest:.2f} MiB ({wheels[-1].name}){per}", goal, ok)


def _load_rows(facts: str) -> list[Row]:
    """``tl_aot.load`` and ``serve`` of the installed library, each in a fresh process (the serve step's lines)."""
    got = []
    for verb in ("load", "serve"):
        m = re.search(rf"^{verb}: ([\d.]+) ms wall", facts, re.M)
        got.append(_row(f"tl_aot.{verb} of the installed library", f"{m[1]} ms" if m else None, "<= 50 ms", bool(m) and float(m[1]) <= 50))
    return got


def _lookup_row(lines: ServedLines) -> Row:
    """Lookups in the processes that traced no prim_func: what a lookup by call key costs where every one was."""
    if not lines.clean_lookups:
        return _row("lookup per served request", None, "<= 0.05 ms", None)
    each = lines.clean_ms / lines.clean_lookups
    measured = (
        f"{each:.3f} ms {'of CPU' if lines.cpu else 'wall'} each ({lines.clean_lookups} lookups in the {lines.clean_processes} of "
        f"{lines.processes} processes that traced none; {lines.traced} lookups traced a prim_func, {lines.refused} refused)"
    )
    return _row("lookup per served request", measured, "<= 0.05 ms", each <= 0.05)


def _ratio_row(times: dict[str, list[tuple[float, str]]]) -> Row:
    """The served suite's wall time over the JIT's with its warm cache, same machine and workers."""
    if "serve" not in times or "jit-warm" not in times:
        return _row("served suite vs TileLang's warm cache", None, "<= 0.7", None)
    served, jit = times["serve"][-1][0], times["jit-warm"][-1][0]
    return _row(
        "served suite vs TileLang's warm cache", f"{served:.1f} s / {jit:.1f} s = {served / jit:.3f}", "<= 0.7", served / jit <= 0.7
    )


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.splitlines()[-1], file=sys.stderr)
        return 2
    print("| figure | measured | goal | met |\n| --- | --- | --- | --- |")
    for r in rows(Path(argv[1])):
        print(f"| {r.figure} | {r.measured} | {r.goal} | {'-' if r.met is None else 'yes' if r.met else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
