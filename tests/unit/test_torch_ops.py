"""Entries as torch operators: schemas and fake implementations from the manifest (no GPU needed).

The real implementations need a GPU (tests/gpu); here the ops run on meta tensors, which dispatch
to the fake implementations, and torch.compile traces them into one graph.
"""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tl_aot.runtime import torch_ops  # noqa: E402

GOLDEN = json.loads((Path(__file__).parent / "golden" / "manifest.json").read_text())


def manifest_with_dynamic_output() -> dict:
    """The golden manifest, its dynamic-m gemm turned into one that returns C (as out_idx=[-1] would)."""
    m = copy.deepcopy(GOLDEN)
    m["library"] = "golden_" + uuid.uuid4().hex[:8]  # a fresh op namespace per test
    gemm = next(e for e in m["entries"] if e["name"] == "gemm")
    gemm["params"][2]["output"] = True
    return m


def calls():
    seen = []

    def make(name):
        def fn(*args):
            seen.append((name, args))

        return fn

    return seen, {e.get("export") or e["name"]: make(e.get("export") or e["name"]) for e in GOLDEN["entries"]}


def test_schemas_follow_the_manifest():
    by_name = {e["name"]: e for e in manifest_with_dynamic_output()["entries"]}
    assert torch_ops.schema_of(by_name["gemm"]) == "(Tensor A, Tensor B) -> Tensor"
    assert torch_ops.schema_of(by_name["axpy_first"]) == "(Tensor a, float alpha, Tensor c) -> Tensor"
    assert torch_ops.schema_of(by_name["row_stats"]) == "(Tensor x) -> (Tensor, Tensor)"
    # no declared outputs: every tensor may be written, so the op says so
    assert torch_ops.schema_of(by_name["two"]) == "(Tensor(a!) X, Tensor(b!) Y, Tensor(c!) Z, float alpha) -> ()"


def test_fake_outputs_take_shapes_from_the_inputs():
    m = manifest_with_dynamic_output()
    _, fns = calls()
    ops = torch_ops.register(fns, json.dumps(m))
    a = torch.empty(77, 256, dtype=torch.float16, device="meta")
    b = torch.empty(256, 256, dtype=torch.float16, device="meta")
    c = ops.gemm(a, b)
    assert (c.shape, c.dtype, c.device.type) == ((77, 256), torch.float16, "meta")
    total, peak = ops.row_stats(torch.empty(64, 512, device="meta"))
    assert total.shape == peak.shape == (64,)
    out = ops.axpy_first(torch.empty(4096, device="meta"), 2.0, torch.empty(4096, device="meta"))
    assert out.shape == (4096,) and out.dtype == torch.float32


def test_registering_again_returns_the_same_ops_and_a_taken_namespace_is_refused():
    m = manifest_with_dynamic_output()
    _, fns = calls()
    first = torch_ops.register(fns, m)
    assert torch_ops.register(fns, m) is first
    other = dict(m, library="another_library")
    with pytest.raises(ValueError, match=f"namespace '{m['library']}' already holds the ops of tl_aot library"):
        torch_ops.register(fns, other, namespace=m["library"])
    with pytest.raises(ValueError, match="must be an identifier"):
        torch_ops.register(fns, other, namespace="_private")


def test_torch_compile_traces_two_entries_without_a_graph_break():
    m = manifest_with_dynamic_output()
    _, fns = calls()
    ops = torch_ops.register(fns, m)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward  # runs on meta tensors: the fake implementations

    @torch.compile(backend=backend, fullgraph=True, dynamic=True)
    def model(a, b, x):
        c = ops.gemm(a, b)
        total, peak = ops.row_stats(x)
        return c * 2, total + peak

    a = torch.empty(33, 256, dtype=torch.float16, device="meta")
    b = torch.empty(256, 256, dtype=torch.float16, device="meta")
    c, s = model(a, b, torch.empty(64, 512, device="meta"))
    assert c.shape == (33, 256) and s.shape == (64,)
    assert len(graphs) == 1
    targets = {str(n.target).removesuffix(".default") for n in graphs[0].graph.nodes if n.op == "call_function"}
    assert {f"{m['library']}.gemm", f"{m['library']}.row_stats"} <= targets


