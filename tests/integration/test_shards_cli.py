"""The README's sharded CI build, run as processes exactly as the README spells its commands.

``python -m tl_aot build --spec kernels.toml --shard K/4 -o part`` on four "machines" (each its own
folder and local cache, the shared cache of the README's ``TL_AOT_CACHE_URL``), the parts
downloaded as ``part-K/``, then ``python -m tl_aot link part-*/ -o build/``: every command exits 0
without a traceback, each shard counts the variants it took from the shared cache right, and the
library and header are a one-machine build's bytes. One small kernel for two archs: shards 3 and 4
of the README's four hold no variant. The one-machine build fills the shared cache, so no variant
is lowered twice (that shards and cluster workers make a local build's bytes is
``test_cluster_cpu.py``'s).
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from support.builds import with_runtime
from support.helpers import ROOT, child_env, fails, ok, run_ok, tl_aot_cli

pytest.importorskip("tilelang")
pytest.importorskip("fsspec")

KERNEL = ROOT / "tests" / "kernels" / "elementwise.py"

SPEC = f"""
[library]
name = "add_one"
archs = ["80", "90a"]

[[entry]]
name = "add_one"
source = "{KERNEL.as_posix()}"
function = "add_one"
"""


def _readme_commands() -> tuple[str, list[str]]:
    """The docs' CI shard command (``${{ matrix.shard }}`` in it) and link command (an argument list), after ``python -m tl_aot``.

    The CI matrix example lives in the guide's page on CI and clusters (it left the README with the docs site).
    """
    text = (ROOT / "docs" / "guide" / "clusters.md").read_text()
    build = re.search(r"- run: python -m tl_aot (build --spec kernels\.toml --shard \$\{\{ matrix\.shard \}\}/4 -o part)\n", text)
    link = re.search(r"- run: python -m tl_aot (link part-\*/ -o build/)\n", text)
    assert build and link, "the CI example of docs/guide/clusters.md changed: update this test with it"
    return build.group(1), link.group(1).split()


def test_the_readme_sharded_ci_build_links_into_the_one_machine_library(tmp_path, session_runtime):
    build_cmd, link_cmd = _readme_commands()
    shared = (tmp_path / "shared").as_uri()
    (tmp_path / "onebox").mkdir()
    (tmp_path / "onebox" / "kernels.toml").write_text(SPEC)
    # the one-machine build is the reference: its cache starts with the launcher runtime's object (the toolchain's alone;
    # shards never link, and the link below, run as the docs write it, compiles its own)
    env = child_env(with_runtime(tmp_path / "onebox-cache", session_runtime), TL_AOT_CACHE_URL=shared)
    ok(tl_aot_cli("build", "--spec", "kernels.toml", "-o", "build/", cwd=tmp_path / "onebox", env=env))

    downloads = tmp_path / "library"
    downloads.mkdir()
    for k in (1, 2, 3, 4):
        job = tmp_path / f"job{k}"
        job.mkdir()
        (job / "kernels.toml").write_text(SPEC)
        args = build_cmd.replace("${{ matrix.shard }}", str(k)).split()
        proc = ok(tl_aot_cli(*args, cwd=job, env=child_env(TL_AOT_CACHE_URL=shared)))  # its own local cache: part/.tl_aot/cache
        assert "Traceback" not in proc.stdout + proc.stderr
        held = 1 if k <= 2 else 0
        assert f"shard {k}/4 of add_one: {held} of 2 variants (0 to build)" in proc.stdout, proc.stdout
        if held:
            assert f"1 of 1 variant(s) from the shared cache {shared}" in proc.stdout, proc.stdout
        else:
            assert "from the shared cache" not in proc.stdout, proc.stdout
        shutil.copytree(job / "part", downloads / f"part-{k}")  # what upload-artifact / download-artifact carry

    parts = [p.name + "/" for p in sorted(downloads.glob("part-*/"))]  # the shell's expansion of part-*/
    assert link_cmd[1] == "part-*/"
    proc = ok(tl_aot_cli(link_cmd[0], *parts, *link_cmd[2:], cwd=downloads, env=child_env()))
    assert "linked " in proc.stdout and "Traceback" not in proc.stdout + proc.stderr
    one, linked = tmp_path / "onebox" / "build", downloads / "build"
    assert (linked / "libadd_one.so").read_bytes() == (one / "libadd_one.so").read_bytes()
    assert (linked / "add_one.h").read_bytes() == (one / "add_one.h").read_bytes()


_CHECK_IMAGES = """
import sys, tvm_ffi
check = tvm_ffi.load_module(sys.argv[1])["tl_aot_check_images"]
for arch in sys.argv[2:]:
    print(f"{arch}: " + " ".join(str(check(arch)).split()))
