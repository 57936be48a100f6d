"""A chaos harness: builds killed at random instants, and builds racing, through every front end.

One tiny library (``add_one`` of ``tests/kernels/elementwise.py``) is built the way each front end
builds it (:func:`front_end`): ``python -m tl_aot build``, ``python setup.py build_ext``,
``cmake --build``, ``python -m tl_aot build --cluster`` (the driver) and ``python -m tl_aot link``
of two shards. A kill trial (:func:`kill_trial`) starts the build from empty folders, sends
SIGKILL to its whole process group at an instant drawn by the caller (uniformly within the
undisturbed build's duration, so every stage is hit in proportion to its length), then checks
what a user would meet next:

- every output is absent or byte-identical to the undisturbed build's (never half written);
- every cache entry verifies: a variant's files match their digests and its image is whole, a
  host object matches its digest, a shared-cache object unpacks (:func:`cache_damage`);
- no process the build started outlives it (a tool, its reaper, a job ninja runs in a group of its own);
- a clean build in the same folders succeeds, byte-identical to the undisturbed build, and leaves
  the cache verified.

:func:`worker_kill_trial` kills a Dask worker mid-batch instead: the build must still finish with
the same bytes. :func:`race` runs eight builds of the library into one folder with one cache across
the CLI, setuptools and CMake; :func:`two_machines` two builds with their own caches sharing one
``--cache-url``. Used by ``tests/integration/test_chaos.py`` (a few seeded kills) and
``bench/chaos_kills.py`` (the sweep).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from support import helpers
from support.builds import with_runtime
from support.helpers import tl_aot_argv

__all__ = [
    "FRONT_ENDS",
    "Build",
    "Trial",
    "LocalCluster",
    "Progress",
    "Reference",
    "front_end",
    "undisturbed",
    "kill_trial",
    "worker_kill_trial",
    "cache_damage",
    "WARMTHS",
    "take_snapshot",
    "race",
    "two_machines",
]

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "tests" / "kernels" / "elementwise.py"
NAME = "add_one"
ARCH = "90a"
#: The sharded front end needs two variants to split.
LINK_ARCHS = ("80", "90a")
#: The front ends a kill trial knows (``cluster-worker``: :func:`worker_kill_trial`). ``pip-wheel``:
#: the setuptools project through PEP 517 (``pip wheel --no-build-isolation``), whose output is
#: the wheel itself (reproducible with ``SOURCE_DATE_EPOCH``).
FRONT_ENDS = ("cli", "setuptools", "cmake", "cluster-driver", "link", "pip-wheel")
#: Tools whose survival after a killed build is an orphan.
_TOOLS = ("nvcc", "cicc", "ptxas", "cudafe++", "fatbinary", "nvlink", "c++", "g++", "gcc", "cc1plus", "ld", "collect2")


def child_env(**extra: str) -> dict:
    """:func:`support.helpers.child_env` with the checkout first on PYTHONPATH, and no shared cache or cluster inherited."""
    return helpers.child_env(checkout_first=True, drop=("TL_AOT_CACHE_URL", "TL_AOT_CLUSTER"), **extra)


@dataclasses.dataclass(frozen=True)
class Build:
    """One front end's build of the library in a workspace: the command, and what it writes."""

    front_end: str
    cmd: tuple[str, ...]
    cwd: Path
    env: dict
    outputs: tuple[Path, ...]  # compared byte for byte with the undisturbed build's
    cache: Path
    shared: Path | None = None  # a file:// shared cache's folder
    fresh: tuple[Path, ...] = ()  # removed before a trial (outputs, caches, work folders)
    objects: Path | None = None  # host objects put in the emptied cache (a test's warm launcher runtime)

    def reset(self, warmth: str = "cold", snapshot: Path | None = None) -> None:
        """Empty folders, as before a first build (a CMake build tree is kept: ninja reruns what is missing).

        ``warmth`` (one of :data:`WARMTHS`) other than ``cold`` then fills the cache from ``snapshot``
        (:func:`take_snapshot` of this front end's undisturbed build) as far as that level says.
        """
        for p in self.fresh:
            shutil.rmtree(p, ignore_errors=True)
        if self.objects is not None:
            shutil.copytree(self.objects, self.cache / ".objects")
        if warmth != "cold":
            if snapshot is None:
                msg = f"warmth {warmth!r} needs the snapshot of an undisturbed build"
                raise ValueError(msg)
            _fill(self, warmth, snapshot)

    @property
    def forkable(self) -> bool:
        """Whether the build is one Python process (not CMake's ninja) that a :class:`chaos_warm.WarmPython` can fork."""
        return self.cmd[0] == sys.executable

    def start(self, log: Path, warm=None):
        """Start the build in a session of its own, output to ``log``: forked from ``warm`` when given, else a new process."""
        if warm is not None and self.forkable:
            return warm.start(list(self.cmd[1:]), cwd=self.cwd, env=self.env, log=log)
        with open(log, "wb") as sink:
            return subprocess.Popen(self.cmd, cwd=self.cwd, env=self.env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)

    def run(self, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(self.cmd, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=timeout, check=False)


SETUP_PY = """\
from setuptools import setup

from tl_aot.frontends.setuptools import TileLangExtension, build_ext

setup(
    name="chaos_demo",
    version="0",
    install_requires=["apache-tvm-ffi"],
    ext_modules=[
        TileLangExtension(
            {name!r},
            entries=[{{"name": {name!r}, "source": {kernel!r}, "function": {name!r}}}],
            archs=[{arch!r}],
        )
    ],
    cmdclass={{"build_ext": build_ext}},
)
"""

CMAKE_LISTS = """\
cmake_minimum_required(VERSION 3.20...3.31)
project(chaos LANGUAGES CXX)
find_package(TileLangAOT CONFIG REQUIRED)
add_tilelang_kernel(
  {name}
  SOURCE {kernel}
  FUNCTION {name}
  ARCHS {arch}
  OUTPUT_DIRECTORY ${{OUT}}
  HEADER_DIRECTORY ${{OUT}}
  CACHE_DIR ${{CACHE}}
  QUIET)
"""


def _python() -> list[str]:
    return [sys.executable]


def _cmake_dir() -> str:
    cmd = tl_aot_argv("--cmake-dir")
    return subprocess.run(cmd, capture_output=True, text=True, check=True, env=child_env()).stdout.strip()


def cmake_project(ws: Path, *, build: Path, out: Path, cache: Path) -> None:
    """Write a one-kernel CMake project in ``ws/cmake`` and configure it into ``build`` (Ninja)."""
    src = ws / "cmake"
    src.mkdir(parents=True, exist_ok=True)
    (src / "CMakeLists.txt").write_text(CMAKE_LISTS.format(name=NAME, kernel=KERNEL, arch=ARCH))
    cmd = [
        shutil.which("cmake") or "cmake",
        "-S",
        str(src),
        "-B",
        str(build),
        "-G",
        "Ninja",
        f"-DTL_AOT_PYTHON={sys.executable}",
        f"-DPython_EXECUTABLE={sys.executable}",
        f"-DTileLangAOT_DIR={_cmake_dir()}",
        f"-DOUT={out}",
        f"-DCACHE={cache}",
    ]
    proc = subprocess.run(cmd, cwd=src, env=child_env(), capture_output=True, text=True, check=False)
    if proc.returncode:
        msg = f"cmake configure failed:\n{proc.stdout}\n{proc.stderr}"
        raise RuntimeError(msg)


def setuptools_project(ws: Path) -> Path:
    """Write a one-extension setuptools project in ``ws/setuptools``; returns its folder."""
    src = ws / "setuptools"
    src.mkdir(parents=True, exist_ok=True)
    (src / "setup.py").write_text(SETUP_PY.format(name=NAME, kernel=str(KERNEL), arch=ARCH))
    return src


def front_end(
    name: str, ws: Path, *, cluster: str = "", parts: Path | None = None, out: Path | None = None, cache: Path | None = None
) -> Build:
    """The build of front end ``name`` in workspace ``ws`` (made ready: projects written, CMake configured).

    ``out`` / ``cache``: the output and cache folders (default ``ws/out``, ``ws/cache``): racing
    builds pass one pair. ``cluster``: the scheduler address (``cluster-driver``). ``parts``: the
    shards ``link`` joins (:func:`shard_parts`).
    """
    ws.mkdir(parents=True, exist_ok=True)
    out = out or ws / "out"
    cache = cache or ws / "cache"
    lib, header = out / f"lib{NAME}.so", out / f"{NAME}.h"
    env = child_env()
    tl_aot = tl_aot_argv()
    if name == "cli":
        cmd = [*tl_aot, "build", f"{KERNEL}:{NAME}", "--arch", ARCH, "-o", str(out), "--cache-dir", str(cache)]
        return Build(name, tuple(cmd), ws, env, (lib, header), cache, fresh=(out, cache))
    if name == "setuptools":
        src = setuptools_project(ws)
        temp = ws / "setuptools-temp"
        cmd = [*_python(), "setup.py", "-q", "build_ext", "--build-lib", str(out), "--build-temp", str(temp)]
        env = child_env(TL_AOT_CACHE_DIR=str(cache))
        return Build(name, tuple(cmd), src, env, (lib, out / f"{NAME}.py"), cache, fresh=(out, cache, temp, src / "build"))
    if name == "pip-wheel":
        src = setuptools_project(ws / "pip")
        cmd = [*_python(), "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index", "-q", "-w", str(out), str(src)]
        env = child_env(TL_AOT_CACHE_DIR=str(cache), SOURCE_DATE_EPOCH="0", PIP_DISABLE_PIP_VERSION_CHECK="1")
        wheel = out / "chaos_demo-0-cp{0}{1}-cp{0}{1}-linux_x86_64.whl".format(*sys.version_info[:2])
        return Build(name, tuple(cmd), ws, env, (wheel,), cache, fresh=(out, cache, src / "build", src / "chaos_demo.egg-info"))
    if name == "cmake":
        build = ws / "cmake-build"
        if not (build / "build.ninja").is_file():
            cmake_project(ws, build=build, out=out, cache=cache)
        cmd = [shutil.which("cmake") or "cmake", "--build", str(build)]
        return Build(name, tuple(cmd), ws, env, (lib, header), cache, fresh=(out, cache))
    if name == "cluster-driver":
        shared = ws / "shared"
        cmd = [*tl_aot, "build", f"{KERNEL}:{NAME}", "--arch", ARCH, "-o", str(out), "--cache-dir", str(cache)]
        cmd += ["--cluster", cluster, "--cache-url", shared.as_uri()]
        return Build(name, tuple(cmd), ws, env, (lib, header), cache, shared=shared, fresh=(out, cache, shared))
    if name == "link":
        if parts is None:
            msg = "the link front end needs the shards' parts (shard_parts)"
            raise ValueError(msg)
        cmd = [*tl_aot, "link", *(str(p) for p in sorted(parts.iterdir())), "-o", str(out), "--cache-dir", str(cache)]
        return Build(name, tuple(cmd), ws, env, (out / f"lib{NAME}.so", header), cache, fresh=(out, cache))
    msg = f"unknown front end {name!r} (one of {', '.join(FRONT_ENDS)})"
    raise ValueError(msg)


def shard_parts(ws: Path) -> Path:
    """``ws/parts/1`` and ``ws/parts/2``: the two shards of the library for :data:`LINK_ARCHS`, built once."""
    parts = ws / "parts"
    ws.mkdir(parents=True, exist_ok=True)
    if parts.is_dir() and len(list(parts.iterdir())) == 2:
        return parts
    for k in (1, 2):
        cmd = tl_aot_argv("build", f"{KERNEL}:{NAME}", *[a for x in LINK_ARCHS for a in ("--arch", x)])
        cmd += ["--shard", f"{k}/2", "-o", str(parts / str(k)), "--cache-dir", str(ws / "shard-cache")]
        proc = subprocess.run(cmd, cwd=ws, env=child_env(), capture_output=True, text=True, check=False)
        if proc.returncode:
            msg = f"shard {k}/2 failed:\n{proc.stderr}"
            raise RuntimeError(msg)
    return parts


# ---------------------------------------------------------------------------------------------
# How warm a trial starts
# ---------------------------------------------------------------------------------------------

#: How much of an undisturbed build's cache a trial starts with, so that kills spread over the
#: stages that matter and not only over the first one: ``cold`` (nothing: a new process, imports,
#: plan, lowering, nvcc, the runtime and launcher compiles, link, publish), ``runtime`` (the launcher
#: runtime object: lowering, nvcc, launcher, link, publish), ``variant`` (also the variant entries:
#: the launcher compile, link, publish), ``full`` (everything: link and publish). Only ``cold``
#: starts a new Python; the others fork a warm one where the front end is one Python process.
WARMTHS = ("cold", "runtime", "variant", "full")


def take_snapshot(build: Build, dest: Path) -> Path:
    """Copy ``build``'s cache (and shared cache) after an undisturbed build into ``dest``: the source of warm trials' caches."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(build.cache, dest / "cache")
    if build.shared is not None and build.shared.is_dir():
        shutil.copytree(build.shared, dest / "shared")
    return dest


def _fill(build: Build, warmth: str, snapshot: Path) -> None:
    """Put the parts of ``snapshot`` that ``warmth`` keeps into ``build``'s cache (and shared cache)."""
    cache = snapshot / "cache"
    objects = cache / ".objects"
    keep = [d for d in objects.iterdir() if (d / "launcher_runtime.o").is_file()] if objects.is_dir() else []
    if warmth in ("variant", "full"):
        keep += [d for d in cache.iterdir() if not d.name.startswith(".")]
        if build.shared is not None and (snapshot / "shared").is_dir():
            shutil.copytree(snapshot / "shared", build.shared, dirs_exist_ok=True)
    if warmth == "full":
        keep = [cache]
    for d in keep:
        shutil.copytree(d, build.cache / d.relative_to(cache), dirs_exist_ok=True)


# ---------------------------------------------------------------------------------------------
# What a killed build may leave: nothing damaged.
# ---------------------------------------------------------------------------------------------


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: Verdicts of files already verified, by what identifies their bytes on disk (device, inode, size,
#: modification and change times): a file written again, in place or by rename, is verified again.
_VERIFIED: dict[tuple, str] = {}


def _identity(*paths: Path) -> tuple:
    out = []
    for p in paths:
        st = p.stat()
        out.append((str(p), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(out)


def cache_damage(cache: Path, shared: Path | None = None) -> list[str]:
    """What in ``cache`` (and a file:// shared cache's folder) does not verify; empty when every entry is whole.

    Temporary names (a leading dot) are never read as entries and are not counted. Incremental: an
    entry whose files are the very files verified before (same inode, size and times) keeps its
    verdict; any other is read and verified in full.
    """
    damage: list[str] = []
    if cache.is_dir():
        for d in sorted(cache.iterdir()):
            if not d.name.startswith("."):
                damage += _memo(d, sorted(d.iterdir()), _entry_damage)
        objects = cache / ".objects"
        for obj in sorted(objects.glob("*/*")) if objects.is_dir() else []:
            if obj.name.startswith(".") or obj.name.endswith(".sha256"):
                continue
            digest = obj.with_name(obj.name + ".sha256")
            damage += _memo(obj, [obj, digest] if digest.is_file() else [obj], _object_damage)
    if shared is not None and shared.is_dir():
        for tlv in sorted(shared.glob("*.tlv")):
            damage += _memo(tlv, [tlv], _shared_damage)
    return damage


def _memo(what: Path, files: list[Path], check) -> list[str]:
    """``check(what)`` (a list of problems), or its verdict on these very files if they were checked before."""
    try:
        key = _identity(what, *files)
    except OSError:
        key = None
    if key is not None and key in _VERIFIED:
        return [_VERIFIED[key]] if _VERIFIED[key] else []
    found = check(what)
    if key is not None:
        _VERIFIED[key] = "; ".join(found)
    return found


def _object_damage(obj: Path) -> list[str]:
    digest = obj.with_name(obj.name + ".sha256")
    if not digest.is_file() or digest.read_text().strip() != _sha(obj.read_bytes()):
        return [f"{obj}: object without a matching digest"]
    return []


def _shared_damage(tlv: Path) -> list[str]:
    from tl_aot.pipeline.shared_cache import unpack_entry

    return [] if unpack_entry(tlv.read_bytes(), tlv.name[: -len(".tlv")]) is not None else [f"{tlv}: shared entry does not verify"]


def _entry_damage(d: Path) -> list[str]:
    """A variant entry's problems: files missing or extra, digests that do not match, an image that is not whole."""
    from tl_aot.common.arch import Arch  # noqa: F401 (imported for LoweredVariant's fields)
    from tl_aot.common.metadata import LoweredVariant
    from tl_aot.common.metadata_json import from_json
    from tl_aot.cuda.image_check import variant_image_problem

    names = {p.name for p in d.iterdir()}
    if names != {"image.bin", "image.sha256", "variant.json", "variant.sha256"}:
        return [f"{d}: partial entry {sorted(names)}"]
    image, text = (d / "image.bin").read_bytes(), (d / "variant.json").read_bytes()
    if (d / "image.sha256").read_text().strip() != _sha(image) or (d / "variant.sha256").read_text().strip() != _sha(text):
        return [f"{d}: digest mismatch"]
    problem = variant_image_problem(from_json(LoweredVariant, text.decode()), image)
    return [f"{d}: {problem}"] if problem else []


def _stat(pid: int) -> tuple[int, str, int] | None:
    """``(parent pid, command name, CPU ticks used by it and its reaped children)`` of a live process, else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = stat[stat.rindex(")") + 2 :].split()
    if rest[0] == "Z":
        return None
    ticks = sum(int(x) for x in rest[11:15])  # utime, stime, cutime, cstime
    return int(rest[1]), stat[stat.index("(") + 1 : stat.rindex(")")], ticks


def _proc_table() -> dict[int, tuple[int, str, int]]:
    """``{pid: (parent pid, command name, CPU ticks)}`` of every live process (:func:`_stat`)."""
    table = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and (st := _stat(int(p.name))) is not None:
            table[int(p.name)] = st
    return table


def _tree_table(roots: tuple[int, ...]) -> dict[int, tuple[int, str, int]]:
    """:func:`_proc_table` of ``roots`` and their live descendants only, walked by each thread's ``children`` file.

    A sample every 20 ms of every process on a busy machine costs a tenth of a core; the build's
    tree is a few processes.
    """
    table, todo = {}, list(roots)
    while todo:
        pid = todo.pop()
        if pid in table or (st := _stat(pid)) is None:
            continue
        table[pid] = st
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                todo += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
            except OSError:
                continue
    return table


def descendants(root: int, table: dict | None = None) -> dict[int, str]:
    """``{pid: command name}`` of every live process below ``root``."""
    table = _proc_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = {}, [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            if pid not in out:
                out[pid] = table[pid][1]
                todo.append(pid)
    return out


class Progress:
    """A build's progress as CPU seconds: those its process tree (and the given cluster workers, since it started) used.

    Kill instants are drawn on this clock, not on wall time: other work on the machine stretches a
    build's wall time but not its CPU time, so the kills still spread over its stages in proportion
    to the work each does.
    """

    def __init__(self, root: int, workers: tuple[int, ...] = ()) -> None:
        self.root, self.workers = root, workers
        table = _tree_table(workers)
        self.base = {w: self._ticks(w, table) for w in workers}
        self.last = dict(self.base)
        self.busy: dict[int, int] = dict.fromkeys(workers, 0)  # each worker's ticks since the previous sample
        self.seen = 0.0
        self.tree: dict[int, str] = {}  # every process seen below the build
        self.running: tuple[str, ...] = ()  # the tools (:data:`_TOOLS`) running below the build at the last sample
        self.tools_seen: set[str] = set()  # every tool seen below the build

    @staticmethod
    def _ticks(root: int, table: dict) -> int:
        return sum(table[p][2] for p in (root, *descendants(root, table)) if p in table)

    def sample(self) -> float:
        """CPU seconds used so far (never decreasing); also notes the build's processes and which worker works."""
        table = _tree_table((self.root, *self.workers))
        below = descendants(self.root, table)
        self.tree.update(below)
        self.running = tuple(sorted({n for n in below.values() if n in _TOOLS}))
        self.tools_seen.update(self.running)
        total = self._ticks(self.root, table)
        for w in self.workers:
            now = self._ticks(w, table)
            self.busy[w], self.last[w] = now - self.last[w], now
            total += now - self.base[w]
        self.seen = max(self.seen, total / _CLOCK_TICKS)
        return self.seen


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _survivors(pids: dict[int, str], wait_s: float = 5.0) -> list[str]:
    """Those of ``pids`` still alive (same name) after up to ``wait_s``: processes that outlived the build."""
    end = time.monotonic() + wait_s
    while True:
        alive = [f"{name}[{pid}]" for pid, name in pids.items() if (st := _stat(pid)) is not None and st[1] == name]
        if not alive or time.monotonic() > end:
            return alive
        time.sleep(0.05)


# ---------------------------------------------------------------------------------------------
# Trials
# ---------------------------------------------------------------------------------------------


#: Tools that do a stage's work (a bare ``nvcc`` or ``c++`` may be a version probe): the CUDA
#: compiler's passes, the host compiler proper, the linker.
_DEVICE_TOOLS = {"cicc", "ptxas", "cudafe++", "fatbinary", "nvlink"}
_HOST_TOOLS = {"cc1plus"}
_LINK_TOOLS = {"ld", "collect2"}


@dataclasses.dataclass(frozen=True)
class Trial:
    """What one kill did and what the next build saw."""

    front_end: str
    seed: int
    at: float  # the kill's instant, as a fraction of the undisturbed build's CPU time
    at_wall_s: float  # when it came, in wall seconds after the start
    killed: bool  # False: the build had ended before the instant came
    stage: str  # the last line the build printed before the kill
    damage: tuple[str, ...] = ()  # outputs half written, cache entries that do not verify, orphan tools, a failed rebuild
    rebuild_s: float = 0.0
    warmth: str = "cold"  # how the trial started (:data:`WARMTHS`)
    running: tuple[str, ...] = ()  # the tools running when the kill came
    tools_before: tuple[str, ...] = ()  # every tool the build had started by then

    @property
    def ok(self) -> bool:
        return not self.damage

    @property
    def where(self) -> str:
        """The stage the kill landed in, from the tools running then (and those run before, when none ran)."""
        if not self.killed:
            return "finished first"
        if self.front_end == "cluster-worker":
            return self.running[0] if self.running else "no worker"
        running, before = set(self.running), set(self.tools_before)
        if running & _LINK_TOOLS:
            return "link"
        if running & (_DEVICE_TOOLS | {"nvcc"}):
            return "nvcc+host compile" if running & _HOST_TOOLS else "nvcc"
        if running & _HOST_TOOLS:
            return "host compile"
        if before & _LINK_TOOLS:
            return "python: publish"
        if before & (_DEVICE_TOOLS | _HOST_TOOLS):
            return "python: between tools"
        return "python: start, plan, lowering"


@dataclasses.dataclass(frozen=True)
class Reference:
    """An undisturbed build: its outputs' bytes by file name, its wall time and its CPU seconds."""

    outputs: dict
    wall_s: float
    cpu_s: float


def undisturbed(build: Build, workers: tuple[int, ...] = (), *, warmth: str = "cold", snapshot: Path | None = None, warm=None) -> Reference:
    """Build undisturbed from folders as ``warmth`` leaves them, measuring the CPU time of its tree (and of the cluster ``workers``).

    ``warm``: a :class:`chaos_warm.WarmPython` to fork the build from (where the front end allows).
    """
    build.reset(warmth, snapshot)
    log = build.cwd / ".chaos-undisturbed.log"
    t0 = time.monotonic()
    proc = build.start(log, warm)
    progress = Progress(proc.pid, workers)
    while proc.poll() is None:
        progress.sample()
        time.sleep(0.03)
    wall = time.monotonic() - t0
    if proc.returncode:
        msg = f"the undisturbed {build.front_end} build failed:\n{log.read_text(errors='replace')[-3000:]}"
        raise RuntimeError(msg)
    return Reference({p.name: p.read_bytes() for p in build.outputs}, wall, progress.seen)


def _last_line(log: Path) -> str:
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:120] if lines else "(nothing printed)"


def _outputs_damage(build: Build, reference: Reference) -> list[str]:
    """Outputs that exist but are not the undisturbed build's bytes (a half-written or foreign file)."""
    bad = []
    for p in build.outputs:
        if p.exists() and p.read_bytes() != reference.outputs.get(p.name, p.read_bytes()):
            bad.append(f"{p.name}: present after the kill but not the undisturbed build's bytes")
    return bad


def _rebuild(build: Build, reference: Reference, log: Path, warm=None) -> tuple[list[str], float]:
    """A clean build after the kill: it must succeed with the undisturbed bytes and a verified cache."""
    t0 = time.monotonic()
    proc = build.start(log, warm)
    try:
        rc = proc.wait(timeout=900)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        rc = proc.wait()
    wall = time.monotonic() - t0
    if rc:
        return [f"the next build failed (exit {rc}): {log.read_text(errors='replace')[-600:]}"], wall
    differ = [p.name for p in _compared(build, reference) if p.read_bytes() != reference.outputs[p.name]]
    bad = [f"{name}: next build's bytes differ from the undisturbed build's" for name in differ]
    bad += [f"after the next build: {d}" for d in cache_damage(build.cache, build.shared)]
    return bad, wall


def _compared(build: Build, reference: Reference) -> list[Path]:
    """The outputs of ``build`` the reference has bytes for (another front end's reference: the library and header)."""
    return [p for p in build.outputs if p.name in reference.outputs]


def _run_until(proc, progress: Progress, target_cpu_s: float) -> float:
    """Wait until ``proc`` ends or has used ``target_cpu_s`` of CPU; returns the wall seconds waited."""
    t0 = time.monotonic()
    while proc.poll() is None and progress.sample() < target_cpu_s:
        time.sleep(0.02)
    return time.monotonic() - t0


def kill_trial(
    build: Build,
    reference: Reference,
    *,
    at: float,
    seed: int,
    log_dir: Path,
    warmth: str = "cold",
    snapshot: Path | None = None,
    warm=None,
    cpu_s: float | None = None,
    workers: tuple[int, ...] = (),
) -> Trial:
    """Start ``build`` as ``warmth`` says, SIGKILL its process group at fraction ``at`` of its CPU time, check, build again, check.

    ``reference``: the undisturbed bytes every output must have (or not exist). ``cpu_s``: the CPU
    seconds of an undisturbed build at this warmth (default ``reference.cpu_s``). ``warm``: a
    :class:`chaos_warm.WarmPython` the build (and the next one) is forked from, where the front end
    is one Python process; a ``cold`` trial is always a new process (its next build is forked).
    ``workers``: the cluster workers' pids, whose CPU counts on the build's clock (as it did when
    ``cpu_s`` was measured).
    """
    build.reset(warmth, snapshot)
    next_warm, warm = warm, None if warmth == "cold" else warm
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{build.front_end}-{seed}.log"
    proc = build.start(log, warm)
    progress = Progress(proc.pid, workers)
    waited = _run_until(proc, progress, at * (reference.cpu_s if cpu_s is None else cpu_s))
    killed = proc.poll() is None
    running, before = (), ()
    if killed:
        progress.sample()
        running, before = progress.running, tuple(sorted(progress.tools_seen))
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    stage = _last_line(log) if killed else "(finished first)"
    damage = [] if killed or proc.returncode == 0 else [f"the undisturbed part failed (exit {proc.returncode}): {_last_line(log)}"]
    # Every process the build started dies with it: its tools, their reapers, a job ninja put in a
    # group of its own (tl_aot under CMake), pip's build backend.
    orphans = _survivors(progress.tree)
    damage += [f"{'tool' if o.split('[')[0] in _TOOLS else 'process'} outlived the killed build: {o}" for o in orphans]
    damage += _outputs_damage(build, reference)
    damage += cache_damage(build.cache, build.shared)
    # The next build may be forked from a warm Python even after a cold trial: what it must cope
    # with is on disk, not in the killed process's imports.
    more, wall = _rebuild(build, reference, log.with_suffix(".next.log"), next_warm or warm)
    return Trial(
        build.front_end, seed, round(at, 4), round(waited, 2), killed, stage, tuple(damage + more), round(wall, 2), warmth, running, before
    )


class LocalCluster:
    """A Dask scheduler and named workers on 127.0.0.1, each a process group of its own (a kill takes its lowering pool)."""

    def __init__(self, root: Path) -> None:
        self.dask = str(Path(sys.executable).parent / "dask")
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.file = root / "scheduler.json"
        self.file.unlink(missing_ok=True)
        self.procs: dict[str, subprocess.Popen] = {}
        self._start("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(self.file)])
        deadline = time.monotonic() + 90
        while not self.file.is_file():
            if time.monotonic() > deadline:
                msg = f"dask scheduler did not start: {(root / 'scheduler.log').read_text()[-2000:]}"
                raise RuntimeError(msg)
            time.sleep(0.2)
        self.address = json.loads(self.file.read_text())["address"]

    def _start(self, name: str, args: list, env: dict | None = None) -> None:
        with open(self.root / f"{name}.log", "ab") as log:
            self.procs[name] = subprocess.Popen([self.dask, *args], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def add_worker(self, name: str) -> None:
        """Start worker ``name`` (one thread, no nanny) and wait until the scheduler has it."""
        env = child_env(TL_AOT_WORKER_DIR=str(self.root / f"{name}-work"))
        args = ["worker", self.address, "--name", name, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1", "--no-dashboard"]
        self._start(name, [*args, "--local-directory", str(self.root / f"{name}-dask")], env)
        import distributed

        with distributed.Client(self.address, set_as_default=False, timeout=60) as c:
            deadline = time.monotonic() + 120
            while name not in {w["name"] for w in c.scheduler_info()["workers"].values()}:
                if time.monotonic() > deadline or self.procs[name].poll() is not None:
                    msg = f"worker {name} did not join: {(self.root / f'{name}.log').read_text()[-2000:]}"
                    raise RuntimeError(msg)
                time.sleep(0.2)

    def workers(self) -> list[str]:
        return [n for n in self.procs if n != "scheduler"]

    def kill(self, name: str) -> None:
        """SIGKILL worker ``name``'s process group (the worker and its lowering processes)."""
        p = self.procs[name]
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()

    def close(self) -> None:
        for name in reversed(list(self.procs)):
            p = self.procs[name]
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM if name == "scheduler" else signal.SIGKILL)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()


def worker_kill_trial(
    build: Build,
    reference: Reference,
    cluster: LocalCluster,
    *,
    at: float,
    seed: int,
    log_dir: Path,
    warmth: str = "cold",
    snapshot: Path | None = None,
    warm=None,
    cpu_s: float | None = None,
) -> Trial:
    """Start a cluster build; at fraction ``at`` of its CPU time, SIGKILL the busiest worker (mid-batch when one works).

    The build must finish with the undisturbed bytes (the batch runs again on the other worker). The
    killed worker is started again afterwards, so the next trial has two. ``warmth``, ``snapshot``,
    ``warm`` and ``cpu_s`` as for :func:`kill_trial` (only ``cold`` and ``runtime`` leave the
    workers work to do).
    """
    build.reset(warmth, snapshot)
    warm = None if warmth == "cold" else warm
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"cluster-worker-{seed}.log"
    workers = {cluster.procs[w].pid: w for w in cluster.workers()}
    t0 = time.monotonic()
    proc = build.start(log, warm)
    progress = Progress(proc.pid, tuple(workers))
    waited = _run_until(proc, progress, at * (reference.cpu_s if cpu_s is None else cpu_s))
    killed = proc.poll() is None
    victim, working = "", False
    if killed:
        busiest = max(sorted(progress.busy), key=progress.busy.get)
        working = progress.busy[busiest] > 0
        victim = workers[busiest] if working else random.Random(seed).choice(sorted(workers.values()))
        cluster.kill(victim)
    try:
        rc = proc.wait(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        rc = proc.wait()
    wall = time.monotonic() - t0
    stage = f"{victim or 'no worker'} killed ({'working' if working else 'idle'}) after: {_last_line(log)}"
    damage = [] if rc == 0 else [f"the build with a worker killed failed (exit {rc}): {_last_line(log)}"]
    if rc == 0:
        damage += [
            f"{p.name}: differs from the undisturbed build"
            for p in _compared(build, reference)
            if p.read_bytes() != reference.outputs[p.name]
        ]
    damage += cache_damage(build.cache, build.shared)
    if victim:
        cluster.add_worker(victim)
    running = ("worker working",) if working else ("worker idle",) if killed else ()
    return Trial("cluster-worker", seed, round(at, 4), round(waited, 2), killed, stage, tuple(damage), round(wall, 2), warmth, running)


# ---------------------------------------------------------------------------------------------
# Races
# ---------------------------------------------------------------------------------------------


def race(ws: Path, *, cli: int = 3, setuptools: int = 3, cmake: int = 2) -> tuple[list[subprocess.CompletedProcess], Build]:
    """``cli + setuptools + cmake`` builds of the library into one folder with one cache, all started at once.

    Returns every build's result and the CLI's :class:`Build` (its outputs name the shared folder).
    Each CMake build has a build tree of its own (two ``cmake --build`` of one tree race in ninja's
    own files, which no user does); the setuptools builds share one project folder.
    """
    out, cache = ws / "out", ws / "cache"
    builds = [front_end("cli", ws / "cli", out=out, cache=cache) for _ in range(cli)]
    builds += [front_end("setuptools", ws / "setuptools", out=out, cache=cache) for _ in range(setuptools)]
    builds += [front_end("cmake", ws / f"cmake{i}", out=out, cache=cache) for i in range(cmake)]
    procs = [subprocess.Popen(b.cmd, cwd=b.cwd, env=b.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for b in builds]
    results = []
    for b, p in zip(builds, procs):
        stdout, stderr = p.communicate(timeout=900)
        results.append(subprocess.CompletedProcess(b.cmd, p.returncode, stdout, stderr))
    return results, builds[0]


def two_machines(ws: Path, runtime: Path | None = None) -> tuple[list[subprocess.CompletedProcess], list[Build]]:
    """Two "machines" (their own output and cache folders) building the library at once, sharing one file:// ``--cache-url``.

    ``runtime``: the launcher runtime's object (the ``session_runtime`` fixture's), put in each machine's
    cache first. It depends on the toolchain alone and never travels through the shared cache (variants
    do), so compiling it on each machine tests nothing the race is about, for ~2.5 s of CPU each.
    """
    shared = ws / "shared"
    builds = []
    for m in ("m1", "m2"):
        out, cache = ws / m / "out", ws / m / "cache"
        if runtime is not None:
            with_runtime(cache, runtime)
        cmd = tl_aot_argv("build", f"{KERNEL}:{NAME}", "--arch", ARCH, "-o", out, "--cache-dir", cache)
        cmd += ["--cache-url", shared.as_uri()]
        builds.append(Build("cli", tuple(cmd), ws, child_env(), (out / f"lib{NAME}.so", out / f"{NAME}.h"), cache, shared=shared))
    (ws / "m1").mkdir(parents=True, exist_ok=True)
    procs = [subprocess.Popen(b.cmd, cwd=b.cwd, env=b.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for b in builds]
    results = []
    for b, p in zip(builds, procs):
        stdout, stderr = p.communicate(timeout=900)
        results.append(subprocess.CompletedProcess(b.cmd, p.returncode, stdout, stderr))
    return results, builds
