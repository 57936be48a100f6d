"""A served process names each function whose kernels were served only after TileLang traced them, and why no call key answered.

Such a request is served exactly, but its lookup hashes a prim_func TileLang has traced first:
milliseconds where a call key costs a fraction of one. The exit line says which functions and
why (what the key could not spell, a key no library recorded, a ``tilelang.compile``), so a
library author knows what to change for latency-bound processes.
"""

from __future__ import annotations

import pytest

pytest.importorskip("tilelang")
torch = pytest.importorskip("torch")

from support.served_fakes import LAZY_SCALE, fake_library  # noqa: E402
from support.user_modules import load_user_module  # noqa: E402

from tl_aot.capture.record import CaptureRecord  # noqa: E402
from tl_aot.capture.recorder import Capturer  # noqa: E402
from tl_aot.gpu.cuda_driver import emulating  # noqa: E402
from tl_aot.jit.seam import Interception, intercepting, jit_module, uninstall  # noqa: E402
from tl_aot.serving import active  # noqa: E402
from tl_aot.serving import server as serving  # noqa: E402
from tl_aot.serving.server import Stats  # noqa: E402

KERNELS = (
    LAZY_SCALE  # scale_by: a lazy kernel given a tensor, which no call key spells
    + """

NOTE = "captured"


@tilelang.jit(out_idx=[-1])
def scale_n(N, scale):
    assert NOTE  # read by the factory, not the kernel: the call key covers it, the prim_func does not
    return _body(N, scale)
"""
)


def _compile(jit, *args):
    jit.initialize_jit_mode(*args)
    return jit.compile(*args)


def test_the_exit_line_names_each_function_served_after_a_trace_and_why(tmp_path, monkeypatch):
    import tilelang

    k = load_user_module(tmp_path, monkeypatch, "traced_k", KERNELS)
    x = torch.randn(32)
    with emulating("90"):
        cap = Capturer(tmp_path / "r.json", compile_for_real=False)
        with intercepting(Interception(cap._on_request, name="capture")):
            _compile(k.scale_n, 64, 2.0)
            _compile(k.scale_by, x, 2.0)
            prim = k.scale_n.get_tir(16, 3.0)
            tilelang.compile(prim, out_idx=[-1], target="cuda")
        cap.flush()
        kernels = CaptureRecord.load(tmp_path / "r.json").kernels
        assert len(kernels) == 3
        libraries = [fake_library(tmp_path / "r.json", key, f"k{i}", "main") for i, key in enumerate(kernels)]
        monkeypatch.setattr(active, "_installed", [])
        monkeypatch.setattr(active, "_active", serving.Server(libraries, strict=True))
        active._patch(jit_module())
        try:
            st = active._active.stats
            _compile(k.scale_n, 64, 2.0)  # by its call key: nothing to name
            assert (st.lookups, st.call_lookups, st.traced) == (1, 1, {})
            monkeypatch.setattr(k, "NOTE", "edited")  # the key changes, the kernel does not
            _compile(k.scale_n, 64, 2.0)
            _compile(k.scale_by, x, 2.0)
            _compile(k.scale_by, torch.randn(32), 2.0)  # the same function again: named once
            tilelang.compile(prim, out_idx=[-1], target="cuda")
            assert (st.served, st.served_untraced, st.refused) == (5, 1, 0)
            with pytest.raises(serving.KernelNotServed):
                _compile(k.scale_by, torch.randn(48), 2.0)  # not served: a miss, reported as one, not named here
        finally:
            uninstall(active._installed[0])
    assert st.traced == {
        "traced_k.scale_n": serving._NOT_RECORDED,
        "traced_k.scale_by": "Tensor value",
        "main": serving._NO_JIT_CALL,
    }
    lines = active.traced_lines(st)
    assert lines[0].startswith("tl_aot serve: 3 function(s) served only after TileLang traced their prim_func")
    assert lines[1:] == [
        f"  traced_k.scale_n: {serving._NOT_RECORDED}",
        "  traced_k.scale_by: Tensor value",
        f"  main: {serving._NO_JIT_CALL}",
    ]


def test_the_exit_line_shows_eight_functions_and_counts_the_rest():
    st = Stats(traced={f"m.f{i}": "module tiles" for i in range(serving.TRACED_KEPT)})
    lines = active.traced_lines(st)
    assert lines[0].startswith(f"tl_aot serve: {serving.TRACED_KEPT}+ function(s)")  # more may have been met, not kept
    assert lines[1:-1] == [f"  m.f{i}: module tiles" for i in range(active.TRACED_SHOWN)]
    assert lines[-1] == f"  ... and {serving.TRACED_KEPT - active.TRACED_SHOWN} more"
    assert active.traced_lines(Stats()) == []  # every kernel by call key: the exit line alone


def test_a_call_whose_trace_never_comes_does_not_pin_its_arguments():
    """Why a call was not answered is kept until its traced request is looked up; a trace that fails never comes, and the
    call's arguments (tensors, on a GPU) must not stay alive with it."""
    import gc
    import weakref
    from types import SimpleNamespace

    from tl_aot.gpu.device import emulate, find_profile
    from tl_aot.jit.seam import JitCall

    server = serving.Server([])
    server.calls = {"another call": "its request"}  # the libraries record calls: this one is asked its key
    server._call_key = lambda *_: (None, "Tensor value")
    big = torch.empty(1 << 20)
    gone = weakref.ref(big)
    with emulate(find_profile("H100-SXM")):
        assert server.answer_call(JitCall(SimpleNamespace(func=None), (big,), {})) is None
    del big
    gc.collect()
    assert gone() is None, "the unanswered call kept its tensor alive"
    assert len(server._unanswered) == 1  # its reason, until its request comes (or 256 have gathered)
