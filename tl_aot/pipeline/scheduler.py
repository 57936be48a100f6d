"""Run a build's stages in parallel: how many jobs, where lowering runs, and the order things start.

The stages themselves (:mod:`tl_aot.pipeline.stages`) know nothing of threads. Here they share one
budget of ``jobs`` slots (:class:`~tl_aot.pipeline.job_slots.JobSlots`, like make's jobserver):
``-j 1`` is strictly serial and ``-j N`` never runs more than N tools at once. Lowering runs in
worker processes once ``-j`` leaves room for more than one (TileLang is not thread safe), as many
as there are slots (within memory): lowering is most of a build's CPU, and a slot that is not
lowering compiles. Lowering starts with the kernels whose capture took longest to compile
(:func:`longest_first`), so none of them is left to run alone at the end. Lowered variants compile in batches of one arch and flags
(:mod:`tl_aot.pipeline.batching`) as soon as a batch is full, before more lowering starts; once
the last variants are lowering, what waits is cut into batches for the free slots; the launcher
compiles while nvcc still runs.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
import time

from ..common.errors import CompileError, SpecError, TlAotError
from ..common.metadata import LoweredVariant
from ..lower.lower_worker import LoweringPool
from .batching import MAX_BATCH, Batcher, batch_size
from .job_slots import COMPILE, LOWER, JobSlots
from .launcher_faults import ISSUES, LauncherCodeError
from .plan import Task
from .progress import Progress
from .variant_run import VariantRun

__all__ = [
    "default_jobs",
    "lowering_workers",
    "batch_size",
    "MAX_BATCH",
    "run_variants",
    "launcher_stage",
    "longest_first",
]

#: Memory one job may take: nvcc of a big TileLang kernel peaks near 1.5 GB; a lowering worker holds
#: TileLang, TVM and torch (about 0.4 GB for a GEMM, more for attention kernels).
JOB_MEMORY_GB = 1.5


def available_memory_gb() -> float | None:
    """MemAvailable from /proc/meminfo (None where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return None


def default_jobs() -> int:
    """Parallel jobs: ``MAX_JOBS`` if set (as torch users expect), else the CPU count within memory.

    At most one job per :data:`JOB_MEMORY_GB` of available memory (as flashinfer's builds derive
    theirs), so ``-j`` left to its default never makes a small machine swap.
    """
    env = os.environ.get("MAX_JOBS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            msg = f"MAX_JOBS={env!r}: expected a whole number of jobs, at least 1 (or leave MAX_JOBS unset)"
            raise SpecError(msg)
        return int(env)
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, _jobs_in_memory(cpus)))


