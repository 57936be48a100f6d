"""Commands that load no library and lower no kernel import neither torch, tvm-ffi nor TileLang, as processes run them.

Each test that runs such a command as a process pays what it imports: torch alone is over a second
of CPU, paid once per process (what ``inspect``, ``verify`` and a build found up to date read is in
``tests/integration/test_inspect_file.py``, which has a library to read).
"""

from __future__ import annotations

import pytest
from support.helpers import KERNELS, ok
from support.imports import HEAVY, tl_aot_imports


@pytest.mark.parametrize(
    "args",
    [
        ("--version",),
        ("--cmake-dir",),
        ("deps", KERNELS / "tileops_suite.py"),  # imports tileops_shapes.py: a line to print
        ("build", "--help"),
    ],
    ids=["version", "cmake-dir", "deps", "build-help"],
)
def test_a_command_that_reads_no_library_stays_light(args):
    proc, imported = tl_aot_imports(*args)
    ok(proc)
    assert proc.stdout.strip(), "the command printed nothing"
    assert not imported & HEAVY, sorted(imported & HEAVY)


def test_capture_imports_nothing_heavy_in_the_process_that_runs_the_workload(tmp_path):
    record = tmp_path / "requests.json"
    proc, imported = tl_aot_imports("capture", "-o", record, "--", "python", "-c", "pass")
    assert "the command exited with 0" in ok(proc).stdout and record.is_file()
    assert not imported & HEAVY, sorted(imported & HEAVY)  # the workload imports TileLang itself, under the hook
