"""The tested TileLang range: one declaration, a one-time warning outside it, and the spelling every release takes."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from tl_aot.common import tilelang_compat
from tl_aot.common.tilelang_compat import INSTALL_HINT, NEWEST, OLDEST, TESTED_TILELANG, is_tested, warn_if_untested

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_declares_the_tested_range():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    # Every build extra (the compiler flavours) declares the tested TileLang range; `build` is one of them.
    for name in ("build-cu12", "build-cu13"):
        assert f"tilelang>={OLDEST},<={NEWEST}" in extras[name], name
    assert extras["build"] in (["tl_aot[build-cu12]"], ["tl_aot[build-cu13]"])
    assert INSTALL_HINT == f'pip install "tilelang>={OLDEST},<={NEWEST}"'
    assert TESTED_TILELANG == tuple(sorted(TESTED_TILELANG, key=lambda v: tuple(map(int, v.split(".")))))


def test_ci_runs_the_oldest_and_the_newest():
    ci = (ROOT / ".ci" / "run").read_text()
    assert f"tilelang=={OLDEST}" in ci  # the second venv; the first takes the newest the range allows


@pytest.mark.parametrize(
    ("version", "tested"), [("0.1.12", True), ("0.1.14.post1", True), ("0.1.15+cu130", True), ("0.1.16", False), ("0.1.11", False)]
)
def test_is_tested(version, tested):
    assert is_tested(version) is tested


def test_an_untested_tilelang_warns_once(monkeypatch):
    monkeypatch.setattr(tilelang_compat, "installed_version", lambda: "0.1.99")
    monkeypatch.setattr(tilelang_compat, "_warned", set())
    lines = []
    assert warn_if_untested(lines.append) == "0.1.99"
    warn_if_untested(lines.append)
    assert len(lines) == 1
    assert re.fullmatch(
        rf"warning: TileLang 0\.1\.99 is not a release tl_aot is tested with \(0\.1\.12, .*0\.1\.15\); {re.escape(INSTALL_HINT)}", lines[0]
    )
    monkeypatch.setattr(tilelang_compat, "installed_version", lambda: "0.1.98")
    with pytest.warns(UserWarning, match="TileLang 0.1.98 is not a release"):
        warn_if_untested()


def test_the_installed_tilelang_is_a_tested_one_and_says_nothing(monkeypatch):
    monkeypatch.setattr(tilelang_compat, "_warned", set())
    lines = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        version = warn_if_untested(lines.append)
    if version:
        assert is_tested(version) and lines == []
