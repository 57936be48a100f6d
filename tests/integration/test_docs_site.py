"""The documentation site builds with broken links failing: ``mkdocs build --strict`` (pip install -e ".[docs]").

About 2 s on the 2-core machine; the docs extra installs in about 6 s (.ci/run installs it).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_strict_and_every_page_is_in_the_nav(tmp_path):
    pytest.importorskip("mkdocs", reason='the docs extra: pip install -e ".[docs]"')
    pytest.importorskip("material", reason='the docs extra: pip install -e ".[docs]"')
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert 'not included in the "nav"' not in proc.stderr, proc.stderr  # every page reachable from the menu
    for page in ("reference/environment", "guide/clusters", "install"):
        assert (tmp_path / "site" / page / "index.html").is_file()
