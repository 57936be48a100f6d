"""Capture at an operator library's scale, on the CPU (``--device H100-SXM``): as documented, as processes.

``python -m tl_aot capture -o REC -- python -m pytest -n 2 SUITE`` records every kernel the
workers ask for, once; a header from TileLang's include path is named by release, not copied;
a kernel that cannot be recorded is named and fails the capture (``--keep-going``: listed only);
``capture --serve LIB`` lowers only what LIB lacks and still records everything, and on another
GPU model (``--device H200``) captures what a workload choosing its kernels by model asks for there.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from support.helpers import KERNELS, ok, tl_aot_cli, tl_aot_here

pytest.importorskip("tilelang")
pytest.importorskip("xdist")

FILES = ("tileops_shapes.py", "tileops_suite.py")
#: A workload of three kernels: one plain, one whose SCALE_FACTOR a test edits, one with TileLang's header.
THREE = "import tileops_shapes as o; o.shift(256)(); o.scale(256)(); o.header_scale(256)()"
LOST = "; o.lost_header(256)()"
#: A kernel chosen by the GPU's model: ``shift`` on an H100 (THREE asks for it too), another on an H200.
BY_MODEL = "import tileops_shapes as o; o.by_model(256)()"


def _capture(cwd: Path, record: Path, *cmd: str, flags=(), device: str = "H100-SXM"):
    return tl_aot_cli("capture", "-o", record, "--device", device, *flags, "--", sys.executable, *cmd, cwd=cwd)


@pytest.fixture
def suite(tmp_path) -> Path:
    for name in FILES:
        shutil.copy(KERNELS / name, tmp_path / name)
    return tmp_path


def test_pytest_xdist_workers_capture_into_one_record(suite):
    """Every kernel once; the one that cannot be recorded named (kernel and header) and failing the capture."""
    record = suite / "rec.json"
    proc = _capture(suite, record, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "tileops_suite.py")
    assert proc.returncode == 1, proc.stderr  # the suite passed, but a kernel is missing from the record
    assert "lost_header" in proc.stderr and "'tl_aot_test_no_such_header.h' (-include), found in none of" in proc.stderr
    assert "Traceback" not in proc.stderr and "1 not recorded" in proc.stdout
    assert "9 passed" in proc.stdout and "8 kernels" in proc.stdout and "(8 new)" in proc.stdout
    assert "3 process(es)" in proc.stdout  # pytest's controller and its two workers
    assert "8 lowered for their device code" in proc.stdout  # each kernel lowered by one worker, not by each that met it
    kernels = json.loads(record.read_text())["kernels"]
    names = sorted(o["jit"].rsplit(".", 3)[1] for k in kernels.values() for o in k["origins"][:1])
    assert names == ["header_scale"] * 2 + ["scale"] * 3 + ["shift"] * 3
    assert all(k["device_code"]["sm_90a"]["sha256"] for k in kernels.values())
    assert all(k["compile_s"] > 0 for k in kernels.values())  # how long each took to lower: the build's lowering order
    header = [k for k in kernels.values() if k["options"]["compile_flags"]]
    assert len(header) == 2
    for k in header:  # TileLang's header: named by release and digest, never copied into the record
        assert k["headers"] == {}
        (info,) = k["tilelang_headers"].values()
        assert info["path"] == "tl_templates/cuda/common.h" and info["tilelang"] and len(info["sha256"]) == 64
    assert not (suite / "rec.json.parts").exists()


def test_capture_serve_lowers_only_what_the_library_lacks_and_records_everything(suite, cache_dir):
    first = suite / "first.json"
    ok(_capture(suite, first, "-c", THREE))
    ok(tl_aot_here("build", "--capture", first, "--arch", "90a", "--name", "ops", "-o", suite / "lib", "-q", "--cache-dir", cache_dir))
    factor = suite / "tileops_shapes.py"
    factor.write_text(factor.read_text().replace("SCALE_FACTOR = 2.0", "SCALE_FACTOR = 3.0"))  # one kernel changes
    second = suite / "second.json"
    proc = ok(_capture(suite, second, "-c", THREE + LOST, flags=("--serve", suite / "lib", "--keep-going")))
    assert "3 kernels in" in proc.stdout and "1 not recorded" in proc.stdout and "lost_header" in proc.stderr
    assert "2 served from" in proc.stdout and "1 lowered for their device code" in proc.stdout
    old, new = json.loads(first.read_text())["kernels"], json.loads(second.read_text())["kernels"]
    assert len(set(old) & set(new)) == 2  # the unchanged two, by the same keys
    for key in set(old) & set(new):  # recorded whole (a build from this record builds them), proved by the library's digest
        assert new[key]["ir"] == old[key]["ir"]
        assert new[key]["device_code"]["sm_90a"] == {**new[key]["device_code"]["sm_90a"], "from": "served from libops.so"}
        assert new[key]["device_code"]["sm_90a"]["sha256"] == old[key]["device_code"]["sm_90a"]["sha256"]
        assert "compile_s" not in new[key] and old[key]["compile_s"] > 0  # served: nothing compiled, no time to record
    # A workload that chooses its kernel by GPU model (TileOPs' H200-only GQA kernel): the H100's library holds the
    # kernel an H100 asks for, not the one an H200 asks for. On the H200 (here its profile) `capture --serve` serves
    # nothing, lowers that one kernel and records it under the H200's name: a build from this record serves the H200.
    from tl_aot import load

    assert load(suite / "lib" / "libops.so").index.captured_on == ("NVIDIA H100 80GB HBM3",)  # what a miss names
    assert ok(tl_aot_here("inspect", suite / "lib" / "libops.so")).stdout.count("  captured on NVIDIA H100 80GB HBM3\n") == 3
    h200 = suite / "h200.json"
    proc = ok(_capture(suite, h200, "-c", BY_MODEL, flags=("--serve", suite / "lib"), device="H200"))
    assert "1 kernels in" in proc.stdout and "0 served from" in proc.stdout and "1 lowered for their device code" in proc.stdout
    [(key, item)] = json.loads(h200.read_text())["kernels"].items()
    assert key not in old and item["origins"][0]["jit"].endswith("shift_wide.<locals>.kernel")
    assert item["devices"] == [{"arch": "sm_90a", "name": "NVIDIA H200"}]
