"""The GPU serving sees, asked of the driver (a fake libcuda.so.1 here), and what serving says without one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tl_aot.gpu import cuda_driver
from tl_aot.gpu.cuda_driver import current_gpu
from tl_aot.serving.misses import miss_message

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory) -> str:
    """tests/unit/cpp/fake_libcuda.c built as a shared library named like the real driver."""
    out = tmp_path_factory.mktemp("fake_driver") / "libcuda.so.1"
    cc = next((c for c in ("cc", "gcc", "clang") if subprocess.run(["which", c], capture_output=True).returncode == 0), None)
    if cc is None:
        pytest.skip("no C compiler")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(HERE / "cpp" / "fake_libcuda.c")], check=True)
    return str(out)


@pytest.fixture
def driver(fake_driver, monkeypatch):
    """Ask the fake driver: returns a function giving ``current_gpu()`` for the environment set by the test."""
    for var in ("FAKE_CUDA_INIT", "FAKE_CUDA_CCS", "FAKE_CUDA_CURRENT", "FAKE_CUDA_NAMES"):
        monkeypatch.delenv(var, raising=False)

    def ask(**env):
        for k, v in env.items():
            monkeypatch.setenv(f"FAKE_CUDA_{k.upper()}", v)
        cuda_driver.reset()
        return current_gpu(names=(fake_driver,))

    ask.names = (fake_driver,)  # type: ignore[attr-defined]
    yield ask
    cuda_driver.reset()


def test_no_driver_library_means_no_gpu_and_says_why():
    cuda_driver.reset()
    try:
        gpu = current_gpu(names=("/nonexistent/libcuda.so.1",))
    finally:
        cuda_driver.reset()
    assert not gpu and gpu.sm == "no GPU"
    assert "cannot load the NVIDIA driver library libcuda.so.1" in gpu.why_none


def test_failed_init_and_no_device_are_no_gpu(driver):
    gpu = driver(init="100", ccs="90")
    assert not gpu and "cuInit failed with CUresult 100" in gpu.why_none and "CUDA_VISIBLE_DEVICES" in gpu.why_none
    gpu = driver(init="0", ccs="")
    assert not gpu and "reports no device" in gpu.why_none


def test_the_current_contexts_device_else_device_0(driver):
    assert driver(ccs="90,80") == cuda_driver.Gpu("90", 0)  # no current context: device 0, as a fresh process
    gpu = driver(ccs="90,86", current="1")  # torch.cuda.set_device(1) then a CUDA call makes device 1's context current
    assert (gpu.cc, gpu.device, gpu.sm) == ("86", 1, "sm_86")


def test_a_lookup_asks_only_which_device_is_current_and_follows_a_switch(driver, monkeypatch):
    """``current_gpu_identity`` keeps each device's answer, and still sees ``torch.cuda.set_device`` between lookups."""
    from tl_aot.gpu.cuda_driver import current_gpu_identity, gpu_identity

    assert driver(ccs="90,86", current="1").cc == "86"
    first = current_gpu_identity()
    assert first == (cuda_driver.Gpu("86", 1), gpu_identity(cuda_driver.Gpu("86", 1))) and first[1].startswith("86:")
    assert current_gpu_identity() is first  # kept: no new Gpu, no attributes asked again
    monkeypatch.setenv("FAKE_CUDA_CURRENT", "0")  # another device made current in this thread
    assert current_gpu_identity()[0] == cuda_driver.Gpu("90", 0) and current_gpu_identity()[1].startswith("90:")
    cuda_driver.reset()
    monkeypatch.setenv("FAKE_CUDA_INIT", "100")
    current_gpu(names=driver.names)  # the driver loaded again: cuInit fails
    gpu, identity = current_gpu_identity()
    assert not gpu and identity == "" and "cuInit failed" in gpu.why_none


def test_an_emulated_profile_answers_over_the_driver(driver):
    from tl_aot.gpu.device import emulate, find_profile

    driver(ccs="")  # loaded, no device
    with emulate(find_profile("A100-SXM")):
        assert current_gpu().cc == "80"
        from tl_aot.gpu.cuda_driver import current_gpu_identity, gpu_identity

        assert current_gpu_identity() == (current_gpu(), gpu_identity()) and gpu_identity().startswith("80:sms=108,")
    assert not current_gpu()


def test_probing_needs_no_torch():
    code = "import sys; from tl_aot.gpu.cuda_driver import current_gpu; current_gpu(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("arch", "ptx", "cc", "runs"),
    [
        ("sm_90a", False, "90", True),
        ("sm_90a", False, "100", False),  # arch-specific SASS runs on its own GPU only
        ("sm_80", False, "86", True),  # SASS of the same major, an older minor
        ("sm_86", False, "80", False),
        ("sm_80", False, "90", False),
        ("sm_80", True, "90", True),  # PTX no newer than the GPU is JIT-compiled by the driver
        ("sm_80", False, "", False),  # no GPU
    ],
)
def test_an_image_runs_where_the_launcher_would_pick_it(arch, ptx, cc, runs):
    from tl_aot.common.arch import parse_arch
    from tl_aot.gpu.image_select import image_of, runs_on

    assert runs_on({image_of(parse_arch(arch + ("+PTX" if ptx else "")))}, cc) is runs


