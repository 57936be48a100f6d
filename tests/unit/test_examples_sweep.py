"""CPU checks of ``bench/examples_sweep.py`` (TileLang's examples through capture and build) and its CUDA shim."""

import json
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.examples_sweep import (  # noqa: E402
    SAMPLE,
    SAMPLE_MORE,
    Outcome,
    main,
    select,
    served_counts,
    served_lookups,
    table,
    tilelang_cache_entries,
    traced_why,
)


def test_the_table_says_per_example_what_was_captured_built_and_left_out_and_why():
    outcomes = [
        Outcome("gemm/example_gemm.py", 1, built={"sm_90a": 1, "sm_80": 1}),
        Outcome("gemm_splitk/example_tilelang_gemm_splitk.py", 1, shim=True, built={"sm_90a": 1, "sm_80": 1}),
        Outcome("deepseek_mla/example_mla_decode.py", 1, built={"sm_90a": 1}, left_out=("flashattn_d9 (sm_80): 231424 bytes | of smem",)),
        Outcome("rand/rand_uint.py", 0, script_error="AttributeError: module 'tilelang.language' has no attribute 'rng_init'"),
    ]
    lines = table(outcomes, ["90a", "80"]).splitlines()
    assert lines[0] == "| example | captured | built sm_90a | built sm_80 | left out / why |"
    assert lines[3] == "| `gemm_splitk/example_tilelang_gemm_splitk.py` | 1 (shim) | 1 | 1 |  |"
    assert lines[4] == "| `deepseek_mla/example_mla_decode.py` | 1 | 1 | 0 | flashattn_d9 (sm_80): 231424 bytes \\| of smem |"
    assert "no attribute 'rng_init'" in lines[5] and lines[5].startswith("| `rand/rand_uint.py` | 0 | 0 | 0 |")


def test_the_sample_spans_the_example_families_the_sweep_promises():
    families = {path.split("/")[0] for path in SAMPLE}
    assert len(SAMPLE) >= 30 and len(families) >= 25
    assert {"gemm", "flash_attention", "deepseek_mla", "convolution", "dynamic_shape", "gdn"} <= families


def test_set_more_picks_the_other_examples_and_all_both_each_once_in_order():
    assert select("sample") == list(SAMPLE)
    assert select("more") == list(SAMPLE_MORE) and not set(SAMPLE) & set(SAMPLE_MORE)
    assert select("all") == [*SAMPLE, *SAMPLE_MORE] and len(set(select("all"))) == len(SAMPLE) + len(SAMPLE_MORE)
    assert select("more", ["kda/", "quickstart"]) == ["quickstart.py", *[e for e in SAMPLE_MORE if e.startswith("kda/")]]
    # Kernel scripts beyond the example_*.py names are in; AMD, Triton-only and test/benchmark wrappers are not.
    assert {"deepseek_v32/sparse_mla_fwd.py", "gdn/example_chunk_delta_bwd.py", "iket/minimal.py"} <= set(SAMPLE_MORE)
    names = [e.rsplit("/", 1)[-1] for e in SAMPLE_MORE]
    assert not [e for e in SAMPLE_MORE if e.startswith("amd/") or "triton" in e or "_amd" in e]
    assert not [n for n in names if n.startswith(("test_", "regression_", "benchmark_"))]


def test_set_is_a_closed_choice_and_narrows_before_only(capsys, tmp_path):
    with pytest.raises(SystemExit):
        main(["--examples", str(tmp_path), "--arch", "90a", "--set", "some"])
    assert "invalid choice: 'some'" in capsys.readouterr().err
    assert select("sample", ["kda/"]) == []


