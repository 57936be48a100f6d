"""Capture records merge by key; the import hook runs when a module is imported."""

import sys
import types

import pytest

from tl_aot.capture.record import CaptureRecord
from tl_aot.common.errors import SpecError
from tl_aot.jit.import_hooks import on_import


def test_records_merge_by_key_keeping_every_device_and_origin(tmp_path):
    rec = CaptureRecord.load(tmp_path / "r.json", missing_ok=True)
    a = {"k1": {"ir": "{}", "devices": [{"arch": "sm_90a"}], "origins": [{"file": "x.py"}]}}
    assert rec.merge(a) == 1
    assert rec.merge({"k1": {"ir": "{}", "devices": [{"arch": "sm_80"}], "origins": [{"file": "x.py"}]}}) == 0
    assert rec.merge({"k2": {"ir": "{}", "devices": [], "origins": []}}) == 1
    rec.save()
    again = CaptureRecord.load(tmp_path / "r.json")
    assert sorted(again.kernels) == ["k1", "k2"]
    assert again.kernels["k1"]["devices"] == [{"arch": "sm_90a"}, {"arch": "sm_80"}]
    assert again.kernels["k1"]["origins"] == [{"file": "x.py"}]


@pytest.mark.parametrize("text", ["not json", "[]", '{"schema": 99, "kernels": {}}'])
def test_a_file_that_is_not_a_record_is_refused_by_name(tmp_path, text):
    (tmp_path / "bad.json").write_text(text)
    with pytest.raises(SpecError, match="bad.json"):
        CaptureRecord.load(tmp_path / "bad.json")


