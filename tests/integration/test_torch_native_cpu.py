"""The native torch companion built and registered with the CPU torch here (no GPU): schemas, fakes, messages.

tests/kernels/torch_native.toml sets ``[library] torch_ops = true``: the build leaves
``lib<name>_torch.so`` beside the library, compiled against this torch's headers for the stable ABI
of torch 2.10. Registering loads it into this torch; meta tensors run the fake implementations and a
CPU tensor reaches the native kernel, which passes the library's own argument check on.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from support.builds import build_spec
from support.helpers import ok, place_torch_glue, tl_aot_here

torch = pytest.importorskip("torch")
pytest.importorskip("tilelang")

KERNELS = Path(__file__).parents[1] / "kernels"
EXPORTS = ("scale_add", "row_stats", "axpy_first", "scale_add_inplace", "pair_sum", "arange", "rms_norm")


@pytest.fixture(scope="module")
def built(tmp_path_factory, cache_dir):
    return build_spec(KERNELS / "torch_native.toml", tmp_path_factory, cache_dir)


@pytest.fixture(scope="module")
def ops(built):
    return built[1].register_torch_ops("tlc_" + uuid.uuid4().hex[:8])


def test_the_build_leaves_the_companion_beside_the_library(built):
    result, lib = built
    assert result.torch_companion == result.library.with_name("libtl_torch_native_torch.so")
    assert lib.torch_companion == result.torch_companion
    needed = subprocess.run(["readelf", "-d", str(result.torch_companion)], capture_output=True, text=True, check=True).stdout
    assert "libtl_torch_native.so" in needed and "libtorch" not in needed and "libc10" not in needed  # no libtorch link


def test_the_companion_registers_native_ops_with_the_python_registrations_schemas(built, ops):
    assert ops.backend == "native"
    py = built[1].register_torch_ops("tlp_" + uuid.uuid4().hex[:8], backend="python")
    assert py.backend == "python"
    for name in EXPORTS:
        native_schema = str(getattr(ops, name).default._schema)
        python_schema = str(getattr(py, name).default._schema)
        assert native_schema.split("::", 1)[1] == python_schema.split("::", 1)[1], name


def test_fake_implementations_trace_under_torch_compile_on_meta_tensors(ops):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward  # runs on meta tensors: the fake implementations

    @torch.compile(backend=backend, fullgraph=True)
    def model(x, b, xs, w, pairs):
        y = ops.scale_add(ops.scale_add(x, b), b)
        total, peak = ops.row_stats(torch.empty(64, 512, device="meta"))
        return y, ops.rms_norm(xs, w), total + peak, ops.pair_sum(pairs)

    h = torch.float16
    y, n, s, p = model(
        torch.empty(3, 1024, dtype=h, device="meta"),
        torch.empty(1024, dtype=h, device="meta"),
        torch.empty(5, 4096, dtype=h, device="meta"),
        torch.empty(4096, dtype=h, device="meta"),
        torch.empty(200, device="meta"),
    )
    assert (y.shape, n.shape, s.shape, p.shape) == ((3, 1024), (5, 4096), (64,), (100,))
    assert len(graphs) == 1


def test_a_cpu_tensor_gets_the_librarys_own_message(built, ops):
    _, lib = built
    x, b = torch.zeros(2, 1024, dtype=torch.float16), torch.zeros(1024, dtype=torch.float16)
    with pytest.raises(ValueError) as direct:
        lib.scale_add(x, b)
    assert "expected a CUDA tensor" in str(direct.value)
    with pytest.raises(RuntimeError, match="expected a CUDA tensor") as native:
        ops.scale_add(x, b)
    assert str(direct.value).splitlines()[0] in str(native.value)


def test_cli_torch_ops_builds_the_companion(tmp_path, cache_dir):
    out = tmp_path / "o"
    cmd = ["build", "--spec", KERNELS / "outputs.toml", "-o", out, "--cache-dir", cache_dir]
    ok(tl_aot_here(*cmd, "--torch-ops", "-q"))
    assert (out / "libtl_outputs_torch.so").is_file()
    ok(tl_aot_here(*cmd, "-q"))  # built without: no stale companion stays
    assert not (out / "libtl_outputs_torch.so").exists()
    # asked for on a library that is up to date: compiled from the source the launcher stage left in the work folder
    assert "is up to date" in ok(tl_aot_here(*cmd, "--torch-ops")).stdout
    assert (out / "libtl_outputs_torch.so").is_file()
    (out / ".tl_aot" / "tl_outputs" / "tl_outputs_torch.cc").unlink()  # that source gone: built again, never an error
    proc = ok(tl_aot_here(*cmd, "--torch-ops"))
    assert "is up to date" not in proc.stdout and (out / ".tl_aot" / "tl_outputs" / "tl_outputs_torch.cc").is_file()


def test_a_generated_loader_registers_the_companion_shipped_beside_it(built, tmp_path, monkeypatch):
    import importlib
    import shutil

    from tl_aot.codegen.render import render_loader

    result, _ = built
    pkg = tmp_path / "tlnpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for f in (result.library, result.torch_companion):  # as TileLangExtension(torch_ops=True) places them
        shutil.copy(f, pkg / f.name)
    (pkg / "_kernels.py").write_text(render_loader(result.manifest, module="tlnpkg._kernels", library_file=result.library.name))
    place_torch_glue(pkg)
    monkeypatch.syspath_prepend(str(tmp_path))
    loader = importlib.import_module("tlnpkg._kernels")
    ops = loader.register_torch_ops("tll_" + uuid.uuid4().hex[:8])
    assert ops.backend == "native"
    with pytest.raises(RuntimeError, match="expected a CUDA tensor"):
        ops.scale_add(torch.zeros(2, 1024, dtype=torch.float16), torch.zeros(1024, dtype=torch.float16))
