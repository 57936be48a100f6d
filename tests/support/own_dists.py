"""tl_aot's own sdist and wheel, built as the release workflow builds them, from a copy of the checkout's files.

A copy of what git tracks or would track, not the checkout itself: setuptools reuses a
checkout's ``build/lib`` and ``tl_aot.egg-info/SOURCES.txt``, where a package an earlier build
copied hides one the metadata now leaves out. ``--no-isolation``: the tests have no index.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from .helpers import ROOT, run_ok

__all__ = ["own_dists"]


def own_dists(tmp: Path, env: dict) -> tuple[Path, Path]:
    """(sdist, wheel) of this checkout, built in ``tmp`` (the copy in ``tmp/tree``, the files in ``tmp/dist``)."""
    tree, out = tmp / "tree", tmp / "dist"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in listed.stdout.splitlines():
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    run_ok([sys.executable, "-m", "build", "-q", "--no-isolation", "--outdir", out, tree], env=env)
    (sdist,) = out.glob("tl_aot-*.tar.gz")
    (wheel,) = out.glob("tl_aot-*.whl")
    return sdist, wheel
