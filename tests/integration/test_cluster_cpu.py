"""Builds past one machine, for real on this machine: a Dask scheduler and workers on the loopback address.

Started with Dask's own commands (``dask scheduler``, ``dask worker``) as subprocesses. Checked: a
cluster build is bit-identical to a local one; a worker whose tl_aot differs is refused (the test
hook ``TL_AOT_TEST_REPORT_VERSION``); a worker killed mid-task has its task run elsewhere and the
library is still identical; workers that join mid-build are vetted and the one that agrees takes
tasks; a worker whose tools change after vetting refuses its task, which runs elsewhere; variants
of one arch build as one task in one nvcc run; a sharded build links into the same library, and link refuses a
missing shard; a second "machine" (its own cache) reuses the first's variants through a shared
``file://`` cache. One tiny kernel for two archs, one thread per worker (2 cores). Each build's own
cache starts with the session's launcher runtime object (``support.builds.with_runtime``): what
travels to workers is variants, and the runtime compiled in each cache cost this file ~10 compiles.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.builds import with_runtime
from support.helpers import tl_aot_cli, tl_aot_here

pytest.importorskip("tilelang")
distributed = pytest.importorskip("distributed")
pytest.importorskip("fsspec")

KERNEL = Path(__file__).parents[1] / "kernels" / "elementwise.py"
ARCHS = ("80", "90a")


def _lib():
    from tl_aot.spec import KernelSpec, LibrarySpec

    spec = KernelSpec.create(name="add_one", source=KERNEL, function="add_one", archs=list(ARCHS))
    return LibrarySpec(name="add_one", entries=(spec,))


class LocalCluster:
    """A scheduler and named workers, each its own process started with Dask's commands, on 127.0.0.1."""

    def __init__(self, root: Path) -> None:
        dask = Path(sys.executable).parent / "dask"
        if not dask.is_file():
            pytest.skip("the dask command is not installed (pip install 'tl_aot[cluster]')")
        self.dask, self.root = str(dask), root
        root.mkdir(parents=True, exist_ok=True)
        self.file = root / "scheduler.json"
        self.procs: dict = {}
        self._start("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(self.file)])
        # Dask writes the file in place (opened, then filled): read it until it parses, not merely once it exists
        deadline = time.monotonic() + 60
        while (address := self._address()) is None:
            if time.monotonic() > deadline:
                pytest.fail(f"dask scheduler did not start: {(root / 'scheduler.log').read_text()[-2000:]}")
            time.sleep(0.2)
        self.address = address

    def _address(self) -> str | None:
        """The scheduler's address from its file, None while the file is absent or not whole yet."""
        try:
            return json.loads(self.file.read_text())["address"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            return None

    def _start(self, name: str, args: list, env: dict | None = None, cwd: Path | None = None) -> None:
        log = open(self.root / f"{name}.log", "w")  # noqa: SIM115 (kept open for the process's life)
        self.procs[name] = subprocess.Popen([self.dask, *args], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)

    def add_worker(self, name: str, cwd: Path | None = None, **env) -> None:
        """Start worker ``name`` (one thread, no nanny: killing it kills it) and wait until the scheduler has it."""
        self.start_worker(name, cwd=cwd, **env)
        self.wait_for(name)

    def start_worker(self, name: str, cwd: Path | None = None, **env) -> None:
        """Start worker ``name`` (in folder ``cwd``, else this one) without waiting for it to join."""
        e = dict(os.environ, TL_AOT_WORKER_DIR=str(self.root / f"{name}-work"), **env)
        args = ["worker", self.address, "--name", name, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1", "--no-dashboard"]
        self._start(name, [*args, "--local-directory", str(self.root / f"{name}-dask")], e, cwd)

    def wait_for(self, name: str) -> None:
        """Wait until the scheduler has worker ``name``."""
        with distributed.Client(self.address, set_as_default=False) as c:
            deadline = time.monotonic() + 90
            while name not in {w["name"] for w in c.scheduler_info()["workers"].values()}:
                if time.monotonic() > deadline or self.procs[name].poll() is not None:
                    pytest.fail(f"worker {name} did not join: {(self.root / f'{name}.log').read_text()[-2000:]}")
                time.sleep(0.2)

    def kill(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait()

    def close(self) -> None:
        for name, p in reversed(self.procs.items()):
            if p.poll() is None:
                p.terminate() if name == "scheduler" else p.kill()  # a worker's graceful close takes seconds
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


@pytest.fixture(scope="module")
def reference(tmp_path_factory, session_runtime):
    """The library built here, on this machine alone (and its cache, which the shards reuse)."""
    from tl_aot.pipeline.library import build_library

    out = tmp_path_factory.mktemp("local")
    return build_library(_lib(), out_dir=out, cache_dir=with_runtime(out / "cache", session_runtime), jobs=2, log=None, cluster="")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(tmp_path_factory.mktemp("cluster"))
    try:
        c.add_worker("w1")
        c.add_worker("w2")
        c.add_worker("stale", TL_AOT_TEST_REPORT_VERSION="9.9.9")
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def cluster_build(cluster, tmp_path_factory, session_runtime):
    """A build through the cluster, with an empty local cache (but the runtime) and a shared cache at a file:// URL."""
    from tl_aot.pipeline.library import build_library

    out = tmp_path_factory.mktemp("on-cluster")
    shared = (out / "shared").as_uri()
    lines: list = []
    cache = with_runtime(out / "cache", session_runtime)
    result = build_library(_lib(), out_dir=out, cache_dir=cache, log=lines.append, cluster=cluster.address, cache_url=shared)
    return result, lines, shared


def test_a_cluster_build_is_the_local_build(reference, cluster_build):
    result, lines, _ = cluster_build
    assert result.library.read_bytes() == reference.library.read_bytes()
    assert result.header.read_bytes() == reference.header.read_bytes()
    ran = [ln for ln in lines if "add_one sm_" in ln and " on " in ln]
    assert len(ran) == 2 and all(("on w1" in ln) or ("on w2" in ln) for ln in ran), lines


def test_a_worker_with_another_tl_aot_is_refused(cluster_build):
    _, lines, _ = cluster_build
    from tl_aot import __version__

    refused = [ln for ln in lines if ln.startswith("cluster: refused worker stale")]
    assert refused and f"tl_aot {__version__} here, 9.9.9 there" in refused[0], lines
    assert not any("on stale" in ln for ln in lines)


def test_a_cluster_where_no_worker_agrees_builds_nothing(tmp_path):
    from tl_aot.pipeline.library import build_library
    from tl_aot.pipeline.variant_task import ToolsetMismatch

    c = LocalCluster(tmp_path / "cluster")
    try:
        c.add_worker("stale", TL_AOT_TEST_REPORT_VERSION="9.9.9")
        with pytest.raises(ToolsetMismatch, match=r"(?s)no worker has this machine's tools.*stale.*9\.9\.9 there"):
            build_library(_lib(), out_dir=tmp_path / "out", cache_dir=tmp_path / "cache", log=None, cluster=str(c.file))
        assert not list((tmp_path / "cache").glob("*/variant.json"))
    finally:
        c.close()


def _build_while(c, workers: list, watch, tmp_path, runtime: Path):
    """A cluster build on ``workers`` while ``watch`` runs beside it (killing or adding workers); the cluster closes after."""
    from tl_aot.pipeline.library import build_library

    try:
        for name in workers:
            c.add_worker(name)
        watcher = threading.Thread(target=watch)
        watcher.start()
        lines: list = []
        cache = with_runtime(tmp_path / "cache", runtime)
        result = build_library(_lib(), out_dir=tmp_path / "out", cache_dir=cache, log=lines.append, cluster=c.address)
        watcher.join()
    finally:
        c.close()
    return result, lines


def test_a_worker_killed_mid_task_loses_nothing(reference, tmp_path, session_runtime):
    """SIGKILL the worker running a variant: Dask runs it on the other; the library is still the local one."""

    c = LocalCluster(tmp_path / "cluster")
    killed: list = []

    def killer():
        with distributed.Client(c.address, set_as_default=False) as client:
            names = {a: w["name"] for a, w in client.scheduler_info()["workers"].items()}
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                busy = [a for a, keys in client.processing().items() if any(str(k).startswith("tl_aot-") for k in keys)]
                if busy:
                    time.sleep(1.0)  # mid-task: lowering (its worker's first, with TileLang's import) takes longer
                    killed.append(names[busy[0]])
                    c.kill(names[busy[0]])
                    return
                time.sleep(0.05)

    result, lines = _build_while(c, ["k1", "k2"], killer, tmp_path, session_runtime)
    assert killed, "no task was seen running"
    assert any(f"worker {killed[0]}" in ln and "left" in ln for ln in lines), lines
    survivor = "k2" if killed[0] == "k1" else "k1"
    assert sum(f"on {survivor}" in ln for ln in lines) == 2, lines
    assert result.library.read_bytes() == reference.library.read_bytes()


def test_a_worker_that_joins_mid_build_takes_tasks(reference, tmp_path, session_runtime):
    """A cluster of one worker; two more join while its first task runs: the one that agrees takes a task, the other
    (another tl_aot) is refused before it gets any; the library is still the local one."""
    from tl_aot import __version__

    c = LocalCluster(tmp_path / "cluster")
    joined: list = []

    def joiner():
        with distributed.Client(c.address, set_as_default=False) as client:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if any(str(k).startswith("tl_aot-") for keys in client.processing().values() for k in keys):
                    c.start_worker("late")
                    c.start_worker("late-stale", TL_AOT_TEST_REPORT_VERSION="9.9.9")
                    c.wait_for("late")
                    c.wait_for("late-stale")
                    joined.append(time.monotonic())
                    return
                time.sleep(0.05)

    result, lines = _build_while(c, ["first"], joiner, tmp_path, session_runtime)
    assert joined, "no task was seen running"
    assert any(ln.startswith("cluster: worker late (") and "joined and agrees" in ln for ln in lines), lines
    refused = [ln for ln in lines if ln.startswith("cluster: refused worker late-stale")]
    assert refused and f"tl_aot {__version__} here, 9.9.9 there" in refused[0] and "joined during the build" in refused[0], lines
    ran = [ln for ln in lines if ln.startswith("[") and "add_one sm_" in ln and " on " in ln]  # progress lines
    assert any(" on late (" in ln for ln in ran) and any(" on first (" in ln for ln in ran), lines
    assert not any(" on late-stale" in ln for ln in lines)
    assert result.library.read_bytes() == reference.library.read_bytes()


def test_a_worker_whose_tools_change_after_vetting_refuses_its_task_and_it_runs_elsewhere(reference, tmp_path, session_runtime):
    """The task's own check: a worker that agreed when vetted but no longer does refuses, naming the difference;
    it gets no more tasks and its task runs on the other worker."""
    from tl_aot.pipeline.library import build_library

    c = LocalCluster(tmp_path / "cluster")
    lines: list = []

    def log(line: str) -> None:
        lines.append(line)
        if "worker(s) agree" in line:  # vetted, no task submitted yet: now its tl_aot "changes"
            with distributed.Client(c.address, set_as_default=False) as client:
                addr = next(a for a, w in client.scheduler_info()["workers"].items() if w["name"] == "turncoat")
                client.run(lambda: os.environ.update({"TL_AOT_TEST_REPORT_VERSION": "9.9.9"}), workers=[addr])

    try:
        c.add_worker("steady")
        c.add_worker("turncoat")
        cache = with_runtime(tmp_path / "cache", session_runtime)
        result = build_library(_lib(), out_dir=tmp_path / "out", cache_dir=cache, log=log, cluster=c.address)
    finally:
        c.close()
    refused = [ln for ln in lines if ln.startswith("cluster: refused worker turncoat")]
    assert refused and "9.9.9" in refused[0], lines
    ran = [ln for ln in lines if ln.startswith("[") and "add_one sm_" in ln and " on " in ln]  # progress lines
    assert len(ran) == 2 and all(" on steady (" in ln for ln in ran), lines
    assert result.library.read_bytes() == reference.library.read_bytes()


def _batch_lib():
    """Three variants of one arch (two kernels of one file, one of them twice): one task on a one-thread worker."""
    from tl_aot.spec import KernelSpec, LibrarySpec

    entries = (
        KernelSpec.create(name="add_one", source=KERNEL, function="add_one", archs=["80"]),
        KernelSpec.create(name="add_half", source=KERNEL, function="add_one", args={"dtype": "float16"}, archs=["80"]),
        KernelSpec.create(name="axpy", source=KERNEL, function="axpy", args={"N": 1024}, archs=["80"]),
    )
    return LibrarySpec(name="batched", entries=entries)


def test_variants_of_one_arch_build_as_one_task_in_one_nvcc_run(tmp_path, session_runtime):
    """A one-thread worker gets the three sm_80 variants as one task: lowered one by one, compiled in one nvcc run
    (the worker says so per variant), and the library is the local build's, byte for byte."""
    from tl_aot.pipeline.library import build_library

    local_cache = with_runtime(tmp_path / "local-cache", session_runtime)
    local = build_library(_batch_lib(), out_dir=tmp_path / "local", cache_dir=local_cache, jobs=2, log=None, cluster="")
    c = LocalCluster(tmp_path / "cluster")
    keys: set = set()
    done = threading.Event()

    def watch():  # the Dask tasks the scheduler runs, as they run
        with distributed.Client(c.address, set_as_default=False) as client:
            while not done.is_set():
                keys.update(str(k) for ks in client.processing().values() for k in ks if str(k).startswith("tl_aot-"))
                time.sleep(0.05)

    lines: list = []
    try:
        c.add_worker("solo")
        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            cache = with_runtime(tmp_path / "cache", session_runtime)
            result = build_library(_batch_lib(), out_dir=tmp_path / "out", cache_dir=cache, log=lines.append, cluster=c.address)
        finally:
            done.set()
            watcher.join()
    finally:
        c.close()
    ran = [ln for ln in lines if ln.startswith("[") and " sm_80 on solo (" in ln]
    assert len(ran) == 3 and all("one nvcc run for 3" in ln for ln in ran), lines
    assert "cluster: 3 variant(s) in 1 task(s), each of one arch and flags (up to 3 per nvcc run)" in lines, lines
    assert len(keys) == 1 and "tl_aot-add_one+2-sm_80-" in next(iter(keys)), keys  # one Dask task held all three
    assert result.library.read_bytes() == local.library.read_bytes()
    assert result.header.read_bytes() == local.header.read_bytes()


def test_a_second_machine_reuses_variants_through_the_shared_cache(reference, cluster_build, tmp_path, session_runtime):
    from tl_aot.pipeline.library import build_library

    _, _, shared = cluster_build
    lines: list = []
    cache = with_runtime(tmp_path / "cache", session_runtime)
    result = build_library(_lib(), out_dir=tmp_path, cache_dir=cache, log=lines.append, cluster="", cache_url=shared)
    assert "2 of 2 variant(s) from the shared cache" in "\n".join(lines)
    assert not any(ln.startswith("[") and "lower " in ln for ln in lines), lines  # nothing lowered here
    assert result.library.read_bytes() == reference.library.read_bytes()


RELATIVE_SPEC = """
[library]
name = "add_one"
archs = ["80"]

[[entry]]
name = "add_one"
source = "elementwise.py"
function = "add_one"
"""


def test_a_worker_in_an_empty_folder_builds_what_the_driver_names_by_relative_paths(tmp_path, session_runtime):
    """The README's promise: workers need no checkout. A spec with a relative source, and a relative CLI target."""
    project, empty = tmp_path / "project", tmp_path / "empty"
    project.mkdir()
    empty.mkdir()
    (project / "elementwise.py").write_bytes(KERNEL.read_bytes())
    (project / "kernels.toml").write_text(RELATIVE_SPEC)
    for cache in ("local-cache", "spec-cache", "cli-cache"):  # the drivers' caches (relative, named below)
        with_runtime(project / cache, session_runtime)
    # the reference bytes, built here in this process (the command as written, without a second TileLang import)
    local = tl_aot_here("build", "--spec", "kernels.toml", "-o", "local", "--cache-dir", "local-cache", "-q", cwd=project)
    assert local.returncode == 0, local.stderr
    c = LocalCluster(tmp_path / "cluster")
    try:
        c.add_worker("elsewhere", cwd=empty)
        for out, target in (("spec", ["--spec", "kernels.toml"]), ("cli", ["elementwise.py:add_one", "--arch", "80"])):
            proc = tl_aot_cli("build", *target, "-o", out, "--cache-dir", f"{out}-cache", "--cluster", c.address, cwd=project)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            assert "on elsewhere" in proc.stdout, proc.stdout
            assert (project / out / "libadd_one.so").read_bytes() == (project / "local" / "libadd_one.so").read_bytes()
    finally:
        c.close()
    assert not any(empty.iterdir())  # the worker wrote nothing where it was started


def test_shards_link_into_the_one_machine_library(reference, tmp_path):
    from tl_aot.pipeline.shards import PartError, build_part, link_parts

    cache = reference.library.parent / "cache"  # each shard its own machine; here they share the reference's cache
    parts = [tmp_path / f"part{k}" for k in (1, 2)]
    for k, part in enumerate(parts, 1):
        build_part(_lib(), shard=f"{k}/2", out_dir=part, cache_dir=cache, log=None, cluster="")
    held = [json.loads((p / "part.json").read_text())["variants"] for p in parts]
    assert [len(h) for h in held] == [1, 1] and not set(held[0]) & set(held[1])
    lib = link_parts([str(p) for p in reversed(parts)], out_dir=tmp_path / "linked", log=None)
    assert lib.read_bytes() == reference.library.read_bytes()
    assert (tmp_path / "linked" / "add_one.h").read_bytes() == reference.header.read_bytes()
    with pytest.raises(PartError, match=r"shard 2/2 missing"):
        link_parts([str(parts[0])], out_dir=tmp_path / "again", log=None)
    proc = tl_aot_cli("link", parts[0], parts[0], "-o", tmp_path / "again")
    assert proc.returncode == 1 and "shard 1/2 given twice" in proc.stderr and "Traceback" not in proc.stderr


WORKLOAD = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def double(N, block=128):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] * 2.0

    return main


double(1024)
"""


def test_build_capture_on_the_cluster_is_the_local_build(cluster, tmp_path, session_runtime):
    """``build --capture RECORD --cluster``: the recorded kernel travels in its spec (no record shipped); same bytes as here."""
    (tmp_path / "workload.py").write_text(WORKLOAD)
    record = tmp_path / "rec.json"
    proc = tl_aot_cli("capture", "-o", record, "--device", "H100-SXM", "--", sys.executable, "workload.py", cwd=tmp_path)
    assert proc.returncode == 0 and record.is_file(), proc.stdout + proc.stderr
    libs = []
    for where, extra in (("here", []), ("cluster", ["--cluster", cluster.address])):
        out, cache = tmp_path / where, with_runtime(tmp_path / f"{where}-cache", session_runtime)
        proc = tl_aot_cli("build", "--capture", record, "--arch", "80", "-o", out, "--cache-dir", cache, *extra)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        libs.append(next(out.glob("lib*.so")).read_bytes())
    assert " on w" in proc.stdout, proc.stdout
    assert libs[0] == libs[1]


def test_the_cluster_driver_killed_at_a_random_instant_leaves_nothing_damaged(cluster, tmp_path):
    """``build --cluster --cache-url`` SIGKILLed (its process group) at a seeded instant of its CPU time
    (``tests/support/chaos.py``; the sweep is ``bench/chaos_kills.py``): outputs absent or whole, the local and
    shared caches verify, and the next build is the undisturbed one's bytes."""
    import random

    from support import chaos

    build = chaos.front_end("cluster-driver", tmp_path / "ws", cluster=cluster.address)
    ref = chaos.undisturbed(build)
    trial = chaos.kill_trial(build, ref, at=random.Random("42:cluster-driver").random(), seed=0, log_dir=tmp_path / "logs")
    assert trial.killed and trial.ok, trial
