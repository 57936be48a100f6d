"""Builds past one machine: each variant's lowering and nvcc as a task on a Dask cluster's workers.

Why Dask (``distributed``): pure Python, a small install (``tl_aot[cluster]``), and the standard
``dask scheduler`` / ``dask worker`` commands run it anywhere, a CI runner or an HPC job
included; a lost worker's tasks are rescheduled by the engine itself. Ray would do the same from a
~200 MB wheel with its own object store and dashboard, none of which a build needs.

The driver (this module, in the build's process):

1. connects to ``ADDRESS`` (``tcp://host:8786``, or a scheduler file ``dask scheduler
   --scheduler-file F`` wrote) and asks every worker for its :class:`~tl_aot.pipeline.toolset.Toolset`; a
   worker whose tools differ is refused before any task runs (its differences logged). A worker
   that agrees is given the Dask resource named after the driver's toolset
   (``tl_aot-tools-<digest>``, one unit per thread), and every task asks for one unit of it, so
   the scheduler sends tasks only to workers that agree, whenever they joined. While the build
   runs, the driver vets each worker that joins the same way (once a second), before it can get
   a task; a worker whose tools differ is refused and never given the resource;
2. submits one :class:`~tl_aot.pipeline.cluster_batch.BatchTask` per batch of the variants the cache
   lacks (:func:`~tl_aot.pipeline.cluster_batch.batches_of`: one arch and flags, as many variants as keep
   every thread busy; the worker lowers each and compiles them in one nvcc run, as a local build
   does; sources as bytes: no shared file system), with a unique key (never answered from another build's result),
   no more at a time than the agreeing workers have threads: tasks with resources are placed on a
   worker when submitted (Dask queues only unrestricted ones), so a worker that joins later
   gets the next tasks rather than none;
3. resubmits a task (whole) whose worker refused it (its tools changed since it was vetted: the task
   checks again) after taking that worker's resource away, so it runs on one that agrees;
4. verifies each variant's :class:`~tl_aot.pipeline.variant_task.VariantResult` (:func:`~tl_aot.pipeline.result_check.accept_result`)
   and alone writes the cache; a worker killed mid-task has its task rescheduled by Dask, and
   nothing it half wrote can reach the cache (it writes none);
5. renders and compiles the launcher and links locally, as a local build does: the library is
   the same bytes.

Progress lines name the worker each variant ran on and, while tasks run, what runs where.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..common.errors import ClusterError, TlAotError, ToolchainNotFound
from .cluster_batch import BatchTask, batches_of, group_key, label_of
from .job_slots import in_threads
from .result_check import accept_result
from .scheduler import default_jobs, launcher_stage
from .toolset import Toolset, differences, local_toolset
from .variant_task import ToolsetMismatch, pack_task

if TYPE_CHECKING:
    from .plan import Task
    from .stages import Stages
    from .variant_run import VariantRun

__all__ = ["ClusterError", "connect", "vet_workers", "toolset_tag", "run_on_cluster", "CLUSTER_ENV"]

#: The environment variable every front end reads for the cluster's address (``--cluster`` wins).
CLUSTER_ENV = "TL_AOT_CLUSTER"

#: Where progress lines go.
Log = Callable[[str], object]

#: Seconds between checks of the cluster's workers while tasks run.
_POLL_S = 1.0

#: Seconds between "what runs where" lines.
_WHERE_EVERY_S = 15.0


def _dask():
    try:
        import distributed
    except ImportError:
        msg = "--cluster / TL_AOT_CLUSTER needs Dask's distributed scheduler: pip install 'tl_aot[cluster]'"
        raise ToolchainNotFound(msg) from None
    return distributed


def connect(address: str, *, timeout_s: float = 30.0):
    """A ``distributed.Client`` of ``address`` (``tcp://host:port`` or a scheduler file); an error names it."""
    from pathlib import Path

    distributed = _dask()
    try:
        if "://" not in address and Path(address).is_file():
            return distributed.Client(scheduler_file=address, timeout=timeout_s, set_as_default=False)
        return distributed.Client(address, timeout=timeout_s, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        msg = f"cluster {address}: cannot connect to its scheduler ({type(e).__name__}: {e}); is `dask scheduler` running there?"
        raise ClusterError(msg) from None


def _report_toolset() -> dict[str, str]:
    """Run on each worker by :func:`vet_workers`: its toolset as a plain dict."""
    return local_toolset().as_dict()


async def _grant(tag: str, dask_worker=None) -> int:
    """Run on an agreeing worker: give it ``tag``, one unit per thread (tasks ask for one); returns its threads."""
    threads = int(getattr(dask_worker.state, "nthreads", 0) or dask_worker.nthreads or 1)
    if dask_worker.state.total_resources.get(tag) != threads:
        await dask_worker.set_resources(**{tag: threads})
    return threads


def _scheduler_workers(dask_scheduler=None) -> list:
    """Run on the scheduler: the addresses of the workers it has now (the client's own view lags)."""
    return list(dask_scheduler.workers)


def _worker_names(client) -> dict[str, str]:
    """Worker address -> ``name (address, N threads)``."""
    info = client.scheduler_info().get("workers", {})
    return {a: f"{w.get('name', a)} ({a}, {w.get('nthreads', '?')} thread{'' if w.get('nthreads') == 1 else 's'})" for a, w in info.items()}


def toolset_tag(here) -> str:
    """``tl_aot-tools-<digest>``: the Dask resource of the workers whose toolset is ``here`` (one per toolset)."""
    return "tl_aot-tools-" + hashlib.sha256(json.dumps(here.as_dict(), sort_keys=True).encode()).hexdigest()[:16]


def _vet(client, addresses, here, tag: str, names: dict[str, str]) -> tuple[dict[str, int], list[str], set[str]]:
    """Vet the workers at ``addresses`` (None: all): each that agrees with ``here`` is given ``tag``.

    Returns ({address: threads} of those that agree, [a refusal line for each other], every address examined).
    """
    reports = client.run(_report_toolset, workers=None if addresses is None else list(addresses), on_error="return")
    ok, refused = [], []
    for addr, report in sorted(reports.items()):
        name = names.get(addr, addr)
        if isinstance(report, BaseException):
            refused.append(f"{name}: cannot report its tools ({type(report).__name__}: {report}); is tl_aot installed there?")
            continue
        diff = differences(here, report, here_name="here", there_name="there")
        if diff:
            refused.append(f"{name}: {'; '.join(diff)}")
        else:
            ok.append(addr)
    granted = client.run(_grant, tag, workers=ok, on_error="return") if ok else {}
    threads = {a: t for a, t in granted.items() if isinstance(t, int)}
    refused += [f"{names.get(a, a)}: cannot take tasks ({type(e).__name__}: {e})" for a, e in granted.items() if not isinstance(e, int)]
    return threads, refused, set(reports)


def vet_workers(client, log=None, *, tag: str = "") -> tuple[dict[str, int], set[str]]:
    """The workers whose toolset is this machine's, each given ``tag``; the others refused, each difference logged.

    Returns ({address: threads} of those that agree, every worker examined); one that joins later
    is vetted when the build sees it.
    Raises :class:`ClusterError` when the cluster has no worker, :class:`ToolsetMismatch` when none agrees.
    """
    here = local_toolset()
    tag = tag or toolset_tag(here)
    try:
        client.wait_for_workers(1, timeout=30)
    except (TimeoutError, OSError) as e:
        msg = f"cluster {client.scheduler.address}: no worker joined within 30 s ({e}); start some with `dask worker ADDRESS`"
        raise ClusterError(msg) from None
    names = _worker_names(client)
    ok, refused, examined = _vet(client, None, here, tag, names)
    for line in refused:
        if log:
            log(f"cluster: refused worker {line}")
    if not ok:
        msg = f"cluster {client.scheduler.address}: no worker has this machine's tools ({here.describe()}):\n  " + "\n  ".join(refused)
        raise ToolsetMismatch(msg)
    if log:
        log(f"cluster {client.scheduler.address}: {len(ok)} worker(s) agree ({here.describe()}): {', '.join(names.get(a, a) for a in ok)}")
    return ok, examined


def run_on_cluster(
    todo: list[Task], run: VariantRun, stages: Stages, *, address: str, log: Log | None, keep_going: bool, launcher: bool = True
) -> VariantRun:
    """Build ``todo`` (plan tasks) on the cluster at ``address``; verify, cache and record each; then the launcher here.

    Fills ``run`` (a :class:`~tl_aot.pipeline.variant_run.VariantRun`) as :func:`~tl_aot.pipeline.scheduler.run_variants`
    does; ``launcher=False`` (a shard) builds the variants only.
    """
    client = connect(address)
    try:
        here = local_toolset()
        tag = toolset_tag(here)
        ok, examined = vet_workers(client, log, tag=tag)
        with cf.ThreadPoolExecutor(max_workers=1) as local:
            runtime = local.submit(stages.runtime) if launcher else None
            run.workers, run.cluster = len(ok), address
            _Driver(client, _Vetted(here, tag, ok, examined), run, stages, log=log, keep_going=keep_going).build(todo)
            if runtime is not None:  # the launcher stage runs here
                t0 = time.perf_counter()
                launcher_stage(run, stages, in_threads(default_jobs()), keep_going=keep_going)
                run.spent.host += time.perf_counter() - t0
                run.runtime_obj = runtime.result()
    finally:
        client.close()
    return run


@dataclass(frozen=True)
class _Vetted:
    """The cluster's workers as vetted before the build: this machine's toolset, its resource tag, who agrees."""

    here: Toolset
    tag: str  # the Dask resource of the workers that agree (:func:`toolset_tag`)
    agree: dict[str, int]  # address -> threads
    examined: set[str]  # every worker address looked at


class _Driver:
    """Submits the tasks as threads free up, takes each result as it comes, vets workers that join, logs what runs where."""

    def __init__(self, client, vetted: _Vetted, run: VariantRun, stages: Stages, *, log: Log | None, keep_going: bool) -> None:
        self.client, self.here, self.tag, self.agree = client, vetted.here, vetted.tag, dict(vetted.agree)
        self.run, self.stages, self.log, self.keep_going, self.progress = run, stages, log, keep_going, run.progress
        self.names = _worker_names(client)
        self.seen = set(vetted.examined)  # a worker that joined after the vetting is vetted at the first check
        self.build_id = uuid.uuid4().hex[:8]
        self.futures: dict[Any, tuple[Task, ...]] = {}  # every future submitted -> its plan tasks (one arch and flags)
        self.outstanding: set = set()
        self.attempts: dict[str, int] = {}  # group key -> times a worker refused it (each attempt its own Dask key)

    def build(self, todo: list) -> None:
        """Every task of ``todo`` built on the cluster, in batches of one arch (or its error raised / recorded)."""
        from .cluster_worker import run_batch

        distributed = _dask()
        pending = batches_of(list(todo), sum(self.agree.values()))  # sent in order; one a worker refused goes first again
        if self.log and len(pending) < len(todo):
            most = max(len(g) for g in pending)
            self.log(f"cluster: {len(todo)} variant(s) in {len(pending)} task(s), each of one arch and flags (up to {most} per nvcc run)")
        waiting = distributed.as_completed([], loop=self.client.loop)
        last_check = last_where = time.monotonic()
        try:
            while pending or self.outstanding:
                while pending and len(self.outstanding) < max(1, sum(self.agree.values())):
                    group = pending.pop(0)
                    key, more = group_key(group), f"+{len(group) - 1}" if len(group) > 1 else ""
                    fut = self.client.submit(
                        run_batch,
                        BatchTask(tuple(pack_task(t, self.here) for t in group)),
                        key=f"tl_aot-{group[0].spec.name}{more}-{group[0].arch.sm}-{self.build_id}-{key[:12]}-{self.attempts.get(key, 0)}",
                        pure=False,
                        resources={self.tag: 1},
                        retries=0,
                    )
                    self.futures[fut] = group
                    self.outstanding.add(fut)
                    waiting.add(fut)
                if waiting.has_ready():
                    for fut in waiting.next_batch(block=False):
                        self.outstanding.discard(fut)
                        group = self.futures[fut]
                        if not self._take(fut, group):  # built again (the whole task) on a worker that still agrees, under a new key
                            pending.insert(0, group)
                            self.attempts[group_key(group)] = self.attempts.get(group_key(group), 0) + 1
                            del self.futures[fut]
                    continue
                time.sleep(0.05)
                if time.monotonic() - last_check < _POLL_S:
                    continue
                last_check = time.monotonic()
                self._check_workers()
                if self.log and last_check - last_where > _WHERE_EVERY_S:
                    last_where = last_check
                    self.log(_where(self.client, self.futures, self.names))
        except BaseException:
            for f in self.futures:
                f.cancel()
            raise

    def _check_workers(self) -> None:
        """Log the agreeing workers that left; vet those that joined (refused, or given the tasks' resource)."""
        now = set(self.client.run_on_scheduler(_scheduler_workers))
        for gone in sorted(set(self.agree) - now):
            if self.log:
                self.log(f"cluster: worker {self.names.get(gone, gone)} left; the scheduler runs its tasks on the others")
            del self.agree[gone]
        joined = now - self.seen
        if joined:
            self.seen |= joined
            self.names.update(_worker_names(self.client))
            ok, refused, _ = _vet(self.client, joined, self.here, self.tag, self.names)
            for line in refused:
                if self.log:
                    self.log(f"cluster: refused worker {line} (it joined during the build)")
            for addr in sorted(ok):
                if self.log:
                    self.log(f"cluster: worker {self.names.get(addr, addr)} joined and agrees; it takes tasks now")
            self.agree.update(ok)
            self.run.workers = len(self.agree)
        if not self.agree:
            msg = "cluster: every worker that agrees with this machine has left; nothing can build the variants left"
            raise ClusterError(msg)

    def _take(self, fut, group) -> bool:
        """One finished task: each variant's result verified and cached, or its error raised (recorded with ``keep_going``).

        False: its worker refused it (its toolset no longer agrees), so it is to be sent again.
        """
        distributed = _dask()
        try:
            results = fut.result()
        except distributed.KilledWorker as e:
            for task in group:
                msg = f"entry {task.spec.name!r} ({task.arch}): the workers running it died repeatedly ({e}); nothing was stored"
                self._failed(task, ClusterError(msg, entry=task.spec.name, arch=task.arch.sm))
            return True
        if results and results[0].error_class == "ToolsetMismatch" and self._refuse(results[0]):
            return False
        by_key = {r.key: r for r in results}
        for task in group:
            self._accept(task, by_key.get(task.key))
        return True

    def _failed(self, task, e: TlAotError) -> None:
        """A variant that cannot be built: its error raised, or recorded with ``keep_going``."""
        if not self.keep_going:
            raise e
        self.run.fail(task, e)

    def _accept(self, task, result) -> None:
        """One variant's result verified, then cached and recorded; or its error raised / recorded."""
        run = self.run
        try:
            if result is None:
                msg = f"entry {task.spec.name!r} ({task.arch}): the worker sent no result for it; nothing was stored"
                raise ClusterError(msg, entry=task.spec.name, arch=task.arch.sm)
            variant, image = accept_result(task, result)
        except TlAotError as e:
            self._failed(task, e)
            return
        self.stages.cache.store(task.key, variant, image, task.project, replace=self.stages.force)
        run.lowered[task.key] = variant
        run.built(task, image, result.lower_s + result.compile_s)
        run.spent.lowering += result.lower_s
        run.spent.nvcc += result.compile_s
        if result.worker not in self.names:
            self.names.update(_worker_names(self.client))
        where = self.names.get(result.worker, result.worker)
        how = f" (its share of one nvcc run for {result.shared})" if result.shared > 1 else ""
        how = how or (f" (alone, in a task of {result.batch})" if result.batch > 1 else "")
        self.progress.step(
            f"{task.spec.name} {task.arch} on {where}: lowered {result.lower_s:.1f} s, "
            f"nvcc {result.compile_s:.1f} s{how} ({len(image) / 1024:.0f} KiB)"
        )

    def _refuse(self, result) -> bool:
        """A worker whose tools changed since it was vetted refused a task: take its resource away, log why.

        Returns whether the task can go elsewhere (another worker agrees); else its error stands.
        """
        addr = result.worker
        if self.log:
            self.log(f"cluster: refused worker {self.names.get(addr, addr)}: {result.error}")
        self.client.run(_revoke, self.tag, workers=[addr], on_error="return")
        self.agree.pop(addr, None)
        self.run.workers = len(self.agree)
        return bool(self.agree)


async def _revoke(tag: str, dask_worker=None) -> None:
    """Run on a worker that no longer agrees: no more tasks of this toolset for it."""
    await dask_worker.set_resources(**{tag: 0})


def _where(client, futures: dict[Any, tuple[Task, ...]], names: dict[str, str]) -> str:
    """``running: w1: gemm, softmax sm_90a; w2: softmax sm_80``: what each worker runs now."""
    by_key = {f.key: group for f, group in futures.items()}
    parts = []
    for addr, keys in sorted(client.processing().items()):
        labels = [label_of(by_key[k]) for k in keys if k in by_key]
        if labels:
            parts.append(f"{names.get(addr, addr).split(' ')[0]}: {', '.join(labels)}")
    return "cluster running: " + ("; ".join(parts) if parts else "(waiting for a worker)")