"""


def _packs_link_command() -> list[str]:
    """The guide's ``link ... --image-packs --pack-hint ...`` command (after ``python -m tl_aot``), as the shell splits it."""
    text = (ROOT / "docs" / "guide" / "clusters.md").read_text()
    found = re.search(r"^python -m tl_aot (link part-\*/ -o build/ --image-packs .*)$", text, flags=re.M)
    assert found, "the image-packs link command of docs/guide/clusters.md changed: update this test with it"
    return shlex.split(found.group(1))


def test_link_with_image_packs_makes_the_one_machine_library_and_packs(tmp_path, cache_dir):
    """Shards as they are, then the guide's ``link --image-packs``: the library and packs of ``build --image-packs``."""
    link_cmd = _packs_link_command()
    hint = link_cmd[link_cmd.index("--pack-hint") + 1]
    (tmp_path / "kernels.toml").write_text(SPEC)
    env = child_env(cache_dir, checkout_first=True)
    ok(tl_aot_cli("build", "--spec", "kernels.toml", "-o", "onebox", "--image-packs", "--pack-hint", hint, cwd=tmp_path, env=env))
    refused = tl_aot_cli("build", "--spec", "kernels.toml", "--shard", "1/2", "-o", "part-1", "--image-packs", cwd=tmp_path, env=env)
    fails(refused, "drop --image-packs; link makes the library, pass it there: python -m tl_aot link PART... -o OUT --image-packs")
    for k in (1, 2):
        ok(tl_aot_cli("build", "--spec", "kernels.toml", "--shard", f"{k}/2", "-o", f"part-{k}", cwd=tmp_path, env=env))
    assert not list(tmp_path.glob("part-*/**/*.tlpack")), "a part holds images as built, never packs"
    parts = [p.name + "/" for p in sorted(tmp_path.glob("part-*/"))]
    proc = ok(tl_aot_cli(link_cmd[0], *parts, *link_cmd[2:], cwd=tmp_path, env={**env, "MAX_JOBS": "3"}))
    assert "image packs: 2 (libadd_one.sm_80.tlpack, libadd_one.sm_90a.tlpack)" in proc.stdout, proc.stdout
    assert re.search(r"linked .*libadd_one\.so from 2 part\(s\) \(2 variants\) in [\d.]+ s; -j 3\n", proc.stdout), proc.stdout
    # -j, as build's: one job makes the same bytes
    serial = ok(tl_aot_cli(link_cmd[0], *parts, *link_cmd[2:3], "build-j1", *link_cmd[4:], "-j", "1", cwd=tmp_path, env=env))
    assert "; -j 1\n" in serial.stdout, serial.stdout
    one, linked = tmp_path / "onebox", tmp_path / "build"
    names = sorted(p.name for p in linked.glob("*.tlpack"))
    assert names == ["libadd_one.sm_80.tlpack", "libadd_one.sm_90a.tlpack"]
    assert sorted(p.name for p in one.glob("*.tlpack")) == names
    for name in ("libadd_one.so", "add_one.h", *names):
        assert (linked / name).read_bytes() == (one / name).read_bytes(), f"{name} differs from the one-machine build's"
        assert (tmp_path / "build-j1" / name).read_bytes() == (one / name).read_bytes(), f"{name} with -j 1 differs"
    # without its sm_90a pack, the linked library names what to install (the check an entry's first call makes)
    (linked / "libadd_one.sm_90a.tlpack").unlink()
    got = run_ok([sys.executable, "-c", _CHECK_IMAGES, "build/libadd_one.so", "sm_80", "sm_90a"], tmp_path, env).stdout.splitlines()
    assert got[0] == "sm_80: ", got
    assert "libadd_one.sm_90a.tlpack, which is not installed" in got[1] and "pip install 'mykernels-sm90a==1.0'" in got[1], got


def test_a_shard_refuses_the_flags_of_a_library(tmp_path):
    (tmp_path / "kernels.toml").write_text(SPEC)
    proc = tl_aot_cli("build", "--spec", "kernels.toml", "--shard", "1/2", "-o", "part", "--depfile", "d.d", cwd=tmp_path)
    assert proc.returncode == 1 and "build --shard writes a part, not a library: drop --depfile" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "part").exists()


def test_link_refuses_a_job_count_below_one_as_build_does(tmp_path):
    proc = tl_aot_cli("link", "part-1/", "-o", "build/", "-j", "0", cwd=tmp_path)
    assert proc.returncode == 2 and "argument -j/--jobs: must be at least 1, got 0" in proc.stderr, proc.stderr
    assert not (tmp_path / "build").exists()


def test_a_shard_path_is_a_part_folder(tmp_path):
    """``Part.read`` names a folder that holds no part, and how to make one (what ``link`` prints)."""
    proc = tl_aot_cli("link", str(tmp_path), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 1 and f"{tmp_path} is not a build part: no part.json" in proc.stderr, proc.stderr
    assert Path(tmp_path / "out").exists() is False
