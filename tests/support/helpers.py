"""What the tests share: a clean environment for child processes, running them, and reading their verdicts.

Imported as ``from support.helpers import ...`` (``tests/`` is on ``sys.path`` through pytest's ``pythonpath``).
One copy of each helper, so a change to how tests run tools (an environment variable they must not
inherit, how a failure is shown) is made once.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

__all__ = [
    "ROOT",
    "KERNELS",
    "ADD_KERNEL",
    "child_env",
    "run",
    "run_ok",
    "tl_aot_argv",
    "tl_aot_cli",
    "tl_aot_here",
    "ok",
    "fails",
]

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "tests" / "kernels"

#: Settings of the developer's shell that would change what a test builds or installs.
_INHERITED_SETTINGS = ("TL_AOT_ARCHS", "MAX_JOBS", "PIP_CONSTRAINT", "PIP_BUILD_CONSTRAINT")


def child_env(cache_dir: Path | str | None = None, *, checkout_first: bool = False, drop=(), **extra: str) -> dict:
    """``os.environ`` without the settings that change a build, with ``TL_AOT_CACHE_DIR`` = ``cache_dir`` (or unset), and ``extra``.

    ``drop`` names more variables to remove (``CUDA_HOME`` for a test without nvcc).
    ``checkout_first`` puts the checkout first on ``PYTHONPATH``, so a child ``python -m tl_aot`` run
    from any folder imports this tl_aot (never for a test of what an install or venv provides).
    """
    env = {k: v for k, v in os.environ.items() if k not in (*_INHERITED_SETTINGS, "TL_AOT_CACHE_DIR", *drop)}
    env["PYTHONUNBUFFERED"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if checkout_first:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    if cache_dir is not None:
        env["TL_AOT_CACHE_DIR"] = str(cache_dir)
    env.update(extra)
    return env


def run(cmd: list, cwd: Path | str | None = None, env: dict | None = None, *, timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run ``cmd`` (an argument list, never a shell; paths may be ``Path``) and return it, whatever its exit status.

    ``env`` None: this process's environment as it is (:func:`child_env` makes a clean one).
    """
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def run_ok(cmd: list, cwd: Path | str | None = None, env: dict | None = None, *, timeout=None) -> subprocess.CompletedProcess:
    """:func:`run`, failing the test with the command's exit status and both its output streams unless it exits 0."""
    return ok(run(cmd, cwd, env, timeout=timeout))


def tl_aot_argv(*args) -> list[str]:
    """``python -m tl_aot ARGS`` as an argument list: for a process a test starts itself (killed, raced) or hands to another tool."""
    return [sys.executable, "-m", "tl_aot", *map(str, args)]


def tl_aot_cli(*args, cwd: Path | str | None = None, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """``python -m tl_aot ARGS`` in a child process (for what only a process shows: exit status, streams, no traceback).

    ``cwd``: default the checkout; ``env``: default :func:`child_env` with the checkout first on ``PYTHONPATH``.
    """
    env = child_env(checkout_first=True) if env is None else env
    return run(tl_aot_argv(*args), cwd or ROOT, env, timeout=timeout)


def tl_aot_here(*args, cwd: Path | str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m tl_aot ARGS`` run in this process, its exit status and both streams as a child's would be.

    For tests of what a command builds or prints: TileLang is imported once per session instead of
    once per command (4 s each). Tests of the process itself (exit status of a crash, no traceback,
    what reaches each stream from a real process) use :func:`tl_aot_cli`. ``cwd``: the folder the
    command runs in; ``env``: the environment it sees (default :func:`child_env`).
    """
    from tl_aot.frontends.cli import main

    out, err = io.StringIO(), io.StringIO()
    env = child_env() if env is None else env
    with (
        mock.patch.dict(os.environ, env, clear=True),
        contextlib.chdir(cwd or os.getcwd()),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:  # argparse's errors, and commands that exit
            code = e.code if isinstance(e.code, int) else 1
    return subprocess.CompletedProcess(tl_aot_argv(*args), code, out.getvalue(), err.getvalue())


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """``proc``, after failing the test with its command, exit status and output unless it exited 0."""
    if proc.returncode != 0:
        cmd = " ".join(map(str, proc.args))
        pytest.fail(f"{cmd}\nexited with {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
    return proc


def fails(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """The command failed with exit status 1 and one tl_aot error (no traceback) containing every needle; returns stderr."""
    err = proc.stderr
    assert proc.returncode == 1, f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{err}"
    assert "tl_aot: error:" in err and "Traceback" not in err, err
    for n in needles:
        assert n in err, f"{n!r} not in:\n{err}"
    return err


#: A one-kernel file (``add(N)``: Y = X + 1) for the builds of the file-system fault tests.
ADD_KERNEL = """import tilelang.language as T


def add(N=256):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] + 1.0

    return main
"""


@contextlib.contextmanager
def in_folder(folder: Path):
    """Run the body with ``folder`` as the working folder (``contextlib.chdir`` from Python 3.11 on), then go back."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def place_torch_glue(package: Path) -> None:
    """Put the torch glue into ``package`` beside a generated loader, as ``TileLangExtension`` ships it (``_tl_aot_torch/``)."""
    import shutil

    from tl_aot.codegen.render import TORCH_GLUE_MODULE
    from tl_aot.frontends.setuptools_files import GLUE

    (package / TORCH_GLUE_MODULE).mkdir()
    for name, source in GLUE.items():
        shutil.copy(source, package / TORCH_GLUE_MODULE / name)