def _jobs_in_memory(otherwise: int) -> int:
    """How many :data:`JOB_MEMORY_GB` jobs available memory holds (``otherwise`` where it cannot be read)."""
    mem = available_memory_gb()
    return int(mem // JOB_MEMORY_GB) if mem is not None else otherwise


def lowering_workers(jobs: int, variants: int) -> int:
    """Lowering processes for a build of ``variants`` with ``jobs`` slots: one per slot, within memory.

    Lowering is most of a build's CPU (TileOPs' kernels: 670 CPU-s of lowering to 96 of nvcc for
    112 variants), so every slot may lower; slots are shared (:mod:`tl_aot.pipeline.job_slots`)
    and a compile waiting for one goes first, so nvcc is never held back by it. One means this
    process, no worker: with ``-j 2`` or less, one lowering here keeps a slot busy and no second
    TileLang import is paid for.
    """
    if jobs <= 2:
        return 1
    return max(1, min(variants, _jobs_in_memory(jobs), jobs))


def run_variants(todo: list, run: VariantRun, stages, *, jobs: int, keep_going: bool, progress: Progress) -> VariantRun:
    """Lower and compile ``todo`` (plan tasks) and compile the launcher, in parallel within ``jobs`` slots.

    ``stages`` gives ``lower(task, lower_fn)``, ``kept(task, variant)`` (the image of a cached variant
    lowering kept: nothing to compile), ``compile_many(pairs)``, ``launcher(run)`` (renders
    and compiles the launcher of ``run.tasks``: a :class:`~tl_aot.pipeline.stages.Launcher`) and ``runtime()``. A
    failing variant stops the build, or with ``keep_going`` is recorded in ``run.failures``.
    """
    slots = JobSlots(jobs)
    run.workers = lowering_workers(jobs, len(todo))

    def held(fn, *args, priority=COMPILE):
        with slots.held(priority):
            t0 = time.perf_counter()
            return fn(*args), time.perf_counter() - t0

    with (
        cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool,
        cf.ThreadPoolExecutor(max_workers=run.workers) as lowering,
        LoweringPool(run.workers, native_log=getattr(stages, "native_log", "warnings"))
        if run.workers > 1
        else contextlib.nullcontext() as processes,
    ):
        lower_fn = processes.lower if processes else None
        runtime = pool.submit(held, stages.runtime)
        pending = {lowering.submit(_lowered, held, stages.lower, t, lower_fn, progress): t for t in longest_first(todo)}
        compiling: dict = {}
        batcher: Batcher = Batcher(batch_size(jobs, len(todo)))

        def compile_batch(batch: list) -> None:
            compiling[pool.submit(held, _compile_batch, stages, batch)] = batch

        try:
            unfinished = len(pending)
            for fut in cf.as_completed(pending):
                unfinished -= 1
                task = pending[fut]
                variant, seconds = _result(fut, task, run, keep_going)
                image = stages.kept(task, variant) if variant is not None else None
                if image is not None:  # a cached variant walked again: the same kernel, its image kept
                    run.lowered[task.key], run.images[task.key] = variant, image
                elif variant is not None:
                    run.lowered[task.key] = variant
                    run.spent.lowering += seconds
                    full = batcher.add(_group_of(task, variant), (task, variant, seconds))
                    if full:
                        compile_batch(full)
                # The last variants are lowering (none waits for a worker): what waits compiles now, cut for every slot
                # (not only those free this instant: a batch of 23 heavy kernels cut for the one slot free then ran its
                # ptxas one after the other for 40 s while the slots freed after it idled).
                if unfinished <= run.workers and jobs - unfinished > 0:
                    for batch in batcher.drain(jobs):
                        compile_batch(batch)
            for batch in batcher.drain(jobs):
                compile_batch(batch)
            # Everything the launcher says is known once lowering is done: compile it while nvcc runs.
            _launcher(run, stages, held, keep_going)
            nvcc_failed = _collect_images(compiling, run, keep_going)
            if nvcc_failed:  # the launcher named images that failed: render and compile it without them
                _launcher(run, stages, held, keep_going)
            run.runtime_obj = runtime.result()[0]
        except BaseException:  # leaving the `with` also ends the lowering workers
            for f in [*compiling, *pending]:
                f.cancel()
            raise
    return run


def longest_first(todo: list[Task]) -> list[Task]:
    """``todo`` in the order to start lowering: the longest recorded compile first, ties and unknowns in plan order.

    A captured kernel carries how long the JIT took to compile it (``compile_s``); one that takes 40 s
    met late in the plan would lower alone while every other slot idles. Only the start order
    changes: what a build writes is laid out in plan order, whatever order variants finish in.
    """
    return sorted(todo, key=lambda t: -_recorded_seconds(t))


def _recorded_seconds(task: Task) -> float:
    ref = task.spec.capture
    return (ref.kernel.compile_s or 0.0) if ref is not None else 0.0


def _group_of(task, variant: LoweredVariant) -> tuple:
    """What variants must share to compile in one run: arch, nvcc flags, backend (:func:`~tl_aot.pipeline.images.images_of`)."""
    return (str(task.arch), tuple(variant.nvcc_options), variant.backend)


def _compile_batch(stages, waiting: list) -> list:
    """Compile ``waiting`` ((task, variant, lowering seconds)) in one job: each item an image or its error."""
    return stages.compile_many([(task, variant) for task, variant, _ in waiting])


def _lowered(held, lower, task, lower_fn, progress):
    progress.step(f"lower {task.spec.name} {task.arch}")
    return held(lower, task, lower_fn, priority=LOWER)


def _result(fut, task, run: VariantRun, keep_going: bool):
    """A finished stage's (value, seconds), or (None, 0) for a failure a keep-going build records."""
    try:
        return fut.result()
    except TlAotError as e:
        if not keep_going:
            raise
        run.fail(task, e)
        return None, 0.0


def _launcher(run: VariantRun, stages, held, keep_going: bool) -> None:
    """The launcher stage: rendered here, its units compiled in the job slots (each a job, as an nvcc batch is).

    Each unit asks for a slot from a thread of its own, as the one launcher did from this one: it
    takes the next free slot among the compiles already waiting, never queued behind every nvcc
    batch the build's pool has yet to start.
    """

    def each(jobs: list) -> list:
        with cf.ThreadPoolExecutor(max_workers=max(1, len(jobs))) as units:
            done = [fut.result() for fut in [units.submit(held, job) for job in jobs]]
        run.spent.host += sum(seconds for _, seconds in done)
        return [value for value, _ in done]

    launcher_stage(run, stages, each, keep_going=keep_going)


def launcher_stage(run: VariantRun, stages, each, *, keep_going: bool) -> None:
    """Render and compile the launcher of ``run``'s tasks into ``run.launcher``.

    Entries whose generated code fails to compile (a :class:`LauncherCodeError`: a tl_aot bug) stop
    the build, or with ``keep_going`` are left out, every arch of them, as variants that failed to
    lower are: the launcher is rendered and compiled again without them, so the header, the
    manifest and the launcher agree.
    """
    while True:
        run.tasks = stages.without_failures(run)
        try:
            run.launcher = stages.launcher(run, each)
            return
        except LauncherCodeError as e:
            if not keep_going or not _leave_out_bad_code(run, e):
                raise


def _leave_out_bad_code(run: VariantRun, error: LauncherCodeError) -> int:
    """Record every variant of the entries ``error`` names as left out, each with the compiler's first error line; say so.

    Returns how many variants were left out (none: the entries named are not the run's, and the error stands).
    """
    log = run.progress.log
    count = 0
    for bad in error.bad:
        tasks = [t for t in run.tasks if t.spec.name in bad.entries]
        for task in tasks:
            msg = f"entry {task.spec.name!r} ({task.arch}): {bad.reason(task.spec.name)}\n" + bad.output
            run.fail(task, CompileError(msg, entry=task.spec.name, arch=str(task.arch)))
            count += 1
        if log:
            archs = ", ".join(dict.fromkeys(str(t.arch) for t in tasks))
            lines = "".join(f"\n    {ln}" for ln in bad.errors)
            log(
                f"launcher: left out {' + '.join(map(repr, bad.entries))} ({archs}): its generated C++ does not compile "
                f"(found in {error.seconds:.1f} s by compiling entries apart), a tl_aot bug: please report it at {ISSUES} "
                f"with these lines:{lines}"
            )
    return count


def _collect_images(compiling: dict, run: VariantRun, keep_going: bool) -> bool:
    """Wait for every nvcc batch; True if a variant failed (and was left out)."""
    failed = False
    for fut in cf.as_completed(compiling):
        batch = compiling[fut]
        images, seconds = fut.result()
        run.spent.nvcc += seconds
        for (task, _, t_lower), image in zip(batch, images):
            if isinstance(image, TlAotError):
                if not keep_going:
                    raise image
                run.fail(task, image)
                failed = True
                continue
            run.built(task, image, t_lower + seconds / len(batch))
    return failed
