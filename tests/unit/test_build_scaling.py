"""How a build spreads over the machine: job and worker counts, lowering in worker processes,
compiler launchers and progress lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from tl_aot.common.errors import LoweringError, ToolchainNotFound
from tl_aot.pipeline import scheduler
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


def test_lowering_workers_take_a_share_of_the_slots(monkeypatch):
    monkeypatch.setattr(scheduler, "available_memory_gb", lambda: 128.0)
    assert scheduler.lowering_workers(2, 50) == 1  # one lowering keeps nvcc busy: no worker process
    assert scheduler.lowering_workers(4, 50) == 2
    assert scheduler.lowering_workers(16, 104) == 8
    assert scheduler.lowering_workers(16, 3) == 3  # never more than there is to lower
    monkeypatch.setattr(scheduler, "available_memory_gb", lambda: 4.0)
    assert scheduler.lowering_workers(16, 104) == 2  # nor than memory holds


def test_a_batch_is_the_builds_share_per_compile_slot():
    assert scheduler.batch_size(2, 1, 10) == 10  # -j 2 lowers here: one compile slot, one batch of all
    assert scheduler.batch_size(1, 1, 10) == 10  # -j 1: lower everything, then one nvcc front end
    assert scheduler.batch_size(16, 8, 104) == 13  # eight compile slots, each a batch of 13
    assert scheduler.batch_size(4, 2, 2) == 1  # as many slots as variants: each alone
    assert scheduler.batch_size(2, 1, 500) == scheduler.MAX_BATCH


def test_progress_lines_tell_elapsed_time_and_what_is_left():
    lines = []
    p = scheduler.Progress(10, lines.append)
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

    from tl_aot.common.metadata import to_json
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