def test_output_dims_that_are_expressions_of_symbols():
    m = manifest_with_dynamic_output()
    gemm = next(e for e in m["entries"] if e["name"] == "gemm")
    gemm["params"][2]["shape"] = ["m * 2 + 1", "256 // 2"]
    _, fns = calls()
    ops = torch_ops.register(fns, m)
    c = ops.gemm(torch.empty(5, 256, dtype=torch.float16, device="meta"), torch.empty(256, 256, dtype=torch.float16, device="meta"))
    assert c.shape == (11, 128)
    gemm["params"][2]["shape"] = ["ceil(m)", 256]
    with pytest.raises(ValueError, match="cannot compute output dim 'ceil\\(m\\)'"):
        torch_ops.register(fns, dict(m, library=m["library"] + "_x"))


def test_one_op_per_specialised_entry_whose_fake_follows_the_same_rules():
    """norm: N=2048; N=4096 when m <= 64; N=4096 with other code as the fallback (the golden manifest)."""
    m = manifest_with_dynamic_output()
    norms = [e for e in m["entries"] if e.get("export") == "norm"]
    assert len(norms) == 3 and norms[-1]["fallback"]
    norms[-1]["params"][2]["shape"] = ["m", 4096]  # the fallback's output, told apart by a marker dtype
    norms[-1]["params"][2]["dtype"] = "float32"
    _, fns = calls()
    ops = torch_ops.register(fns, m)
    assert not hasattr(ops, "norm__s0")

    def run(rows, hidden):
        x = torch.empty(rows, hidden, dtype=torch.float16, device="meta")
        return ops.norm(x, torch.empty(hidden, dtype=torch.float16, device="meta"))

    assert run(3, 2048).shape == (3, 2048)
    assert run(64, 4096).dtype == torch.float16  # the m <= 64 specialisation
    assert run(65, 4096).dtype == torch.float32  # past its range: the fallback
    with pytest.raises(ValueError, match=r"norm: no specialisation takes torch.float16\[3, 1024\]"):
        run(3, 1024)


def test_output_dims_from_a_symbol_solved_from_an_input_dim():
    """pair_sum(X: [n * 2]) -> Y: [n]: the fake solves n = X.shape[0] // 2 as the library does."""
    _, fns = calls()
    ops = torch_ops.register(fns, manifest_with_dynamic_output())
    assert ops.pair_sum(torch.empty(10, device="meta")).shape == (5,)


def test_an_op_taking_no_tensor_serves_every_dispatch_key_and_fakes_on_the_current_device():
    """arange(n, start, step) -> out: [n]: the dispatcher has no tensor to pick CUDA by."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    m = manifest_with_dynamic_output()
    seen, fns = calls()
    ops = torch_ops.register(fns, m)
    assert torch_ops.schema_of(next(e for e in m["entries"] if e["name"] == "arange")) == "(int n, int start, int step) -> Tensor"
    with FakeTensorMode():
        out = ops.arange(7, 0, 3)
    assert (out.shape, out.dtype, out.device.type) == ((7,), torch.int32, "cuda")
    ops.arange(7, 0, 3)  # the real op: without CUDA here, the library's own call allocates (and would report)
    assert seen[-1] == ("arange", (7, 0, 3))


def test_allocating_call_allocates_with_torch_and_passes_every_parameter(monkeypatch):
    entry = next(e for e in GOLDEN["entries"] if e["name"] == "arange")
    seen, fns = calls()
    call = torch_ops.allocating_call(fns["arange"], entry)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch_ops, "current_device", lambda torch: torch.device("cpu"))  # stands in for cuda:N
    out = call(5, 1, 2)
    assert (out.shape, out.dtype) == ((5,), torch.int32) and seen[-1] == ("arange", (out, 5, 1, 2))
    out = call(5, 1, 2, 1234)  # then a stream
    assert seen[-1] == ("arange", (out, 5, 1, 2, 1234))
    given = torch.empty(5, dtype=torch.int32)
    assert call(given, 5, 1, 2) is None and seen[-1] == ("arange", (given, 5, 1, 2))  # every parameter: in place
    call(-1, 0, 1)  # no valid shape: the library's call reports it
    call("5", 0, 1)
    call(2**31, 0, 1)  # beyond int32: refused by the library before anything is allocated
    assert seen[-3:] == [("arange", (-1, 0, 1)), ("arange", ("5", 0, 1)), ("arange", (2**31, 0, 1))]
    assert torch_ops.allocating_call(call, entry)._tl_aot_library_fn is fns["arange"]  # wrapped once
