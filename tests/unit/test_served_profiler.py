"""A served kernel's ``get_profiler()``: TileLang's ``Profiler`` over the parameters its JIT kernel would list."""

import pytest

from tl_aot.common.metadata import LoweredEntry, Param

pytest.importorskip("tilelang")

ENTRY = LoweredEntry(
    name="scale_rows",
    source="kernels.py",
    function="scale_rows",
    params=(
        Param("A", "tensor", "float16", ("m", 128)),
        Param("alpha", "scalar", "float32"),
        Param("idx", "tensor", "int32", ("m",)),
        Param("B", "tensor", "float16", ("m", 128), output=True),
    ),
)


def test_params_are_tilelangs_kernel_params_with_one_variable_per_symbol():
    from tilelang.engine.param import KernelParam

    from tl_aot.serving.profiler import kernel_params, result_idx

    params = kernel_params(ENTRY)
    assert all(isinstance(p, KernelParam) for p in params)
    assert [str(p.dtype) for p in params] == ["float16", "float32", "int32", "float16"]
    assert params[1].is_scalar() and not params[0].is_scalar()
    a, _, idx, b = params
    assert a.shape[1] == 128 and a.shape[0].name == "m"
    assert a.shape[0] is idx.shape[0] is b.shape[0]  # one symbol, one variable: do_bench's constraints bind it once
    assert result_idx(ENTRY) == [3]


def test_the_profiler_launches_the_kernel_it_was_asked_of_and_sizes_dynamic_dims_as_tilelang_does():
    from tilelang.profiler import Profiler

    from tl_aot.serving.profiler import profiler_of

    calls = []
    profiler = profiler_of(lambda *args: calls.append(args) or "out", ENTRY)
    assert isinstance(profiler, Profiler) and profiler.result_idx == [3]
    assert profiler(1, 2, 3) == "out" and calls == [(1, 2, 3)]
    sized = profiler._substitute_dynamic_symbols(profiler.params[0], {"m": 7})  # do_bench(dynamic_symbolic_constraints=...)
    assert [int(d) for d in sized.shape] == [7, 128]
    with pytest.raises(ValueError, match="dynamic symbolic shape"):
        profiler._get_inputs()  # TileLang's own refusal: a dynamic dim needs its constraints


def test_run_once_launches_through_the_profiler(monkeypatch):
    """``kernel.run_once()`` (TileLang's ``JITKernel.run_once``): the profiler's supplied inputs, then the kernel."""
    from tilelang.profiler import Profiler

    from tl_aot.serving.served_kernel import ServedKernel

    asked = []

    class Lib:
        path = "libk.so"

        def signature(self, name):
            asked.append(name)
            return ENTRY

    class Req:
        func, out_idx, pass_configs, compile_flags = None, [-1], {}, []

    kernel = ServedKernel(lambda *args: ("ran", args), "scale_rows", Lib(), Req())
    monkeypatch.setattr(Profiler, "_get_inputs", lambda self, **_: [1, 2, 3])  # CUDA tensors where a GPU is
    assert kernel.run_once() == ("ran", (1, 2, 3)) and asked == ["scale_rows"]
    assert kernel.kernel_source.startswith("// served by tl_aot from libk.so: scale_rows(")
    assert kernel.host_source == kernel.kernel_source
