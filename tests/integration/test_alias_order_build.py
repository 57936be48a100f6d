"""A build from a record proves a kernel whose JIT process spelled its same-named workspaces another way.

TileLang orders two shared ``workspace`` aliases at one offset, and places two alive at once, as its
process's allocator put them (:mod:`tl_aot.capture.alias_order`); TileOPs' capture under 16
pytest-xdist workers recorded 6 kernels of the first kind and 2 of the second, and the build refused
them. Lowered here on the CPU (seconds): a two-sum row norm from ``tests/kernels/twin_reductions.py``
and two reductions in one loop from ``tests/kernels/loop_reductions.py``, each recorded with the
digest of the other spelling.
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


def _lowered(func) -> tuple[str, str]:
    """``func`` as recorded (saved before lowering) and TileLang's source for it."""
    from tilelang import tvm

    from tl_aot.capture.device_code import lower
    from tl_aot.jit.ir_record import save_ir

    ir = save_ir(func)
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    with target:
        return ir, lower(func, target, {}).kernel_source


def _kernels(name: str):
    sys.path.insert(0, str(KERNELS))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(KERNELS))


@pytest.fixture(scope="module")
def lowered():
    """The row norm: two workspaces at one offset."""
    return _lowered(_kernels("twin_reductions").row_norm(M=8, N=1024, threads=128))


@pytest.fixture(scope="module")
def placed():
    """The row stats: two workspaces alive at once, at two offsets."""
    return _lowered(_kernels("loop_reductions").row_stats(M=8, N=256, steps=4, threads=128))


def _record(tmp_path: Path, ir: str, sha: str, out: int = 2) -> Path:
    item = {
        "name": "main",
        "ir": ir,
        "options": {"backend": "cuda", "compile_flags": [], "out_idx": [out], "pass_configs": {}, "target": None},
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
    with pytest.raises(LoweringError, match="in each of the 2 spellings of its same-named shared-memory aliases"):
        _build(_record(tmp_path, ir, digest(source.replace("SumOp", "MaxOp"))))


def test_a_workspace_the_jit_placed_at_the_other_offset_is_built_as_the_jit_wrote_it(tmp_path, placed):
    from tl_aot.capture.alias_order import alias_families, alias_orders
    from tl_aot.capture.device_code import digest

    ir, source = placed
    [family] = alias_families(source)
    assert len(family.names) == 2 and len(set(family.offsets)) == 2  # not a tie at one offset: two offsets
    mine, jit = alias_orders(source)
    assert _reads(jit) == _reads(mine)[::-1]  # the sum's workspace where the max's was, and the other way round
    variant = _build(_record(tmp_path, ir, digest(jit), out=1))
    assert variant.device_code == digest(jit)
    assert _reads(variant.cuda_source) == _reads(jit)
