"""The linked library exports its own symbols only: nothing of a static archive the host toolchain links in."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tl_aot.cuda.host_compile import link_library
from tl_aot.cuda.toolchain import find_cxx


def _exported(lib) -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


@pytest.mark.skipif(not (shutil.which("nm") and shutil.which("ar")), reason="needs binutils")
def test_a_static_archive_linked_in_is_not_exported(tmp_path):
    """A host whose g++ links libstdc++.a would otherwise export a second C++ runtime into the process (seen on the H100 host)."""
    (tmp_path / "mine.cc").write_text('extern "C" int tl_mine() { return 1; }\n')
    (tmp_path / "theirs.cc").write_text('extern "C" int tl_theirs() { return 2; }\n')
    for name in ("mine", "theirs"):
        subprocess.run([find_cxx(), "-c", "-fPIC", f"{name}.cc", "-o", f"{name}.o"], cwd=tmp_path, check=True)
    subprocess.run(["ar", "rcs", "libtheirs.a", "theirs.o"], cwd=tmp_path, check=True)
    # The archive member is pulled in by a reference from the library's own code, as libstdc++.a's are.
    (tmp_path / "use.cc").write_text('extern "C" int tl_theirs();\nextern "C" int tl_use() { return tl_theirs(); }\n')
    subprocess.run([find_cxx(), "-c", "-fPIC", "use.cc", "-o", "use.o"], cwd=tmp_path, check=True)
    link_library(tmp_path, ["mine.o", "use.o", "libtheirs.a"], "libx.so", what="the test library")
    exported = _exported(tmp_path / "libx.so")
    assert {"tl_mine", "tl_use"} <= exported
    assert "tl_theirs" not in exported