def test_the_shim_runs_a_script_whose_cuda_tensors_land_on_the_cpu(tmp_path):
    script = tmp_path / "uses_cuda.py"
    script.write_text(
        "import sys, torch\n"
        "torch.cuda.manual_seed(0)\n"
        "a = torch.randn(4, 8, device='cuda')\n"
        "b = torch.zeros(4, device=torch.device('cuda', 0)).cuda().to('cuda')\n"
        "torch.cuda.init()\n"
        "torch.cuda.synchronize()\n"
        "g = torch.Generator(device='cuda').manual_seed(42)\n"
        "p = torch.randperm(8, generator=g, device='cuda')\n"
        "@torch.compile  # as flash_attention/example_gqa_bwd.py decorates its autograd Function: dynamo's rules load\n"
        "def twice(x):\n"
        "    return 2 * x\n"
        "print(a.device, b.device, p.device, sys.argv[1:])\n"
    )
    cmd = [sys.executable, str(ROOT / "bench" / "examples_cuda_shim.py"), script.name, "--flag"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "cpu cpu cpu ['--flag']"


def test_the_refusal_check_tells_a_kernel_tilelang_refuses_from_one_it_lowers(tmp_path):
    pytest.importorskip("tilelang")
    sys.path.insert(0, str(ROOT / "tests" / "kernels"))
    from tma_only import tma_rows

    from bench.examples_refusal import verdict
    from tl_aot.jit.ir_record import save_ir

    kernels = {"0a1b2c3d4e" + "0" * 22: tma_rows()}
    record = tmp_path / "rec.json"
    record.write_text(json.dumps({"kernels": {k: {"ir": save_ir(f), "options": {"pass_configs": {}}} for k, f in kernels.items()}}))
    refused = verdict(str(record), "tma_rows_0a1b2c3d4e", "sm_80")
    assert refused["tilelang"] == "refuses" and "tma_copy" in refused["error"], refused
    assert verdict(str(record), "tma_rows_0a1b2c3d4e", "sm_90a") == {"tilelang": "lowers"}


def _served(example, **fields):
    return Outcome(example, 2, built={"sm_90a": 2}, gpu=True, **fields)


def test_the_served_table_says_exit_and_compiles_seen_and_why_not_per_example():
    outcomes = [
        _served(
            "gemm/example_gemm.py", served="pass", served_kernels=2, served_misses=0, tilelang_compiles=0, call_lookups=2, traced_lookups=0
        ),
        _served(
            "flash_attention/example_mha_bwd_bshd.py",
            served="exit 1",
            served_error="tl_aot.serving.server.KernelNotServed: kernel 'main' is not in the library",
            served_kernels=1,
            served_misses=1,
            tilelang_compiles=0,
            call_lookups=1,
            traced_lookups=1,
            script_error="",
        ),
        _served("topk/example_topk.py", served="pass", served_misses=None, tilelang_compiles=1),
        Outcome("gdn/example_chunk_o.py", gpu=True, script_error="ModuleNotFoundError: No module named 'fla'"),
        _served("convolution/example_convolution.py", unfinished="not finished: the run's budget was spent after 451 s (during its build)"),
        Outcome("norm/rms_norm.py", gpu=True, unfinished="not started: the run's budget was spent after 451 s"),
    ]
    lines = table(outcomes, ["90a"], served=True).splitlines()
    assert (
        lines[0]
        == "| example | captured | built sm_90a | served run | compiles while served | lookups: by call key / traced | left out / why |"
    )
    assert lines[2] == "| `gemm/example_gemm.py` | 2 | 2 | pass | 0 | 2 / 0 |  |"
    assert lines[3] == (
        "| `flash_attention/example_mha_bwd_bshd.py` | 2 | 2 | exit 1 | 1 not served, 0 compiled by TileLang | 1 / 1 "
        "| served run: tl_aot.serving.server.KernelNotServed: kernel 'main' is not in the library |"
    )
    assert lines[4] == "| `topk/example_topk.py` | 2 | 2 | pass | no report, 1 compiled by TileLang |  |  |"  # a compile seen is never 0
    assert lines[5] == "| `gdn/example_chunk_o.py` | 0 | 0 |  |  |  | capture run: ModuleNotFoundError: No module named 'fla' |"
    assert lines[6].endswith("|  |  |  | not finished: the run's budget was spent after 451 s (during its build) |")
    assert lines[7] == "| `norm/rms_norm.py` | 0 | 0 |  |  |  | not started: the run's budget was spent after 451 s |"


def test_a_capture_run_that_failed_on_the_gpu_is_a_reason_even_with_kernels_recorded_but_not_on_the_cpu():
    cpu = Outcome("gemm/example_gemm.py", 1, built={"sm_90a": 1}, script_error="RuntimeError: no CUDA GPUs are available")
    gpu = Outcome("gemm/example_gemm.py", 1, built={"sm_90a": 1}, gpu=True, script_error="AssertionError: Tensor-likes are not close!")
    assert table([cpu], ["90a"]).splitlines()[2].endswith("| 1 |  |")  # a CPU capture dies at its first launch, as expected
    assert table([gpu], ["90a"]).splitlines()[2].endswith("| capture run: AssertionError: Tensor-likes are not close! |")


def test_the_served_counts_are_summed_over_every_served_process_and_none_without_a_report():
    report = (
        "tl_aot serve (pid {pid}): {s} served, {c} compiled by the JIT, {r} refused; tunings 1 served, {t} run by TileLang, "
        "{tr} refused; 3 lookups in 0.4 ms (...)"
    )
    lines = [report.format(pid=11, s=3, c=0, r=0, t=0, tr=0), report.format(pid=12, s=1, c=1, r=2, t=1, tr=1)]
    stderr = "\n".join(["All checks pass.", *lines])
    assert served_counts(stderr) == (4, 5)  # a tuning TileLang ran (or was refused) is compiles the library did not spare
    assert served_counts(lines[0]) == (3, 0)
    assert served_counts("Traceback (most recent call last):\nKilled") is None


def test_the_served_lookups_are_counted_by_path_over_every_served_process():
    """By call key or by a traced prim_func, as each served process's exit line says (its CPU figures or not)."""
    line = (
        "tl_aot serve (pid {pid}): 4 served, 0 compiled by the JIT, 0 refused; tunings 0 served, 0 run by TileLang, 0 refused; "
        "{n} lookups in 16.1 ms{cpu} ({a} in 1.0 ms, 0.258 ms each by call key, {b} in 15.1 ms, 5.033 ms each by a traced "
        "prim_func; kernel sources read from disk: 0 files in 0.0 ms of them; entries' first use 1.4 ms and the GPU's first "
        "question 0.1 ms apart; 4 kernels served before TileLang traced them)"
    )
    cpu = ", 0.9 ms of CPU, 0 passes of the cyclic collector within (0 full)"
    stderr = "\n".join(["ok", line.format(pid=1, n=4, cpu="", a=1, b=3), line.format(pid=2, n=7, cpu=cpu, a=7, b=0)])
    assert served_lookups(stderr) == (8, 3)
    assert served_lookups("tl_aot serve: no libraries") is None


def test_the_functions_served_after_a_trace_are_read_once_each_and_shown_with_the_lookups():
    """The lines each served process prints below its exit line, one per function: read once each, in the table's cell."""
    block = [
        "tl_aot serve: 2 function(s) served only after TileLang traced their prim_func (...); why no call key answered each:",
        "  main: compiled by tilelang.compile",
        "  ex.matmul: Tensor value",
    ]
    stderr = "\n".join(["ok", *block, "Traceback (most recent call last):", *block[:2], "  ... and 3 more", "  main: not read"])
    assert traced_why(stderr) == ("main: compiled by tilelang.compile", "ex.matmul: Tensor value")
    assert traced_why("tl_aot serve (pid 1): 1 served, ...") == ()
    o = _served("x.py", served="pass", served_misses=0, tilelang_compiles=0, call_lookups=4, traced_lookups=1, traced_why=("main: why",))
    assert table([o], ["90a"], served=True).splitlines()[2] == "| `x.py` | 2 | 2 | pass | 0 | 4 / 1 (traced: main: why) |  |"


def test_the_tilelang_cache_count_is_its_kernel_entries(tmp_path):
    assert tilelang_cache_entries(tmp_path / "never-written") == 0
    kernels = tmp_path / "cache" / "0.1.15-abc" / "kernels"
    for name in ("4f2a", "9c1e", ".staging"):
        (kernels / name).mkdir(parents=True)
    (kernels / "4f2a" / "kernel_lib.so").write_bytes(b"")
    (kernels / "notes.txt").write_text("")
    assert tilelang_cache_entries(tmp_path / "cache") == 2


def test_serve_is_refused_without_the_gpu_capture_and_arch_is_needed_off_the_gpu(capsys):
    with pytest.raises(SystemExit):
        main(["--examples", "x", "--arch", "90a", "--serve"])
    assert "--serve runs each example on this machine's GPU, captured there: give --device gpu too" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--examples", "x"])
    assert "--arch is required (it defaults to the GPU's own only with --device gpu)" in capsys.readouterr().err


class _Refusals:
    """A RunControl stand-in answering examples_refusal.py as TileLang would: it refuses sm_80, lowers sm_90a."""

    def __init__(self):
        self.asked = []

    def run(self, cmd, cwd, timeout, *, env=None):
        record, entry, arch = cmd[-3:]
        self.asked.append((Path(record).name, entry, arch))
        out = {"tilelang": "refuses", "error": "x"} if arch == "sm_80" else {"tilelang": "lowers"}
        return subprocess.CompletedProcess(cmd, 0, stdout=json.dumps(out) + "\n", stderr="")


def test_a_build_that_made_nothing_gets_tilelangs_verdict_on_every_kernel_and_arch_of_its_record(tmp_path):
    from bench.examples_sweep import Sweep, _record_verdict

    record = tmp_path / "rec.json"
    record.write_text(json.dumps({"kernels": {"3bcc0a6042" + "0" * 22: {"name": "main"}, "7f00aa11bb" + "1" * 22: {"name": "fwd"}}}))
    sweep = Sweep(tmp_path, tmp_path, ("90a", "sm_80"), "H100-SXM", 60.0, True, False, 1)
    control = _Refusals()
    assert _record_verdict(record, sweep, control) == "sm_80: TileLang refuses too; sm_90a: TileLang lowers it"
    assert sorted(control.asked) == [
        ("rec.json", "fwd_7f00aa11bb", "sm_80"),
        ("rec.json", "fwd_7f00aa11bb", "sm_90a"),
        ("rec.json", "main_3bcc0a6042", "sm_80"),
        ("rec.json", "main_3bcc0a6042", "sm_90a"),
    ]


def test_resume_takes_finished_outcomes_from_the_work_folder_never_an_unfinished_one(tmp_path):
    from bench.examples_sweep import Sweep, _reusable, finished_outcome

    examples, work = tmp_path / "examples", tmp_path / "work"
    (examples / "kda").mkdir(parents=True)
    work.mkdir()
    for rel in ("quickstart.py", "kda/chunk_o.py"):
        (examples / rel).write_text("raise SystemExit('never run: its outcome is taken from WORK')\n")
    done = Outcome("quickstart.py", 1, built={"sm_90a": 1}, seconds=16.7)
    (work / "quickstart.outcome.json").write_text(json.dumps(asdict(done)))
    cut = Outcome("kda/chunk_o.py", 1, unfinished="not finished: budget spent (during its build)")
    (work / "kda__chunk_o.outcome.json").write_text(json.dumps(asdict(cut)))
    (work / "broken.outcome.json").write_text("{")

    assert finished_outcome(work / "quickstart.outcome.json") == done
    assert finished_outcome(work / "kda__chunk_o.outcome.json") is None  # stopped by its budget: run again
    assert finished_outcome(work / "broken.outcome.json") is None and finished_outcome(work / "absent.json") is None
    gpu_served = Sweep(examples, work, ("sm_90a",), "gpu", 60.0, False, True, 1, True)
    assert not _reusable(done, gpu_served)  # captured on the CPU: a GPU sweep captures it again
    assert not _reusable(replace(done, gpu=True), gpu_served)  # built, never served: served now
    assert _reusable(replace(done, gpu=True, served="pass"), gpu_served)
    cmd = [sys.executable, "bench/examples_sweep.py", "--examples", str(tmp_path), "--arch", "90a", "--set", "more"]
    cmd += ["--only", "quickstart", "--resume", "--out", str(work)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "| `quickstart.py` | 1 | 1 |  |" in (work / "table.md").read_text()
    assert "1 examples in 0 s with -j 1; 0 not finished" in proc.stderr


def test_a_build_that_linked_nothing_is_reported_with_the_reason_listed_under_it():
    from bench.examples_sweep import _build_failure

    stderr = (
        "[1/4 0.0 s] lower main_25811d03b6 sm_90a\n"
        "tl_aot: error: library 'captured': every variant failed; nothing to link:\n"
        "  main_25811d03b6 sm_90a: entry 'main_25811d03b6' (sm_90a): tensor dtype custom[x] is not supported\n"
    )
    assert _build_failure(stderr) == (
        "tl_aot: error: library 'captured': every variant failed; nothing to link: "
        "main_25811d03b6 sm_90a: entry 'main_25811d03b6' (sm_90a): tensor dtype custom[x] is not supported"
    )
    assert _build_failure("InternalError: Check failed: x\n") == "InternalError: Check failed: x"
