"""tl_aot's own wheel, installed without the checkout: every file it tracks ships, every module imports from the install.

Every other test runs tl_aot from its checkout (an editable install), where a package the
project's metadata forgets is still importable. A user's ``pip install`` is not: the served
TileOPs suite on the GPU machine stopped at ``No module named 'tl_aot.call_keys'`` when the
metadata listed its packages by hand and a new wing was not added to the list.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.helpers import ROOT, child_env, run_ok
from support.own_dists import own_dists

#: Imports every tl_aot module from the folder given, refusing one found elsewhere; prints how many.
_IMPORT_ALL = """
import importlib, pkgutil, sys
import tl_aot
where = sys.argv[1]
assert tl_aot.__file__.startswith(where), tl_aot.__file__
names = [m.name for m in pkgutil.walk_packages(tl_aot.__path__, "tl_aot.") if not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
stray = sorted(k for k, m in sys.modules.items() if k.startswith("tl_aot") and not (m.__file__ or where).startswith(where))
assert not stray, stray
print(len(names))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The checkout built as the release workflow builds it: an sdist, then the wheel from it (:func:`own_dists`)."""
    return own_dists(tmp_path_factory.mktemp("own"), child_env())[1]


def test_every_tracked_file_ships(wheel):
    tracked = subprocess.run(["git", "ls-files", "tl_aot"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert len(tracked) > 150, tracked  # the listing read the package, not an empty folder
    shipped = set(zipfile.ZipFile(wheel).namelist())
    missing = [path for path in tracked if path not in shipped]
    assert not missing, f"{len(missing)} of {len(tracked)} tracked files of tl_aot/ are not in {wheel.name}: {missing[:12]}"


def test_every_module_imports_from_the_install(wheel, tmp_path):
    target = tmp_path / "site"
    run_ok([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", target, wheel], env=child_env())
    # From a folder outside the checkout, the install first on the path: the editable finder never answers.
    env = child_env(PYTHONPATH=str(target))
    proc = run_ok([sys.executable, "-c", _IMPORT_ALL, str(target)], cwd=tmp_path, env=env)
    modules = int(proc.stdout.split()[-1])
    packages = {p.parent for p in (ROOT / "tl_aot").rglob("__init__.py")}
    top = ROOT / "tl_aot" / "__init__.py"  # imported as tl_aot itself, not walked
    sources = [p for p in (ROOT / "tl_aot").rglob("*.py") if p.parent in packages and p.name != "__main__.py" and p != top]
    assert modules == len(sources) > 150, (modules, len(sources))
    version = run_ok([sys.executable, "-m", "tl_aot", "--version"], cwd=tmp_path, env=env)
    assert version.stdout.strip(), version
