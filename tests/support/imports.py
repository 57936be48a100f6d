"""What a ``python -m tl_aot`` process imports, read from ``-X importtime``: for tests that a command stays light.

``import tvm_ffi`` imports torch (over a second of CPU), and TileLang imports both: a command that
never loads a library or lowers a kernel has no reason to pay for either, and every test that runs
it as a process pays what it imports.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .helpers import child_env, run

__all__ = ["HEAVY", "tl_aot_imports"]

#: The packages a light command must not import.
HEAVY = frozenset({"torch", "tvm_ffi", "tilelang"})


def tl_aot_imports(*args, cwd: Path | str | None = None, env: dict | None = None) -> tuple[subprocess.CompletedProcess, set[str]]:
    """``python -X importtime -m tl_aot ARGS`` in a child: the process, and the top-level packages it imported.

    ``env``: default :func:`~support.helpers.child_env` with the checkout first on ``PYTHONPATH``.
    """
    env = child_env(checkout_first=True) if env is None else env
    proc = run([sys.executable, "-X", "importtime", "-m", "tl_aot", *map(str, args)], cwd, env)
    names = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "tl_aot.frontends.cli" in names, proc.stderr[-2000:]  # the imports were listed
    return proc, {n.split(".")[0] for n in names}
