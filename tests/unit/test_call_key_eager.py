"""An eager ``@tilelang.jit`` (``T.const`` dims, ``X: T.Tensor(...)`` in its body), called with tensors: keyed by what TileLang reads.

TileLang traces an eager body with placeholders of its own for the tensor parameters; a caller's
tensor reaches the prim_func only through the dims bound from its shape and strides (its dtype
scales a packed tensor's last dim). So its call key spells such a tensor as dtype, shape and
strides, and serving answers it untraced. A tensor anywhere else (a lazy kernel's argument, a
tensor subclass, an eager kernel's plain parameter) leaves the call unkeyed, as before.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

pytest.importorskip("tilelang")
torch = pytest.importorskip("torch")

from support.call_key_reference import reference_key  # noqa: E402
from support.served_fakes import LAZY_SCALE, fake_library  # noqa: E402
from support.user_modules import load_user_module  # noqa: E402

from tl_aot.call_keys.key import call_key  # noqa: E402
from tl_aot.capture.record import CaptureRecord  # noqa: E402
from tl_aot.capture.recorder import Capturer  # noqa: E402
from tl_aot.gpu.cuda_driver import emulating  # noqa: E402
from tl_aot.jit.seam import Interception, intercepting, jit_module, uninstall  # noqa: E402
from tl_aot.serving import active  # noqa: E402
from tl_aot.serving import server as serving  # noqa: E402

EAGER = """
import tilelang
import tilelang.language as T


def make(block):
    @tilelang.jit
    def axpy(X, Y, scale):
        M, N = T.const("M, N")
        X: T.Tensor((M, N), "float32")
        Y: T.Tensor((M, N), "float32")
        Z = T.empty((M, N), "float32")
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            for i, j in T.Parallel(block, N):
                Z[bx * block + i, j] = X[bx * block + i, j] * scale + Y[bx * block + i, j]
        return Z

    return axpy
