"""A user's project captured, built for this GPU and served strictly, as its edit-and-rebuild cycle runs (GPU tests).

Each step is the command a user types, run as a process in the project's folder: ``capture`` of
its ``workload.py`` (``--serve`` the library it has, for an incremental capture), ``build`` of the
records into ``lib/lib<name>.so``, and ``run --serve lib --strict`` of the workload.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from support.helpers import run, run_ok, tl_aot_argv

__all__ = ["ServedProject", "gpu_arch", "serve_line"]


def gpu_arch() -> str:
    """This GPU's arch as ``--arch`` takes it (``90a`` on an H100/H200, ``80`` on an A100)."""
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"{major}{minor}{'a' if major >= 9 else ''}"


def serve_line(proc: subprocess.CompletedProcess) -> str:
    """The ``tl_aot serve`` exit line a served process printed."""
    return next(ln for ln in proc.stderr.splitlines() if ln.startswith("tl_aot serve"))


@dataclass(frozen=True)
class ServedProject:
    """The project in ``root`` (its ``workload.py`` and kernels), its library named ``name``, variants in ``cache_dir``."""

    root: Path
    name: str
    cache_dir: Path

    @property
    def library(self) -> Path:
        return self.root / "lib" / f"lib{self.name}.so"

    def _env(self) -> dict[str, str]:
        return dict(os.environ, TILELANG_CACHE_DIR=str(self.root / "jit-cache"))

    def capture(self, record: Path, *, serve: bool = False) -> subprocess.CompletedProcess:
        """``capture -o record -- python workload.py``; ``serve``: ``--serve`` the library (only what it lacks compiled)."""
        served = ("--serve", self.library) if serve else ()
        return run_ok(tl_aot_argv("capture", *served, "-o", record, "--", sys.executable, "workload.py"), self.root, self._env())

    def build(self, *records: Path) -> None:
        """``build --capture R ...`` for this GPU's arch into ``lib/``."""
        captures = [a for r in records for a in ("--capture", r)]
        out = ("--name", self.name, "-o", self.library.parent, "--cache-dir", self.cache_dir, "-q")
        run_ok(tl_aot_argv("build", *captures, "--arch", gpu_arch(), *out), self.root)

    def serve(self, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """``run --serve lib --strict -- python workload.py`` (with ``env`` added), whatever its exit status."""
        argv = tl_aot_argv("run", "--serve", self.library.parent, "--strict", "--", sys.executable, "workload.py")
        return run(argv, self.root, {**self._env(), **(env or {})})
