"""How a build spreads over the machine: job and worker counts, lowering in worker processes,
compiler launchers and progress lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from tl_aot.common.errors import LoweringError, ToolchainNotFound
from tl_aot.pipeline import scheduler
from tl_aot.pipeline.progress import Progress
from tl_aot.pipeline.variant_run import VariantRun
from tl_aot.spec import KernelSpec

KERNELS = Path(__file__).parents[1] / "kernels"


def test_default_jobs_fit_memory(monkeypatch):
    monkeypatch.delenv("MAX_JOBS", raising=False)
    monkeypatch.setattr(scheduler.os, "sched_getaffinity", lambda _pid: set(range(16)))
    monkeypatch.setattr(scheduler, "available_memory_gb", lambda: 64.0)
    assert scheduler.default_jobs() == 16
    monkeypatch.setattr(scheduler, "available_memory_gb", lambda: 7.0)  # 1.5 GB a job: 4 fit
    assert scheduler.default_jobs() == 4
    monkeypatch.setattr(scheduler, "available_memory_gb", lambda: 0.5)
    assert scheduler.default_jobs() == 1
    monkeypatch.setenv("MAX_JOBS", "12")  # the user's word wins
    assert scheduler.default_jobs() == 12


def test_every_slot_may_lower_within_memory(monkeypatch):
    monkeypatch.setattr(scheduler, "available_memory_gb", lambda: 128.0)
    assert scheduler.lowering_workers(2, 50) == 1  # lowered here: no worker process, no second TileLang import
    assert scheduler.lowering_workers(4, 50) == 4
    assert scheduler.lowering_workers(16, 104) == 16  # lowering is most of a build's CPU: every slot may lower
    assert scheduler.lowering_workers(16, 3) == 3  # never more than there is to lower
    monkeypatch.setattr(scheduler, "available_memory_gb", lambda: 4.0)
    assert scheduler.lowering_workers(16, 104) == 2  # nor than memory holds


def test_a_batch_is_the_builds_share_per_slot():
    assert scheduler.batch_size(2, 10) == 10  # -j 2 lowers here: one compile slot, one batch of all
    assert scheduler.batch_size(1, 10) == 10  # -j 1: lower everything, then one nvcc front end
    assert scheduler.batch_size(16, 104) == 7  # every slot may compile: a batch of 7 each
    assert scheduler.batch_size(16, 8000) == scheduler.MAX_BATCH  # a library's build: the most one job compiles
    assert scheduler.batch_size(4, 2) == 1  # as many slots as variants: each alone


def test_batches_hold_one_group_and_the_tail_is_cut_for_the_free_slots():
    """A group (arch, flags) becomes a batch once full; what is left at the end is cut so every free slot compiles."""
    from tl_aot.pipeline.batching import Batcher

    b: Batcher = Batcher(4)
    out = [b.add(arch, (arch, i)) for i in range(7) for arch in ("sm_80", "sm_90a")]
    full = [x for x in out if x]
    assert [[a for a, _ in f] for f in full] == [["sm_80"] * 4, ["sm_90a"] * 4]  # never two archs in one batch
    assert len(b) == 6
    tail = b.drain(6)  # six free slots, three of each arch waiting: six batches of one
    assert sorted(len(t) for t in tail) == [1] * 6 and len(b) == 0
    for arch in ("sm_80", "sm_90a"):
        b.add(arch, (arch, 0)), b.add(arch, (arch, 1)), b.add(arch, (arch, 2))
    tail = b.drain(2)  # two slots: one batch per group, never mixed
    assert sorted(len(t) for t in tail) == [3, 3] and all(len({a for a, _ in t}) == 1 for t in tail)
    assert b.drain(4) == []


def test_a_freed_slot_goes_to_the_waiting_compile_before_more_lowering():
    """Slots are handed over: a lowering thread asking again at once cannot take one a compile was waiting for."""
    import threading
    import time

    from tl_aot.pipeline.job_slots import COMPILE, LOWER, JobSlots

    slots = JobSlots(1)
    slots.acquire(LOWER)
    order: list[str] = []
    busy = {"now": 1, "most": 1}

    def job(name: str, priority: int) -> None:
        with slots.held(priority):
            busy["now"] += 1
            busy["most"] = max(busy["most"], busy["now"])
            order.append(name)
            time.sleep(0.001)
            busy["now"] -= 1

    threads = [threading.Thread(target=job, args=("lower-1", LOWER))]
    threads[0].start()
    time.sleep(0.02)  # lower-1 waits first
    threads += [threading.Thread(target=job, args=("nvcc-1", COMPILE)), threading.Thread(target=job, args=("nvcc-2", COMPILE))]
    for t in threads[1:]:
        t.start()
        time.sleep(0.02)
    busy["now"] -= 1
    slots.release()  # the slot goes to the first compile, not to the lowering that asked before it
    for t in threads:
        t.join(5)
    assert order == ["nvcc-1", "nvcc-2", "lower-1"]
    assert busy["most"] == 1  # never more than -j at once


def test_left_out_variants_are_listed_in_plan_order_whatever_order_they_fail_in():
    """The manifest's left_out does not depend on which worker finished first (a library's bytes do not depend on -j)."""
    from tl_aot.common.arch import parse_arch
    from tl_aot.pipeline.plan import Task

    spec = lambda n: KernelSpec.create(name=n, source=KERNELS / "elementwise.py", function="add_one", archs=["80"])  # noqa: E731
    tasks = [Task(spec(n), parse_arch(a), f"{n}-{a}", None) for n in ("a", "b", "c") for a in ("sm_80", "sm_90a")]

    def left_out(order):
        run = VariantRun("lib", {}, {}, list(tasks), Progress(0, None))
        for i in order:
            run.fail(tasks[i], LoweringError(f"boom {i}"))
        return [(x.entry, x.arch) for x in run.left_out]

    assert left_out([5, 0, 3]) == left_out([0, 3, 5]) == [("a", "sm_80"), ("b", "sm_90a"), ("c", "sm_90a")]


def test_lowering_starts_with_the_longest_recorded_compile_and_keeps_plan_order_for_ties_and_unknowns(tmp_path):
    """A 40 s kernel late in the plan is lowered first, not alone at the end; equal or unknown times keep the plan's order."""
    import dataclasses

    from tl_aot.common.arch import parse_arch
    from tl_aot.config.capture_ref import CapturedKernel, CaptureRef, RecordChoices
    from tl_aot.pipeline.plan import Task

    record = str(tmp_path / "rec.json")
    base = KernelSpec.create(name="e", source=KERNELS / "elementwise.py", function="add_one", archs=["80"])

    def task(name: str, seconds: float | None) -> Task:
        item = {"name": "main", "ir": "{}", "options": {}, **({"compile_s": seconds} if seconds is not None else {})}
        ref = CaptureRef(record, name, CapturedKernel.from_item(name, item), RecordChoices(record, (), ()))
        return Task(dataclasses.replace(base, name=name, capture=ref), parse_arch("80"), name, None)

    plain = Task(base, parse_arch("80"), "plain", None)  # an entry of a kernel file: no recorded time
    todo = [task("a", 1.5), task("b", None), plain, task("c", 40.0), task("d", 1.5), task("e", 0.2), task("f", 40.0)]
    order = [t.key for t in scheduler.longest_first(todo)]
    assert order == ["c", "f", "a", "d", "e", "b", "plain"]
    assert [t.key for t in todo] == ["a", "b", "plain", "c", "d", "e", "f"]  # the plan itself is untouched


