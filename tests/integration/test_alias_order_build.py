"""A build from a record proves a kernel whose JIT process declared its tied workspaces in the other order.

TileLang orders two shared ``workspace`` aliases at one offset as its process's allocator placed them
(:mod:`tl_aot.capture.alias_order`); TileOPs' capture under 16 pytest-xdist workers recorded 6
kernels so, and the build refused them. Lowered here on the CPU (seconds): a two-sum row norm from
``tests/kernels/twin_reductions.py``, recorded with the digest of the other order.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("tilelang")

KERNELS = Path(__file__).parents[1] / "kernels"


def _reads(source: str) -> list[str]:
    """The workspace each block-wide reduction reads, in program order."""
    return [line.split("(float*)")[1].split(")")[0] for line in source.splitlines() if "AllReduce" in line]


@pytest.fixture(scope="module")
def lowered():
    """The row norm's prim_func as recorded (saved before lowering) and TileLang's source for it."""
    sys.path.insert(0, str(KERNELS))
    try:
        import twin_reductions
    finally:
        sys.path.remove(str(KERNELS))
    from tilelang import tvm

    from tl_aot.capture.device_code import lower
    from tl_aot.jit.ir_record import save_ir

    func = twin_reductions.row_norm(M=8, N=1024, threads=128)
    ir = save_ir(func)
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    with target:
        return ir, lower(func, target, {}).kernel_source


def _record(tmp_path: Path, ir: str, sha: str) -> Path:
    item = {
        "name": "main",
        "ir": ir,
        "options": {"backend": "cuda", "compile_flags": [], "out_idx": [2], "pass_configs": {}, "target": None},
        "devices": [{"arch": "sm_90a", "name": "NVIDIA H100 80GB HBM3"}],
        "origins": [{"jit": "twin_reductions.row_norm", "args": {"0": "1", "1": "128"}}],
        "headers": {},
        "device_code": {"sm_90a": {"sha256": sha, "tilelang": "0.1.15", "from": "JIT"}},
    }
    path = tmp_path / "record.json"
    path.write_text(json.dumps({"schema": 1, "kernels": {"ab" * 16: item}, "tunings": {}}))
    return path


def _build(record: Path):
    from tl_aot.capture.record_specs import specs_from_record
    from tl_aot.common.arch import parse_arch
    from tl_aot.lower.lower import lower_variant

    [spec] = specs_from_record(record, ["90a"])
    return lower_variant(spec, parse_arch("90a"))


def test_the_other_order_of_the_workspaces_is_built_as_the_jit_wrote_it(tmp_path, lowered):
    from tl_aot.capture.alias_order import alias_orders
    from tl_aot.capture.device_code import digest

    ir, source = lowered
    mine, jit = alias_orders(source)
    assert _reads(jit) == _reads(mine)[::-1]  # the JIT's process declared them the other way round
    variant = _build(_record(tmp_path, ir, digest(jit)))
    assert variant.device_code == digest(jit)
    assert _reads(variant.cuda_source) == _reads(jit)


def test_a_digest_of_neither_order_is_refused(tmp_path, lowered):
    from tl_aot.capture.device_code import digest
    from tl_aot.common.errors import LoweringError

    ir, source = lowered
    with pytest.raises(LoweringError, match="in each of the 2 orders of its tied shared-memory aliases"):
        _build(_record(tmp_path, ir, digest(source.replace("SumOp", "MaxOp"))))
