"""Kernels configured by a user's dataclass or NamedTuple, captured, built and served on the GPU: answered by call key, before any trace."""

from __future__ import annotations

import os
import re
import sys
import textwrap

import pytest
from support.helpers import run_ok, tl_aot_argv

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

KERNELS = """
from dataclasses import dataclass
from typing import NamedTuple

import tilelang
import tilelang.language as T


@dataclass(frozen=True)
class Config:
    threads: int = 128
    scale: float = 2.0


@dataclass(frozen=True, slots=True)
class Slotted:
    threads: int = 128
    shift: float = 1.0


class Tiling(NamedTuple):
    threads: int = 128
    offset: float = 3.0

    def blocks(self, n):
        return (n + self.threads - 1) // self.threads


def scaled(cfg):
    @tilelang.jit(out_idx=[-1])
    def kernel(N):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, cfg.threads), threads=cfg.threads) as bx:
                for i in T.Parallel(cfg.threads):
                    if bx * cfg.threads + i < N:
                        Y[bx * cfg.threads + i] = X[bx * cfg.threads + i] * cfg.scale

        return main

    return kernel


@tilelang.jit(out_idx=[-1])
def shifted(N, cfg):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, cfg.threads), threads=cfg.threads) as bx:
            for i in T.Parallel(cfg.threads):
                if bx * cfg.threads + i < N:
                    Y[bx * cfg.threads + i] = X[bx * cfg.threads + i] + cfg.shift

    return main


@tilelang.jit(out_idx=[-1])
def offset(N, tiling):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(tiling.blocks(N), threads=tiling.threads) as bx:
            for i in T.Parallel(tiling.threads):
                if bx * tiling.threads + i < N:
                    Y[bx * tiling.threads + i] = X[bx * tiling.threads + i] - tiling.offset

    return main
"""

WORKLOAD = """
import sys

import torch

import kernels

x = torch.arange(1000, dtype=torch.float32, device="cuda")
out = {
    "scaled_128": kernels.scaled(kernels.Config())(1000)(x),
    "scaled_64": kernels.scaled(kernels.Config(threads=64, scale=3.0))(1000)(x),
    "shifted": kernels.shifted(1000, kernels.Slotted(shift=0.5))(x),
    "offset": kernels.offset(1000, kernels.Tiling(threads=64))(x),
}
torch.save({k: v.cpu() for k, v in out.items()}, sys.argv[1])
"""


def test_dataclass_and_namedtuple_configured_kernels_are_served_by_call_key_with_no_trace(tmp_path, cache_dir):
    pytest.importorskip("tilelang")
    (tmp_path / "kernels.py").write_text(textwrap.dedent(KERNELS))
    (tmp_path / "workload.py").write_text(textwrap.dedent(WORKLOAD))
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp_path / "jit-cache"))
    record = tmp_path / "rec.json"
    out = run_ok(tl_aot_argv("capture", "-o", record, "--", sys.executable, "workload.py", tmp_path / "jit.pt"), tmp_path, env)
    assert "4 kernels" in out.stdout, out.stdout + out.stderr
    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}{minor}{'a' if major >= 9 else ''}"
    run_ok(tl_aot_argv("build", "--capture", record, "--arch", arch, "-o", tmp_path / "lib", "--cache-dir", cache_dir, "-q"), tmp_path)
    served_cache = tmp_path / "served-cache"
    served_cache.mkdir()
    env = dict(os.environ, TILELANG_CACHE_DIR=str(served_cache))
    cmd = [*tl_aot_argv("run", "--serve", tmp_path / "lib", "--strict", "--"), sys.executable, "workload.py", tmp_path / "served.pt"]
    served = run_ok(cmd, tmp_path, env)
    line = next(ln for ln in served.stderr.splitlines() if ln.startswith("tl_aot serve"))
    assert "4 served, 0 compiled by the JIT, 0 refused" in line, line
    assert re.search(r"\b4 kernels served before TileLang traced them", line), line  # every call answered by its call key
    jit, got = torch.load(tmp_path / "jit.pt"), torch.load(tmp_path / "served.pt")
    assert sorted(jit) == sorted(got)
    for name in jit:
        assert torch.equal(jit[name], got[name]), name
    assert not [p for p in served_cache.rglob("*") if p.is_file()], "a compile happened while serving"