def test_progress_lines_tell_elapsed_time_and_what_is_left():
    lines = []
    p = Progress(10, lines.append)
    for i in range(4):
        p.step(f"step {i}")
    assert lines[0].startswith("[1/10 ") and lines[0].endswith(" s] step 0")
    assert "s left] step 2" in lines[2] and lines[3].startswith("[4/10 ")


def test_compiler_launcher_from_the_environment(monkeypatch):
    from tl_aot.cuda.toolchain import compiler_launcher

    monkeypatch.delenv("TL_AOT_COMPILER_LAUNCHER", raising=False)
    assert compiler_launcher() == []
    monkeypatch.setenv("TL_AOT_COMPILER_LAUNCHER", "env FOO='a b'")
    assert compiler_launcher() == ["env", "FOO=a b"]
    monkeypatch.setenv("TL_AOT_COMPILER_LAUNCHER", "no-such-cache-tool")
    with pytest.raises(ToolchainNotFound, match="TL_AOT_COMPILER_LAUNCHER='no-such-cache-tool': no-such-cache-tool was not found"):
        compiler_launcher()


@pytest.fixture(scope="module")
def pool():
    pytest.importorskip("tilelang")
    from tl_aot.lower.lower_worker import LoweringPool

    with LoweringPool(2) as p:
        yield p