def test_on_import_runs_now_or_when_the_module_is_imported(tmp_path, monkeypatch):
    seen = []
    on_import("json", lambda m: seen.append(m.__name__))
    assert seen == ["json"]
    (tmp_path / "tl_aot_hook_probe.py").write_text("VALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    on_import("tl_aot_hook_probe", lambda m: seen.append(m.VALUE))
    assert seen == ["json"]
    __import__("tl_aot_hook_probe")
    assert seen == ["json", 7]
    sys.modules.pop("tl_aot_hook_probe", None)
    assert isinstance(sys.modules["json"], types.ModuleType)


def test_flags_name_headers_by_content_wherever_the_package_lives(tmp_path):
    from tl_aot.config.options import portable_flags

    for root in (tmp_path / "a", tmp_path / "b"):
        (root / "inc" / "sub").mkdir(parents=True)
        (root / "inc" / "h.h").write_text("#define X 1\n")
        (root / "inc" / "sub" / "g.cuh").write_text("#define Y 1\n")
    a, b = tmp_path / "a", tmp_path / "b"

    def spelled(root):
        return portable_flags(["-include", f"{root}/inc/h.h", f"-I{root}/inc", "--include-path=" + str(root / "inc"), "-O3"])

    assert spelled(a) == spelled(b)
    assert spelled(a)[0] == "-include" and spelled(a)[1].startswith("h.h#") and spelled(a)[-1] == "-O3"
    assert spelled(a)[2].startswith("-Iinc/#") and spelled(a)[3].startswith("--include-path=inc/#")
    (b / "inc" / "sub" / "g.cuh").write_text("#define Y 2\n")  # a header under the -I folder changed
    assert spelled(a)[2] != spelled(b)[2] and spelled(a)[1] == spelled(b)[1]
    assert portable_flags(["-include", f"{a}/missing.h"]) == ["-include", "missing.h#missing"]


def test_device_code_merges_per_arch_and_is_never_a_kernel_of_its_own(tmp_path):
    rec = CaptureRecord.load(tmp_path / "r.json", missing_ok=True)
    rec.merge({"k1": {"ir": "{}", "devices": [], "origins": [], "device_code": {"sm_90a": {"sha256": "a"}}}})
    rec.merge({"k1": {"devices": [], "origins": [], "device_code": {"sm_90a": {"sha256": "b"}, "sm_80": {"sha256": "c"}}}})
    assert rec.merge({"k2": {"devices": [], "origins": [], "device_code": {"sm_80": {"sha256": "d"}}}}) == 0
    assert rec.kernels["k1"]["device_code"] == {"sm_90a": {"sha256": "a"}, "sm_80": {"sha256": "c"}}  # the first kept
    assert sorted(rec.kernels) == ["k1"]


def _elementwise(n, *, double: bool):
    """B = A * 2 (or A + 1) over ``n`` floats: a TileLang kernel as its users write one."""
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(n):
                B[i] = A[i] * 2 if double else A[i] + 1

    return main


def test_a_kernel_that_does_not_round_trip_is_marked_warned_once_and_refused_by_the_build(tmp_path, monkeypatch, capsys):
    pytest.importorskip("tilelang")

    from tl_aot.capture import record_specs as captured
    from tl_aot.capture import recorder as capture
    from tl_aot.common.errors import LoweringError
    from tl_aot.jit.seam import CompileRequest

    monkeypatch.setattr(capture, "round_trip_problem", lambda func, text: "a layout changed across the round trip: X came back as Y")
    cap = capture.Capturer(tmp_path / "r.json", compile_for_real=False)
    keys = [cap.record(CompileRequest.of(_elementwise(n, double=True), [-1])) for n in (128, 256, 128)]
    assert keys[0] == keys[2] != keys[1]
    err = capsys.readouterr().err
    assert err.count("warning: kernel 'main' is recorded but does not rebuild") == 1 and "X came back as Y" in err
    cap.flush()
    item = CaptureRecord.load(tmp_path / "r.json").kernels[keys[0]]
    assert item["unfaithful"] == "a layout changed across the round trip: X came back as Y"
    [spec] = captured.specs_from_record(tmp_path / "r.json", ["90a"], only={keys[0]})
    assert spec.capture.kernel.proof("sm_90a") == ("", "a layout changed across the round trip: X came back as Y")
    with pytest.raises(LoweringError, match="the capture found that the record does not rebuild.*X came back as Y"):
        captured.resolve_captured(spec, "entry 'main' (sm_90a)")


def test_a_kernel_compiled_under_a_cuda_source_post_processor_is_marked_and_refused_by_the_build(tmp_path, capsys):
    """As IKET's ``iket.session()`` compiles (``examples/iket``): the JIT's code is the callback's, which no build reruns."""
    pytest.importorskip("tilelang")
    import tvm_ffi
    from tilelang.engine.callback import register_cuda_postproc

    from tl_aot.capture import record_specs as captured
    from tl_aot.capture import recorder as capture
    from tl_aot.common.errors import LoweringError
    from tl_aot.jit.seam import CompileRequest

    cap = capture.Capturer(tmp_path / "r.json", compile_for_real=False)
    plain = cap.record(CompileRequest.of(_elementwise(64, double=False), [-1]))
    register_cuda_postproc(lambda code, target: "// instrumented\n" + code)
    try:
        hooked = cap.record(CompileRequest.of(_elementwise(128, double=False), [-1]))
    finally:
        tvm_ffi.remove_global_func("tilelang_callback_cuda_postproc")
    err = capsys.readouterr().err
    assert "warning: kernel 'main' is recorded but does not rebuild" in err and "tilelang_callback_cuda_postproc" in err
    cap.flush()
    kernels = CaptureRecord.load(tmp_path / "r.json").kernels
    assert "unfaithful" not in kernels[plain]
    assert "IKET session" in kernels[hooked]["unfaithful"]
    [spec] = captured.specs_from_record(tmp_path / "r.json", ["90a"], only={hooked})
    with pytest.raises(LoweringError, match="does not rebuild into what the JIT compiled: TileLang's CUDA source post-processor"):
        captured.resolve_captured(spec, "entry 'main' (sm_90a)")


def test_a_capture_records_how_long_the_jit_took_to_compile_each_kernel(tmp_path, monkeypatch):
    """The time around TileLang's own compile lands in the kernel's item; what the build reads as its lowering order."""
    pytest.importorskip("tilelang")
    import time

    import tilelang.language as T

    from tl_aot.capture import record_specs as captured
    from tl_aot.capture import recorder as capture
    from tl_aot.jit.seam import CompileRequest

    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                B[i] = A[i] * 2

    monkeypatch.setattr(capture, "round_trip_problem", lambda func, text: "")
    cap = capture.Capturer(tmp_path / "r.json")
    compiled = object()

    def compile_slowly():
        time.sleep(0.05)
        return compiled

    assert cap._on_request(CompileRequest.of(main, [-1]), None, compile_slowly) is compiled
    cap.flush()
    [(key, item)] = CaptureRecord.load(tmp_path / "r.json").kernels.items()
    assert 0.05 <= item["compile_s"] < 5 and item["compile_s"] == round(item["compile_s"], 3)
    [spec] = captured.specs_from_record(tmp_path / "r.json", ["90a"])
    assert spec.capture.kernel.compile_s == item["compile_s"]


def test_merging_keeps_the_longest_compile_in_any_order_and_an_older_record_loads_without_one(tmp_path):
    def merged(*times):
        rec = CaptureRecord(tmp_path / "r.json", {})
        rec.merge({"k": {"ir": "{}", "devices": [], "origins": []}})
        for t in times:
            rec.merge({"k": {"devices": [], "origins": [], "compile_s": t}})
        return rec.kernels["k"]["compile_s"]

    assert merged(2.5, 41.0, 0.3) == merged(0.3, 41.0, 2.5) == 41.0  # parts merge in whichever order processes wrote them
    (tmp_path / "old.json").write_text('{"schema": 1, "kernels": {"k": {"ir": "{}", "name": "main", "options": {}}}}')
    assert CaptureRecord.load(tmp_path / "old.json").kernel("k").compile_s is None
    assert CaptureRecord(tmp_path / "x.json", {"k": {"ir": "{}", "compile_s": "soon"}}).kernel("k").compile_s is None


def test_the_first_error_line_is_the_underlying_exception():
    from tl_aot.pipeline.library import first_error_line

    msg = "entry 'g' (sm_90a): TileLang failed to lower captured\n  at run.py:3\n  ValueError: Invalid layout for shared buffer a\n  more"
    assert first_error_line(msg) == "ValueError: Invalid layout for shared buffer a"
    assert first_error_line("entry 'g' (sm_90a): the device code differs") == "entry 'g' (sm_90a): the device code differs"


def test_a_digest_mismatch_names_the_jit_target_beside_the_build_target():
    from tl_aot.capture.device_code import check_against_record, digest
    from tl_aot.common.errors import LoweringError

    jit = "cuda -keys=cuda,gpu -arch=sm_90a -max_num_threads=1024 -l2_cache_size_bytes=52428800"
    item = {"device_code": {"sm_90a": {"sha256": "0" * 24, "tilelang": "0.1.15", "from": "JIT", "target": jit}}}
    with pytest.raises(LoweringError) as e:
        check_against_record(item, "sm_90a", "kernel text", "entry 'k'", tilelang_version="0.1.15", target="cuda -arch=sm_90a")
    assert f"digest {digest('kernel text')} built, {'0' * 24} captured" in str(e.value)
    assert f"the JIT's target was {jit}, the build's cuda -arch=sm_90a" in str(e.value)
    same = {"device_code": {"sm_90a": {**item["device_code"]["sm_90a"], "sha256": digest("kernel text")}}}
    assert check_against_record(same, "sm_90a", "kernel text", "entry 'k'", tilelang_version="0.1.15", target="x").sha256 == digest(
        "kernel text"
    )


def test_a_build_from_a_record_answers_device_queries_as_the_gpu_that_captured(tmp_path):
    from tl_aot.capture import record_specs as captured
    from tl_aot.config.capture_ref import CapturedKernel
    from tl_aot.gpu.device import profile_reported_as

    h200 = {"ir": "{}", "devices": [{"arch": "sm_90a", "name": "NVIDIA H200"}], "origins": [], "options": {}}
    pcie = {**h200, "devices": [{"arch": "sm_90a", "name": "NVIDIA H100 PCIe"}]}
    both = {**h200, "devices": [*h200["devices"], *pcie["devices"]]}
    unknown = {**h200, "devices": [{"arch": "sm_90a", "name": "NVIDIA GH200 480GB"}]}
    names = [CapturedKernel.from_item("k", i).device_names for i in (h200, pcie, both, unknown)]
    assert [profile_reported_as(n, ["90a"]) for n in names] == ["H200", "H100-PCIe", "", ""]
    CaptureRecord(tmp_path / "r.json", {"k1": h200, "k2": pcie, "k3": unknown}).save()
    specs = {s.capture.key: s for s in captured.specs_from_record(tmp_path / "r.json", ["90a"])}
    assert (specs["k1"].device, specs["k2"].device, specs["k3"].device) == ("H200", "H100-PCIe", "")
    chosen = captured.specs_from_record(tmp_path / "r.json", ["90a"], device="H100-SXM")
    assert {s.device for s in chosen} == {"H100-SXM"}
    from tl_aot.pipeline.manifest import entry_head

    # the manifest says which GPUs each kernel was captured on, whatever profile it is built as: a miss on another names them
    assert [entry_head(specs[k]).captured_on for k in ("k1", "k3")] == [("NVIDIA H200",), ("NVIDIA GH200 480GB",)]
    assert {entry_head(s).captured_on for s in chosen} == {("NVIDIA H200",), ("NVIDIA H100 PCIe",), ("NVIDIA GH200 480GB",)}


def test_the_recorded_device_answers_only_for_archs_it_fits():
    """A kernel captured on an H100 and built for sm_80 is lowered as sm_80's default GPU, not refused."""
    from tl_aot.gpu.device import profile_reported_as

    h100 = ["NVIDIA H100 80GB HBM3"]
    assert profile_reported_as(h100, ["90a"]) == "H100-SXM"
    assert profile_reported_as(h100, ["80", "90a"]) == "H100-SXM"
    assert profile_reported_as(h100, ["80"]) == ""
    assert profile_reported_as(h100, None) == "H100-SXM"  # archs resolved later: the spec checks them
    assert profile_reported_as([], ["90a"]) == ""


def test_a_spec_files_capture_records_are_expanded_by_the_build_layer_with_the_archs_chosen(tmp_path, monkeypatch):
    """``[library] capture``: the spec layer keeps the record (never reads it); captured.with_captures makes its entries."""
    from tl_aot.capture.record_specs import with_captures
    from tl_aot.spec import load_spec_file

    monkeypatch.delenv("TL_AOT_ARCHS", raising=False)
    item = {"ir": "{}", "devices": [{"arch": "sm_90a", "name": "NVIDIA H200"}], "origins": [], "options": {}}
    CaptureRecord(tmp_path / "r.json", {"k1": item}).save()
    (tmp_path / "lib.toml").write_text('[library]\nname = "ops"\narchs = ["80"]\ncapture = ["r.json"]\n')
    lib = load_spec_file(tmp_path / "lib.toml")
    assert lib.entries == () and [(c.record, [str(a) for a in c.archs]) for c in lib.captures] == [(tmp_path / "r.json", ["sm_80"])]
    (spec,) = with_captures(load_spec_file(tmp_path / "lib.toml", archs=["90a"])).entries
    assert spec.capture.key == "k1" and [str(a) for a in spec.archs] == ["sm_90a"] and spec.device == "H200"
    assert with_captures(with_captures(lib)) == with_captures(lib)  # expanded once
    (tmp_path / "bare.toml").write_text('[library]\ncapture = ["r.json"]\n')
    with pytest.raises(SpecError, match="capture needs archs"):
        load_spec_file(tmp_path / "bare.toml")


def test_a_record_is_read_once_per_build_and_travels_with_its_entries(tmp_path, monkeypatch):
    """Keys, manifest choices, origins and cluster tasks of captured entries come from the record read with them.

    The record is removed once its entries are made: nothing after reads it (it used to be parsed
    again per variant lowered, per variant sent to a cluster, and per manifest made).
    """
    import pickle

    from tl_aot.capture import record_specs as captured
    from tl_aot.common.arch import parse_arch
    from tl_aot.common.metadata import Call
    from tl_aot.config.user_code import snapshot_files
    from tl_aot.pipeline.cache import variant_key
    from tl_aot.pipeline.plan import Task
    from tl_aot.pipeline.toolset import local_toolset
    from tl_aot.pipeline.variant_task import pack_task

    origin = {"jit": "pkg.ops.double", "args": {"N": 1024}, "file": "run.py", "line": 3, "function": "main"}
    code = {"sm_90a": {"sha256": "a" * 24, "tilelang": "0.1.15", "from": "JIT"}}
    k1 = {"ir": "{}", "name": "main", "origins": [origin], "calls": ["c1", "c2"], "device_code": code, "options": {"backend": "cuda"}}
    k2 = {"ir": "{}", "name": "main", "origins": [], "calls": ["c2"], "options": {"compile_flags": ["-O3"]}}
    rec = CaptureRecord(tmp_path / "r.json", {"k1": k1, "k2": k2})
    rec.merge({}, {"t1": {"function": "pkg.ops.double", "config": "{}", "index": 1, "request_key": "k1"}})
    rec.save()
    reads = []
    real_load = CaptureRecord.load.__func__
    monkeypatch.setattr(CaptureRecord, "load", classmethod(lambda cls, *a, **k: reads.append(a) or real_load(cls, *a, **k)))
    specs = captured.specs_from_record(tmp_path / "r.json", ["90a"])
    (tmp_path / "r.json").unlink()

    assert [s.name for s in specs] == ["double_k1", "main_k2"] and [s.capture.key for s in specs] == ["k1", "k2"]
    ref = specs[0].capture
    assert (ref.jit, ref.args, ref.kernel.proof("sm_90a"), ref.kernel.proof("sm_80")) == (
        "pkg.ops.double",
        (("N", "1024"),),
        ("a" * 24, ""),
        ("", ""),
    )
    arch = parse_arch("90a")
    sources = snapshot_files([])  # a captured kernel's sources: none, the record is its source
    key = variant_key(specs[0], arch, sources, specs[0].spelled_values(), nvcc_version="13.0")
    copy = pickle.loads(pickle.dumps(specs[0]))
    assert key == variant_key(copy, arch, sources, copy.spelled_values(), nvcc_version="13.0")  # a worker's copy keys the same
    choices = captured.choices_of(specs)
    assert [t.key for t in captured.recorded_tunings(choices, {"k1"})] == ["t1"]
    assert captured.recorded_calls(choices, {"k1", "k2"}) == (Call("c1", "k1"),)  # c2 led to two kernels: shipped for neither
    assert captured.origin_of_spec(specs[0]) == "pkg.ops.double(N=1024) at run.py:3 (main)"
    task = pack_task(Task(specs[1], arch, key, sources), local_toolset(nvcc=False))
    assert task.sources.files == () and task.spec.capture.kernel.compile_flags == ("-O3",)  # no record shipped: the spec holds it
    assert len(reads) == 1


def test_a_kernel_two_records_hold_is_one_entry_captured_on_both_gpus_shipping_both_records_calls(tmp_path, monkeypatch):
    """A suite captured on an H100, then on an H200 (``capture --serve``): the second record is not dropped for holding nothing new."""
    from tl_aot.capture import record_specs as captured
    from tl_aot.common.arch import parse_arch
    from tl_aot.common.metadata import Call
    from tl_aot.config.kernel_spec import CaptureSource, LibrarySpec
    from tl_aot.pipeline.manifest import entry_head
    from tl_aot.spec import load_spec_file

    monkeypatch.delenv("TL_AOT_ARCHS", raising=False)
    item = {"ir": "{}", "name": "main", "origins": [], "options": {}}
    h100 = {**item, "devices": [{"arch": "sm_90a", "name": "NVIDIA H100 80GB HBM3"}], "calls": ["c1"]}
    h200 = {**item, "devices": [{"arch": "sm_90a", "name": "NVIDIA H200"}], "calls": ["c2"]}
    h200["device_code"] = {"sm_80": {"sha256": "b" * 24, "tilelang": "0.1.15", "from": "JIT"}}
    CaptureRecord(tmp_path / "a.json", {"k1": h100}).save()
    CaptureRecord(tmp_path / "b.json", {"k1": h200, "k2": {**h200, "calls": ["c3"]}}).save()
    for order in (("a", "b"), ("b", "a")):
        specs = captured.specs_from_records(captured.specs_from_record(tmp_path / f"{r}.json", ["90a"]) for r in order)
        assert [s.capture.key for s in specs] == ["k1", "k2"]  # the first record's kernels, then the new ones
        assert entry_head(specs[0]).captured_on == ("NVIDIA H100 80GB HBM3", "NVIDIA H200")
        assert specs[0].capture.kernel.proof("sm_80") == ("b" * 24, "")  # either record's device code proves an arch
        choices = captured.choices_of(specs[:1])  # the one entry carries both records' choices
        assert captured.recorded_calls(choices, {"k1"}) == (Call("c1", "k1"), Call("c2", "k1"))
    # a spec file naming both records (it used to refuse the kernel as "listed twice"), and records given their own archs
    (tmp_path / "lib.toml").write_text('[library]\nname = "ops"\narchs = ["90a"]\ncapture = ["a.json", "b.json"]\n')
    assert [s.capture.key for s in captured.with_captures(load_spec_file(tmp_path / "lib.toml")).entries] == ["k1", "k2"]
    sources = tuple(CaptureSource(tmp_path / f"{r}.json", (parse_arch(a),)) for r, a in (("a", "80"), ("b", "90a")))
    lib = captured.with_captures(LibrarySpec(name="ops", entries=(), captures=sources))
    assert [(s.capture.key, [str(a) for a in s.archs]) for s in lib.entries] == [("k1", ["sm_80", "sm_90a"]), ("k2", ["sm_90a"])]