"""

LAZY = LAZY_SCALE  # a tensor given to a lazy kernel: unkeyed


@pytest.fixture
def kmod(tmp_path, monkeypatch):
    return lambda name, text=EAGER: load_user_module(tmp_path, monkeypatch, name, text)


def _eager(jit, *args):
    """``jit`` with its mode decided for ``args``, as ``JITImpl.__call__`` decides it before it compiles."""
    jit.initialize_jit_mode(*args)
    assert jit.mode == "eager"
    return jit


def _xy(m, n, dtype=torch.float32):
    return torch.randn(m, n, dtype=dtype), torch.randn(m, n, dtype=dtype)


def test_an_eager_kernels_tensors_are_keyed_by_dtype_shape_and_strides(kmod):
    k = kmod("eager_a")
    x, y = _xy(64, 32)
    jit = _eager(k.make(16), x, y, 2.0)
    key = call_key(jit, (x, y, 2.0), {}, "90")
    assert key is not None and key == reference_key(jit, (x, y, 2.0), {}, "90")
    other = _xy(64, 32)  # other data, the same dtype, shape and strides: the same kernel
    assert call_key(jit, (*other, 2.0), {}, "90") == key
    assert call_key(jit, (x, y), {"scale": 2.0}, "90") not in (None, key)  # keywords are spelled as keywords
    assert call_key(jit, (x,), {"Y": y, "scale": 2.0}, "90") == reference_key(jit, (x,), {"Y": y, "scale": 2.0}, "90")
    moved = {
        "another shape": (*_xy(128, 32), 2.0),
        "another dtype": (*_xy(64, 32, torch.float16), 2.0),
        "other strides": (torch.randn(32, 64).T, y, 2.0),
        "another scalar": (x, y, 3.0),
    }
    keys = {what: call_key(jit, args, {}, "90") for what, args in moved.items()}
    assert None not in keys.values() and key not in keys.values() and len(set(keys.values())) == len(keys), keys
    assert call_key(_eager(k.make(32), x, y, 2.0), (x, y, 2.0), {}, "90") != key  # another closure value


def test_a_tensor_anywhere_else_leaves_the_call_unkeyed(kmod):
    k = kmod("eager_b")
    x, y = _xy(64, 32)
    jit = k.make(16)
    assert call_key(jit, (x, y, 2.0), {}, "90") is None  # its mode not decided yet: TileLang may still call it with them
    _eager(jit, x, y, 2.0)
    assert call_key(jit, (x, y, torch.tensor(2.0)), {}, "90") is None  # a tensor given to a plain parameter

    class Wrapped(torch.Tensor):
        pass

    assert call_key(jit, (x.as_subclass(Wrapped), y, 2.0), {}, "90") is None  # a subclass may answer shape its own way
    assert call_key(jit, (torch.nn.Parameter(x), y, 2.0), {}, "90") is not None  # torch's own parameter is a tensor
    lazy = kmod("lazy_b", LAZY).scale_by
    lazy.initialize_jit_mode(torch.randn(8), 2.0)
    assert lazy.mode == "lazy"
    assert call_key(lazy, (torch.randn(8), 2.0), {}, "90") is None  # a lazy kernel reads the tensor itself


def test_an_eager_call_is_served_without_tracing_and_another_shape_is_traced(tmp_path, kmod, monkeypatch):
    traces = []
    real = jit_module().JITImpl.get_tir
    monkeypatch.setattr(jit_module().JITImpl, "get_tir", lambda self, *a, **kw: traces.append(a) or real(self, *a, **kw))
    k = kmod("eager_c")
    x, y = _xy(64, 32)
    with emulating("90"):
        cap = Capturer(tmp_path / "r.json", compile_for_real=False)
        with intercepting(Interception(cap._on_request, name="capture")):
            _eager(k.make(16), x, y, 2.0).compile(x, y, 2.0)
        cap.flush()
        [(request_key, item)] = CaptureRecord.load(tmp_path / "r.json").kernels.items()
        assert item["calls"], "the capture recorded the eager call's key"
        monkeypatch.setattr(active, "_installed", [])
        monkeypatch.setattr(
            active, "_active", serving.Server([fake_library(tmp_path / "r.json", request_key, "axpy_k", "axpy")], strict=True)
        )
        active._patch(jit_module())
        try:
            traced = len(traces)
            out = k.make(16)(*_xy(64, 32), 2.0)  # called as a user calls it: TileLang's own eager path, then run
            assert out[:2] == ("ran", "axpy_k") and len(out[2]) == 2, out  # run with X and Y (the kernel allocates Z)
            st = active._active.stats
            assert len(traces) == traced, "served before TileLang built the prim_func"
            assert (st.served_untraced, st.lookups, st.call_lookups) == (1, 1, 1)
            with pytest.raises(serving.KernelNotServed):
                k.make(16)(*_xy(128, 32), 2.0)  # another shape: another kernel, looked up by its traced prim_func
            assert len(traces) == traced + 1 and active._active.stats.served_untraced == 1
        finally:
            uninstall(active._installed[0])


def test_capture_names_each_function_called_with_no_call_key_and_why(tmp_path, kmod, capsys):
    """A lazy kernel given a tensor is recorded without a call key: the capture says which function, and what it could not spell."""
    from tl_aot.capture.record_parts import ProcessReport
    from tl_aot.frontends.cli_workload import _say_unkeyed

    lazy = kmod("lazy_d", LAZY).scale_by
    k = kmod("eager_d")
    x, y = _xy(64, 32)
    with emulating("90"):
        cap = Capturer(tmp_path / "r.json", compile_for_real=False)
        with intercepting(Interception(cap._on_request, name="capture")):
            for n in (8, 16):  # two calls of one function, for one reason: named once
                lazy.initialize_jit_mode(torch.randn(n), 2.0)
                lazy.compile(torch.randn(n), 2.0)
            _eager(k.make(16), x, y, 2.0).compile(x, y, 2.0)  # keyed: not named
        cap.flush()
    report = cap.process_report()
    assert report.unkeyed == (("lazy_d.scale_by", "Tensor value"),)
    assert ProcessReport.from_json(json.loads(json.dumps(asdict(report)))) == report  # as the capture's processes report it
    _say_unkeyed([report, report])  # two processes, the same function: named once
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("tl_aot capture: 1 @tilelang.jit function(s) called with no call key (") and "after TileLang traces" in err[0]
    assert err[1:] == ["  lazy_d.scale_by: Tensor value"]
    many = ProcessReport(pid=1, unkeyed=tuple((f"m.f{i}", "module tiles") for i in range(10)))
    _say_unkeyed([many])
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("tl_aot capture: 10 @tilelang.jit function(s)") and len(err) == 10 and err[-1] == "  ... and 2 more"