def test_worker_processes_lower_exactly_as_this_process_does(pool):
    import concurrent.futures as cf

    from tl_aot.common.metadata_json import to_json
    from tl_aot.lower.lower import lower_variant

    specs = [
        KernelSpec.create(name=f"n{n}", source=KERNELS / "specialised.py", function="rms_norm", args={"N": n}, archs=["90a"])
        for n in (1024, 2048, 4096)
    ]
    with cf.ThreadPoolExecutor(3) as ex:  # three variants, two workers: one is reused
        remote = list(ex.map(lambda s: pool.lower(s, s.archs[0]), specs))
    assert len(pool._all) == 2
    for s, r in zip(specs, remote):
        assert to_json(r) == to_json(lower_variant(s, s.archs[0]))
        assert type(r.params[0].name) is str  # plain values: no TileLang or tvm_ffi object crosses


def test_a_worker_reports_the_users_line_and_keeps_working(pool, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import tilelang.language as T\n\n\ndef f(N):\n    raise ValueError('N must be even')\n")
    spec = KernelSpec.create(name="bad", source=bad, function="f", args={"N": 3}, archs=["90a"])
    with pytest.raises(LoweringError, match=r"(?s)entry 'bad' \(sm_90a\).*bad.py:5.*N must be even"):
        pool.lower(spec, spec.archs[0])
    ok = KernelSpec.create(name="ok", source=KERNELS / "specialised.py", function="rms_norm", args={"N": 1024}, archs=["90a"])
    assert pool.lower(ok, ok.archs[0]).entry == "ok"


def test_worker_errors_are_the_errors_lowering_here_raises(pool, tmp_path):
    """An error in a lowering worker reaches the build as the same class, message, entry, arch and location."""
    from tl_aot.common.errors import TlAotError
    from tl_aot.lower.lower import lower_variant

    bad = tmp_path / "bad.py"
    bad.write_text("import tilelang.language as T\n\n\ndef f(N):\n    raise ValueError('N must be even')\n")
    specs = (
        KernelSpec.create(name="nope", source=KERNELS / "elementwise.py", function="no_such_function", archs=["90a"]),
        KernelSpec.create(name="bad", source=bad, function="f", args={"N": 3}, archs=["90a"]),
    )
    for spec in specs:
        with pytest.raises(TlAotError) as here:
            lower_variant(spec, spec.archs[0])
        with pytest.raises(TlAotError) as there:
            pool.lower(spec, spec.archs[0])
        assert (type(there.value), str(there.value)) == (type(here.value), str(here.value))
        assert there.value.fields() == here.value.fields()
        assert (there.value.entry, there.value.arch) == (spec.name, "sm_90a")
    assert there.value.location == f"{bad}:5"  # the user's file:line, as a field


def test_a_captured_entry_reaches_a_lowering_worker_without_its_records_choices(tmp_path):
    """Each variant's message holds its kernel, not the record's call keys and tunings: no larger with a larger record."""
    import dataclasses
    import pickle

    from tl_aot.config.capture_ref import CapturedKernel, CaptureRef, RecordChoices
    from tl_aot.lower.lower_worker import lowering_view

    record = str(tmp_path / "rec.json")
    kernel = CapturedKernel.from_item("k" * 64, {"name": "main", "ir": "# the prim_func", "options": {}})
    base = KernelSpec.create(name="e", source=tmp_path / "rec.json", function="captured", archs=["90a"])

    def spec(calls: int) -> KernelSpec:
        choices = RecordChoices(record, (), tuple((f"{i:064x}", "k" * 64) for i in range(calls)))
        return dataclasses.replace(base, capture=CaptureRef(record, "k" * 64, kernel, choices))

    small, large = (lowering_view(spec(n)) for n in (10, 10_000))
    assert len(pickle.dumps(small)) == len(pickle.dumps(large))
    assert large.capture is not None and large.capture.kernel is kernel and large.capture.key == "k" * 64
    assert large.capture.choices.calls == () and large.capture.choices.record == record
    assert lowering_view(base) is base  # an entry of a kernel file is sent as it is


def test_nvcc_errors_point_at_a_captured_kernels_origin_and_a_kernel_file_is_read_once(tmp_path, monkeypatch):
    """Where an nvcc error points costs no parse of the capture record (megabytes) per variant, nor of a kernel file."""
    import dataclasses

    import tl_aot.pipeline.stages as stages_module
    from tl_aot.config.capture_ref import CapturedKernel, CaptureRef, RecordChoices
    from tl_aot.pipeline.stages import Stages

    parsed: list[str] = []
    real = stages_module.function_line
    monkeypatch.setattr(stages_module, "function_line", lambda path, name: parsed.append(str(path)) or real(path, name))
    stages = Stages(tmp_path, None, "13.0", "0.1", Progress(0, None))  # type: ignore[arg-type]
    spec = KernelSpec.create(name="n", source=KERNELS / "specialised.py", function="rms_norm", args={"N": 1024}, archs=["90a"])
    assert [stages.user_location(spec) for _ in range(3)] == ["tests/kernels/specialised.py:35 (rms_norm)"] * 3
    assert len(parsed) == 1
    origin = {"jit": "ops.scale", "args": {"n": "256"}, "file": "/x/suite.py", "line": 7, "function": "test_scale"}
    kernel = CapturedKernel.from_item("k" * 64, {"name": "main", "origins": [origin]})
    record = tmp_path / "rec.json"  # never read: it need not exist
    captured = KernelSpec.create(name="c", source=record, function="captured", archs=["90a"])
    captured = dataclasses.replace(captured, capture=CaptureRef(str(record), "k" * 64, kernel, RecordChoices(str(record), (), ())))
    assert stages.user_location(captured).endswith("at suite.py:7 (test_scale)")
    assert len(parsed) == 1


def test_the_tail_of_lowering_cuts_what_waits_for_every_slot_not_only_those_free_that_instant(monkeypatch):
    """36 quick variants and 4 slow ones, -j 4: when the first slow one finishes, the 7 waiting go out as 4 batches.

    Cut for the one slot free at that instant they were one batch of 7, whose ptxas ran one after the
    other while the slots the other slow lowerings freed idled (the whole TileOPs build's last minute).
    """
    import contextlib
    import threading
    import time
    import types

    from tl_aot.common.arch import parse_arch
    from tl_aot.pipeline.plan import Task

    spec = KernelSpec.create(name="e", source=KERNELS / "elementwise.py", function="add_one", archs=["90a"])
    tasks = [Task(spec, parse_arch("90a"), f"k{i}", None) for i in range(40)]
    batches: list[list[int]] = []  # each batch's variants (compile jobs start in any order: not by position)

    # The slow ones finish only after every quick one was lowered (then 0.2 s for the scheduler to batch
    # it), whatever the machine's load: a fixed sleep raced a slow quick half on a busy machine.
    quick_left, all_quick = [36], threading.Event()
    counted = threading.Lock()

    def lower(task, _lower_fn):
        if int(task.key[1:]) >= 36:
            assert all_quick.wait(30), "the quick variants were never all lowered"
            time.sleep(0.2)
        else:
            with counted:
                quick_left[0] -= 1
                if not quick_left[0]:
                    all_quick.set()
        return types.SimpleNamespace(nvcc_options=("-O3",), backend="cuda")

    stages = types.SimpleNamespace(
        runtime=lambda: (None, 0.0),
        lower=lower,
        kept=lambda task, variant: None,
        compile_many=lambda pairs: batches.append([int(t.key[1:]) for t, _ in pairs]) or [b"image"] * len(pairs),
        without_failures=lambda run: run.tasks,
        launcher=lambda run, each: None,
    )
    monkeypatch.setattr(scheduler, "lowering_workers", lambda jobs, n: 4)
    monkeypatch.setattr(scheduler, "LoweringPool", lambda n, **_: contextlib.nullcontext(types.SimpleNamespace(lower=None)))
    run = VariantRun("lib", {}, {}, list(tasks), Progress(0, None))
    scheduler.run_variants(tasks, run, stages, jobs=4, keep_going=False, progress=run.progress)
    assert len(run.images) == 40 and sorted(k for b in batches for k in b) == list(range(40))
    full = [b for b in batches if len(b) == 10]
    assert len(full) == 3 and all(k < 36 for b in full for k in b)  # the build's share per slot while lowering runs
    rest = [b for b in batches if len(b) < 10]
    assert max(len(b) for b in rest) <= 2  # the tail: cut for every slot, never one batch of what waited
    left = [b for b in rest if any(k < 36 for k in b)]  # the 6 quick ones waiting when the first slow one finished
    assert sum(k < 36 for b in left for k in b) == 6 and len(left) >= 3