@pytest.fixture(scope="module")
def served_request():
    """A compile request as TileLang's JIT makes it, and a stand-in library holding its kernel for sm_90a."""
    pytest.importorskip("tilelang")
    sys.path.insert(0, str(HERE.parent / "kernels"))
    try:
        import elementwise
    finally:
        sys.path.pop(0)
    from tl_aot.common.arch import parse_arch
    from tl_aot.common.manifest_index import index_of
    from tl_aot.common.metadata import ArchVariant, LoweredEntry, Manifest
    from tl_aot.jit.request_key import options_of, request_key
    from tl_aot.jit.seam import CompileRequest

    req = CompileRequest(elementwise.axpy(1024), None, None, None, None, {}, (), 0)
    key = request_key(req.func, options_of(req))
    entry = LoweredEntry(
        name="axpy_k",
        source="elementwise.py",
        function="axpy",
        args=(("N", "1024"),),
        capture_key=key,
        captured_on=("NVIDIA H100 80GB HBM3",),
    )
    entry = LoweredEntry(**{**entry.__dict__, "variants": (ArchVariant(arch=parse_arch("sm_90a"), request_key=key),)})

    class Lib(SimpleNamespace):
        def __getitem__(self, name):
            return lambda *a: ("called", name, a)

    manifest = Manifest(abi_version=0, library="standin", entries=(entry,))
    return req, key, Lib(path=Path("/libs/libstandin.so"), index=index_of(manifest), tunings=(), signature=manifest.entry)


def test_serving_with_no_gpu_says_no_gpu_is_visible(driver, served_request):
    from tl_aot.serving.server import Server

    req, key, lib = served_request
    server = Server([lib], strict=True)
    driver(ccs="")
    served, got = server.lookup(req)
    assert served is None and got == key
    msg = miss_message(server, req, key)
    assert "cannot be served: no GPU is visible to this process" in msg and "reports no device" in msg
    assert "nearest prebuilt" not in msg and "sm_?" not in msg and "a library holds it" in msg


def test_serving_on_a_gpu_the_library_lacks_names_the_archs_it_has(driver, served_request):
    from tl_aot.serving.server import Server

    req, key, lib = served_request
    server = Server([lib], strict=True)
    driver(ccs="80")
    assert server.lookup(req)[0] is None
    msg = miss_message(server, req, key)
    assert "for this GPU (sm_80)" in msg and "axpy_k holds it for sm_90 only (/libs/libstandin.so)" in msg
    assert "build --capture RECORD --arch sm_80" in msg and "capture --serve" not in msg  # a build is what it lacks, not a capture
    driver(ccs="90")
    served, _ = server.lookup(req)
    assert served is not None and served.entry == "axpy_k" and served(1, 2) == ("called", "axpy_k", (1, 2))


def test_the_driver_names_each_devices_model_and_an_emulated_profile_its_own(driver):
    from tl_aot.gpu.cuda_driver import gpu_name
    from tl_aot.gpu.device import emulate, find_profile

    gpu = driver(ccs="90,86", names="NVIDIA H200,NVIDIA A10", current="1")
    assert gpu_name(gpu) == "NVIDIA A10" and gpu_name(cuda_driver.Gpu("90", 0)) == "NVIDIA H200"
    with emulate(find_profile("H100-SXM")):
        assert gpu_name() == "NVIDIA H100 80GB HBM3"
    assert gpu_name(driver(ccs="")) == ""  # no device: no name


def test_a_kernel_only_another_gpu_model_asks_for_names_both_models_and_the_incremental_capture(driver, served_request):
    """A workload may pick its kernels by GPU model (TileOPs runs one kernel on an H200 only): a library captured on an
    H100 lacks it on an H200 with nothing wrong in its keys. The miss says so and what to run: ``capture --serve``."""
    import elementwise

    from tl_aot.jit.request_key import options_of, request_key
    from tl_aot.jit.seam import CompileRequest
    from tl_aot.serving.server import Server

    _, _, lib = served_request
    other = CompileRequest(elementwise.axpy(2048), None, None, None, None, {}, (), 0)  # a kernel the H100 run never asked for
    key = request_key(other.func, options_of(other))
    server = Server([lib], strict=True)
    driver(ccs="90", names="NVIDIA H200")
    assert server.lookup(other) == (None, key)
    msg = miss_message(server, other, key)
    assert f"(key {key}) is not in the served libraries for this GPU (sm_90); no prebuilt kernel comes from that function" in msg
    assert "captured on NVIDIA H100 80GB HBM3, and this GPU is an NVIDIA H200: a workload that chooses its kernels by GPU model" in msg
    assert "python -m tl_aot capture --serve /libs/libstandin.so -o NEW.json -- COMMAND" in msg
    assert "add --device H200" in msg and msg.endswith("then python -m tl_aot build --capture NEW.json")
    driver(ccs="90", names="NVIDIA H100 80GB HBM3")  # the model it was captured on: a kernel it never asked for, nothing more
    msg = miss_message(server, other, key)
    assert "captured on" not in msg and "capture --serve /libs/libstandin.so" in msg and "--device H100-SXM" in msg
