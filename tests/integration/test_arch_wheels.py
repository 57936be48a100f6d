"""Per-arch wheels, built for real: tests/packages/arch_wheels (image_packs=True), split, installed in a fresh venv.

The documented commands run as processes: ``python -m build --wheel`` then ``python -m tl_aot
split-wheel dist/*.whl``. In a venv holding only apache-tvm-ffi, the base wheel with one arch's
wheel loads; the arch it lacks is reported with the ``pip install`` that brings it, and a pack of
another build put in its place is refused. No GPU: the check the first call makes is run through
the library's ``tl_aot_check_images`` export, the same code path.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest
from support.helpers import child_env, ok, run_ok, tl_aot_cli
from support.venvs import fresh_venv, pip_into

pytest.importorskip("tilelang")

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tests" / "packages" / "arch_wheels"

_CHECK = """
import json, pathlib, sys, tvm_ffi
import tl_packs
lib = pathlib.Path(tl_packs.__file__).with_name("lib_kernels.so")
check = tvm_ffi.load_module(str(lib))["tl_aot_check_images"]
print(json.dumps({a: str(check(a)) for a in sys.argv[1:]}))
"""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory, cache_dir):
    """The package's wheel, built and split as docs/wheels.md says: {base, sm80, sm90a} -> path."""
    src = tmp_path_factory.mktemp("arch_wheels") / "arch_wheels"
    shutil.copytree(PACKAGE, src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "*.so", "_kernels.py"))
    env = child_env(cache_dir)
    run_ok([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", "dist"], src, env)
    (built,) = (src / "dist").glob("*.whl")
    ok(tl_aot_cli("split-wheel", built, cwd=src, env=env))
    found = {p.name.split("-")[0]: p for p in (src / "dist").glob("*.whl")}
    return {"base": found["tl_packs"], "sm80": found["tl_packs_sm80"], "sm90a": found["tl_packs_sm90a"]}


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def test_split_puts_each_arch_in_its_own_wheel_and_offers_it_as_an_extra(wheels):
    assert not [n for n in _names(wheels["base"]) if n.endswith(".tlpack")]
    assert "tl_packs/lib_kernels.so" in _names(wheels["base"])
    assert [n for n in _names(wheels["sm80"]) if n.endswith(".tlpack")] == ["tl_packs/lib_kernels.sm_80.tlpack"]
    assert [n for n in _names(wheels["sm90a"]) if n.endswith(".tlpack")] == ["tl_packs/lib_kernels.sm_90a.tlpack"]
    with zipfile.ZipFile(wheels["base"]) as z:
        meta = z.read("tl_packs-0.1.0.dist-info/METADATA").decode()
    assert "Provides-Extra: sm90a" in meta
    assert 'Requires-Dist: tl-packs-sm90a==0.1.0; extra == "sm90a" or extra == "all"' in meta


def test_a_missing_arch_names_its_wheel_and_a_pack_of_another_build_is_refused(wheels, tmp_path):
    python = fresh_venv(tmp_path / "venv", os.environ.copy())
    pin = tmp_path / "constraints.txt"  # the tvm-ffi the library was built with
    pin.write_text(f"apache-tvm-ffi=={importlib.metadata.version('apache-tvm-ffi')}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PIP_CONSTRAINT", "PIP_BUILD_CONSTRAINT", "PYTHONPATH")}
    run_ok(pip_into(python, "install", "-q", "-c", pin, wheels["base"], wheels["sm80"]), tmp_path, env)
    names = {d["name"] for d in json.loads(run_ok(pip_into(python, "list", "--format=json"), tmp_path, env).stdout)}
    assert "tl_aot" not in names and "tilelang" not in names

    def check() -> dict:
        return json.loads(run_ok([python, "-c", _CHECK, "sm_80", "sm_90a"], tmp_path, env).stdout)

    got = check()
    assert got["sm_80"] == ""
    assert "lib_kernels.sm_90a.tlpack, which is not installed" in got["sm_90a"]
    assert "pip install 'tl-packs-sm90a==0.1.0'" in got["sm_90a"]

    run_ok(pip_into(python, "install", "-q", "--no-deps", wheels["sm90a"]), tmp_path, env)
    assert check() == {"sm_80": "", "sm_90a": ""}

    # the sm_90a pack replaced by one of another build (another record or toolchain: another build id)
    from tl_aot.pipeline.image_packs import _pack, read_pack

    site = run_ok([python, "-c", "import tl_packs, os; print(os.path.dirname(tl_packs.__file__))"], tmp_path, env).stdout.strip()
    pack = Path(site) / "lib_kernels.sm_90a.tlpack"
    held = read_pack(pack.read_bytes())
    pack.write_bytes(_pack(held.label, bytes(32), {bytes.fromhex(d): b for d, b in held.images.items()}))
    refused = check()["sm_90a"]
    assert "belongs to another build" in refused and "none of its images is loaded" in refused
