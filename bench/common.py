"""What every section shares: the JSONL recorder, section guards, the run's time budget, environment facts.

Only the standard library at import time: ``run.py --help`` and ``report.py`` work on machines
without torch, TileLang or a GPU.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

__all__ = ["ROOT", "Recorder", "Deadline", "section", "summarize", "environment", "load_jsonl", "normalize", "run_quiet"]

ROOT = Path(__file__).resolve().parent.parent


class Recorder:
    """Prints one JSON line per figure and appends it to ``path`` (flushed line by line)."""

    def __init__(self, path: str | os.PathLike | None) -> None:
        self.records: list[dict] = []
        self._file = None
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "w", buffering=1)  # noqa: SIM115 (closed in close())

    def emit(self, section: str, name: str, **fields) -> dict:
        rec = {"section": section, "name": name, **fields}
        self.records.append(rec)
        line = json.dumps(rec, sort_keys=False, default=str)
        print(line, flush=True)
        if self._file:
            self._file.write(line + "\n")
            self._file.flush()
        return rec

    def close(self) -> None:
        if self._file:
            self._file.close()
            self._file = None


class Deadline:
    """The run's wall-clock budget: sections ask how much is left before starting optional work."""

    def __init__(self, seconds: float) -> None:
        self.t0 = time.monotonic()
        self.seconds = seconds

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.t0)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0


@contextlib.contextmanager
def section(rec: Recorder, name: str):
    """Run one section; an exception becomes an ``error`` line and the next section still runs."""
    t0 = time.monotonic()
    print(f"# section {name}", file=sys.stderr, flush=True)
    try:
        yield
    except Exception as e:  # noqa: BLE001 (one section's failure must not lose the others)
        traceback.print_exc()
        rec.emit(name, "error", error=f"{type(e).__name__}: {e}")
    finally:
        print(f"# section {name} took {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)


def summarize(samples: list[float]) -> dict:
    """Median, min, max and spread of a list of samples (the median is the figure reported)."""
    s = sorted(samples)
    n = len(s)
    return {
        "median": statistics.median(s),
        "min": s[0],
        "p90": s[min(n - 1, int(round(0.9 * (n - 1))))],
        "max": s[-1],
        "n": n,
    }


def run_quiet(cmd: list[str], *, timeout: float = 30, env: dict | None = None) -> str:
    """stdout of ``cmd`` (argument list, no shell), or '' when it is missing or fails."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return p.stdout if p.returncode == 0 else ""


def _version(dist: str) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def environment(*, gpu: bool) -> dict:
    """Date, machine, GPU and the versions of everything measured (no TileLang import)."""
    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "cpu": _cpu_model(),
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "tilelang": _version("tilelang"),
        "apache_tvm_ffi": _version("apache-tvm-ffi"),
        "torch_c_dlpack_ext": _version("torch-c-dlpack-ext"),
    }
    try:
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        import tl_aot

        info["tl_aot"] = tl_aot.__version__
    except ImportError:
        info["tl_aot"] = ""
    nvcc = run_quiet(["nvcc", "--version"])
    info["nvcc"] = nvcc.strip().splitlines()[-1] if nvcc.strip() else ""
    if gpu:
        import torch

        info["torch"] = torch.__version__
        info["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            info["gpu"] = p.name
            info["gpu_cc"] = f"{p.major}.{p.minor}"
            info["gpu_sms"] = p.multi_processor_count
            smi = run_quiet(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,power.limit", "--format=csv,noheader"])
            if smi.strip():
                parts = [x.strip() for x in smi.strip().splitlines()[0].split(",")]
                info["driver"] = parts[0]
                if len(parts) > 2:
                    info["gpu_max_sm_clock"] = parts[1]
                    info["gpu_power_limit"] = parts[2]
    return info


#: Figure names of bench/build_bench.py (the setuptools sample's build), whose lines carry no section.
_SAMPLE_BUILD_NAMES = frozenset({"environment", "full_serial", "full_parallel", "noop_rebuild", "entry", "wheel"})


def normalize(record: dict) -> dict:
    """Give a bench/build_bench.py line (no ``section``) the section ``build_sample`` and a unique name."""
    if "section" in record or record.get("name") not in _SAMPLE_BUILD_NAMES:
        return record
    r = {"section": "build_sample", **record}
    if r["name"] == "entry" and "entry" in r:
        r["name"] = f"entry:{r['entry']}"
    if isinstance(r.get("seconds"), (int, float)) and "s" not in r:
        r["s"] = r["seconds"]
    return r


def load_jsonl(paths) -> list[dict]:
    """Records of one or more JSONL files, in order (see :func:`normalize`); blank and malformed lines are skipped."""
    out = []
    for p in paths:
        for line in Path(p).read_text().splitlines():
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(normalize(rec))
    return out
