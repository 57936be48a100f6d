"""Tune on the GPU, then build from the record as a CPU-only build would: the library runs at the tuned speed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.helpers import tl_aot_cli

torch = pytest.importorskip("torch")
pytest.importorskip("tilelang")

pytestmark = pytest.mark.gpu

KERNELS = Path(__file__).parents[1] / "kernels"


def test_tune_then_build_from_the_record(tmp_path):
    spec = tmp_path / "ops.toml"
    spec.write_text(
        '[library]\nname = "tuned_ops"\narchs = ["90a"]\n'
        f'[[entry]]\nname = "flash_fwd"\nsource = "{KERNELS / "conformance" / "flash_fwd_autotune.py"}"\nfunction = "flash_fwd"\n'
        "args = { batch = 2, heads = 8, seq_len = 1024, dim = 128 }\n"
        f'[[entry]]\nname = "rms_norm"\nsource = "{KERNELS / "specialised.py"}"\nfunction = "rms_norm"\nargs = {{ N = 4096 }}\n'
        "out_idx = [-1]\ntune = [{ threads = 128 }, { threads = 256 }, { threads = 512 }, { threads = 1024 }]\n"
    )
    cache = tmp_path / "cache"
    tune = tl_aot_cli("tune", "--spec", spec, "--dim", "m=8192", "--cache-dir", cache, env=dict(os.environ))
    assert tune.returncode == 0, tune.stdout[-3000:] + tune.stderr[-3000:]
    record = json.loads((tmp_path / "ops.tune.json").read_text())
    items = {i["entry"]: i for i in record["items"]}
    assert set(items) == {"flash_fwd", "rms_norm"}
    assert all(len(i["candidates"]) == 4 and i["gpu"] == torch.cuda.get_device_name(0) for i in items.values())
    assert all(i["ms"] == min(c["ms"] for c in i["candidates"] if c["ms"] is not None) for i in items.values())

    out = tmp_path / "build"  # the record is found next to the spec: no --tune-file needed
    build = tl_aot_cli("build", "--spec", spec, "-o", out, "--cache-dir", cache, env=dict(os.environ))
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    assert "tuning record ops.tune.json: configs for 2 of 2 entries" in build.stdout
    import tl_aot

    lib = tl_aot.load(out / "libtuned_ops.so")
    for name, item in items.items():
        v = lib.signature(name).variants[0]
        assert v.config_source.startswith(f"record ({item['gpu']}")
        assert dict(v.config) == dict(item["chosen"])
    x = torch.randn(8192, 4096, device="cuda", dtype=torch.float16)
    w = torch.randn(4096, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    for _ in range(20):
        lib.rms_norm(x, w, y)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(100):
        lib.rms_norm(x, w, y)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / 100
    assert 0.85 <= ms / items["rms_norm"]["ms"] <= 1.15, (ms, items["rms_norm"]["ms"])
