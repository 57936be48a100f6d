"""Capture is faithful: a swizzled GEMM and a flash-attention backward captured on an H100 profile build from the record
into the kernels the direct build makes (same request key, same device code); a kernel that cannot be built fails the
build by name unless --keep-going, which records what it left out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.helpers import ok as _ok
from support.helpers import tl_aot_cli

pytest.importorskip("tilelang")

KERNELS = Path(__file__).parents[1] / "kernels"
WORKLOAD = f"""
import sys
sys.path.insert(0, {str(KERNELS)!r})
import tilelang
import faithful

tilelang.compile(faithful.gemm_swizzled(), out_idx=[-1])
faithful.flashattn_bwd(1, 2, 256, 64)
"""


def _tl_aot(*args, cwd, ok=True) -> subprocess.CompletedProcess:
    proc = tl_aot_cli(*args, cwd=cwd)
    return _ok(proc) if ok else proc


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("faithful")
    (work / "script.py").write_text(WORKLOAD)
    path = work / "faithful.capture.json"
    out = _tl_aot("capture", "-o", path, "--device", "H100-SXM", "--", sys.executable, "script.py", cwd=work)
    assert "2 kernels" in out.stdout and "warning" not in out.stderr, out.stderr
    return path


@pytest.fixture(scope="module")
def built(record, cache_dir) -> dict:
    out = record.parent / "lib"
    args = ["--capture", record, "--arch", "90a", "--name", "faithful", "-o", out, "--cache-dir", cache_dir, "-j", "2", "-q"]
    _tl_aot("build", *args, cwd=out.parent)
    man = json.loads(_tl_aot("inspect", "--json", out / "libfaithful.so", cwd=out).stdout)
    return {e["capture_key"]: e for e in man["entries"]}


def _direct(function: str, **kwargs):
    """What the direct build of the same call lowers (request key and device code digest), in this process."""
    from tl_aot.common.arch import parse_arch
    from tl_aot.lower.lower import lower_variant
    from tl_aot.spec import KernelSpec

    spec = KernelSpec.create(name=function, source=KERNELS / "faithful.py", function=function, archs=["90a"], **kwargs)
    return lower_variant(spec, parse_arch("90a"))


def test_the_record_is_faithful_and_holds_the_device_code_of_each_kernel(record):
    kernels = json.loads(record.read_text())["kernels"]
    assert len(kernels) == 2
    for item in kernels.values():
        assert "unfaithful" not in item
        assert "tl.Layout" in item["ir"]
        code = item["device_code"]["sm_90a"]
        assert len(code["sha256"]) == 24 and code["from"] == "lowered at capture"


def test_the_captured_build_is_the_direct_build(record, built):
    gemm = _direct("gemm_swizzled", out_idx=(-1,))
    bwd = _direct("flashattn_bwd", args={"batch": 1, "heads": 2, "seq_len": 256, "dim": 64})
    assert sorted(built) == sorted([gemm.request_key, bwd.request_key])
    for direct in (gemm, bwd):
        variant = built[direct.request_key]["variants"][0]
        assert variant["device_code"] == direct.device_code != ""
        assert variant["request_key"] == direct.request_key
    kernels = json.loads(record.read_text())["kernels"]
    assert kernels[bwd.request_key]["device_code"]["sm_90a"]["sha256"] == bwd.device_code


def test_a_kernel_that_does_not_build_fails_the_build_by_name_unless_keep_going(record, built, cache_dir, tmp_path):
    data = json.loads(record.read_text())
    bad_key = next(k for k, item in data["kernels"].items() if item["name"] == "flash_bwd")
    data["kernels"][bad_key]["device_code"]["sm_90a"]["sha256"] = "0" * 24  # the JIT made other code
    broken = tmp_path / "broken.capture.json"
    broken.write_text(json.dumps(data))
    common = ["--capture", broken, "--arch", "90a", "--name", "partial", "--cache-dir", cache_dir, "-j", "2", "-q"]

    failed = _tl_aot("build", *common, "-o", tmp_path / "strict", cwd=tmp_path, ok=False)
    assert failed.returncode == 1
    err = failed.stderr
    assert "1 of 2 variant(s) of libpartial.so failed to build; nothing was written" in err
    assert f"flashattn_bwd_{bad_key[:10]} (sm_90a)" in err and "[from faithful.flashattn_bwd(" in err
    assert "LoweringError: " not in err and "digest" in err
    assert not (tmp_path / "strict" / "libpartial.so").exists()

    kept = _tl_aot("build", *common, "--keep-going", "-o", tmp_path / "kept", cwd=tmp_path)
    assert f"left out 1 variant(s) (--keep-going):\n  flashattn_bwd_{bad_key[:10]} (sm_90a)" in kept.stderr
    lib = tmp_path / "kept" / "libpartial.so"
    man = json.loads(_tl_aot("inspect", "--json", lib, cwd=tmp_path).stdout)
    assert [e["capture_key"] for e in man["entries"]] == [k for k in built if k != bad_key]
    (left,) = man["left_out"]
    assert left["entry"] == f"flashattn_bwd_{bad_key[:10]}" and left["arch"] == "sm_90a"
    assert "not the code the JIT generated" in left["error"] and left["origin"].startswith("faithful.flashattn_bwd(")
    text = _tl_aot("inspect", lib, cwd=tmp_path).stdout
    assert "LEFT OUT by a --keep-going build: 1 variant(s)" in text
