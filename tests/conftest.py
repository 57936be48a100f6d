"""Shared fixtures: the session's variant cache and the test libraries (built once per session, or prebuilt via TL_AOT_TEST_LIBDIR).

Helpers live in the ``support`` package (``tests/support/``), never here: a test file imports
``support.builds``, not this ``conftest``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import tree
from support.builds import KERNELS, TESTLIB_SPEC, cuda_available, prebuilt_or_build, with_runtime


def pytest_collection_modifyitems(config, items):
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (GPU tests run on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A structure test's file counts (``support.tree.files``) travel on its report, from an xdist worker too."""
    report = yield
    if call.when == "call" and tree.READ:
        report.user_properties += [("read", f"{where}: {n} files") for where, n in tree.READ.items()]
        tree.READ.clear()
    return report


def pytest_terminal_summary(terminalreporter):
    """Say how many files each structure test read: a check of 0 files would fail, and a shrinking count shows."""
    lines = sorted(
        f"{r.nodeid.split('::')[-1]}: {text}"
        for reports in terminalreporter.stats.values()
        for r in reports
        if getattr(r, "when", None) == "call"
        for name, text in getattr(r, "user_properties", ())
        if name == "read"
    )
    if lines:
        terminalreporter.write_sep("-", "files read by the structure tests")
        for line in lines:
            terminalreporter.write_line(line)


#: What picks the CUDA compiler, for tl_aot in this process and for TileLang in every child it starts.
_TOOLKIT_ENV = ("CUDA_HOME", "CUDA_PATH", "TL_AOT_NVCC", "TL_AOT_CUDA", "_TL_AOT_EXPORTED_CUDA_HOME", "PATH")


@pytest.fixture(autouse=True)
def _toolkit_env_is_the_tests_own():
    """Each test starts from the worker's compiler environment: a CUDA_HOME one test set (a fake nvcc's) reaches no later test."""
    before = {k: os.environ.get(k) for k in _TOOLKIT_ENV}
    yield
    for key, value in before.items():
        if os.environ.get(key) != value:
            if value is None:
                del os.environ[key]
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def worker_id(request) -> str:
    """pytest-xdist's worker name (``gw0``, ...), or ``master`` in a run without workers (xdist's own fixture, when it is installed)."""
    workerinput = getattr(request.config, "workerinput", None)
    return workerinput["workerid"] if workerinput else "master"


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory, worker_id) -> Path:
    """One variant cache for the whole session (or TL_AOT_CACHE_DIR), so repeated builds are cheap.

    Under pytest-xdist (``-n 2``) the workers of one run share it (it is made for concurrent builds:
    entries are published whole, a lock per key), so a kernel one worker built is a hit for the other.
    """
    env = os.environ.get("TL_AOT_CACHE_DIR")
    if env:
        return Path(env)
    if worker_id == "master":
        return tmp_path_factory.mktemp("variant-cache")
    shared = tmp_path_factory.getbasetemp().parent / "variant-cache"  # the run's folder, above each worker's
    shared.mkdir(exist_ok=True)
    return shared


@pytest.fixture(scope="session")
def session_runtime(cache_dir) -> Path:
    """The launcher runtime's object in the session cache (compiled once per session, as a build would)."""
    from tl_aot.common.versions import package_version
    from tl_aot.cuda.host_objects import runtime_object
    from tl_aot.cuda.toolchain import nvcc_version
    from tl_aot.pipeline.stages import objects_key

    obj, _ = runtime_object(cache_dir, extra_key=objects_key(nvcc_version(), package_version("apache-tvm-ffi")))
    return obj


@pytest.fixture
def fresh_cache(tmp_path, session_runtime) -> Path:
    """A variant cache of this test's own (``tmp_path/cache``), empty but for a copy of the session's runtime object.

    For tests of what builds do with variants and libraries (damage, edits, kills, locks, reuse):
    the runtime object depends only on the toolchain, and compiling it in every such cache cost
    each test ~8 s. Tests of a clean build from nothing (reproducibility, concurrent writers) use
    an empty folder instead.
    """
    return with_runtime(tmp_path / "cache", session_runtime)


@pytest.fixture(scope="session")
def testlib_path(tmp_path_factory, cache_dir) -> Path:
    """``libtl_aot_testlib.so``: every kind of kernel, for sm_80 and sm_90a."""
    return prebuilt_or_build(TESTLIB_SPEC, "tl_aot_testlib", tmp_path_factory, cache_dir)


@pytest.fixture(scope="session")
def outputs_lib(tmp_path_factory, cache_dir):
    """``libtl_outputs.so`` (tests/kernels/outputs.toml): entries that return their outputs."""
    import tl_aot

    return tl_aot.load(prebuilt_or_build(KERNELS / "outputs.toml", "tl_outputs", tmp_path_factory, cache_dir))


@pytest.fixture(scope="session")
def coverage_lib(tmp_path_factory, cache_dir):
    """``libtl_coverage.so`` (tests/kernels/coverage.toml): solved dims, bit operations, tensorless entries."""
    import tl_aot

    return tl_aot.load(prebuilt_or_build(KERNELS / "coverage.toml", "tl_coverage", tmp_path_factory, cache_dir))


@pytest.fixture(scope="session")
def special_lib(tmp_path_factory, cache_dir):
    """``libtl_special.so`` (tests/kernels/specialised.toml): entries with several specialisations."""
    import tl_aot

    return tl_aot.load(prebuilt_or_build(KERNELS / "specialised.toml", "tl_special", tmp_path_factory, cache_dir))


@pytest.fixture(scope="session")
def testlib(testlib_path):
    import tl_aot

    return tl_aot.load(testlib_path)
