"""Commands that check what they are given before doing anything: `run --serve` and a misspelt arch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.helpers import tl_aot_cli

KERNEL = Path(__file__).parents[1] / "kernels" / "elementwise.py"


def _cli(*args, cwd=None):
    return tl_aot_cli(*args, cwd=cwd, env=dict(os.environ))


def test_run_serve_refuses_a_missing_or_foreign_library_before_running_the_command(tmp_path):
    marker = tmp_path / "ran"
    cmd = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    proc = _cli("run", "--serve", tmp_path / "nothere.so", "--", *cmd)
    assert proc.returncode == 1 and "run --serve" in proc.stderr and "no such library or folder" in proc.stderr
    (tmp_path / "empty").mkdir()
    proc = _cli("run", "--serve", tmp_path / "empty", "--", *cmd)
    assert proc.returncode == 1 and "holds no tl_aot library" in proc.stderr
    (tmp_path / "libfake.so").write_bytes(b"not a library")
    proc = _cli("run", "--serve", tmp_path / "libfake.so", "--", *cmd)
    assert proc.returncode == 1 and "libfake.so" in proc.stderr
    assert "Traceback" not in proc.stderr and not marker.exists()


def test_an_arch_no_gpu_has_is_named_a_misspelling(tmp_path):
    proc = _cli("build", f"{KERNEL}:add_one", "--arch", "sm_99", "-o", tmp_path)
    assert proc.returncode == 1 and "sm_99 is no compute capability NVIDIA has released" in proc.stderr
    assert "needs CUDA" not in proc.stderr


def test_run_serve_checks_a_library_as_loading_does_without_loading_it(testlib_path, tmp_path):
    """The command's own check reads the file and its index (digest, ABI): no tvm-ffi or torch import (seconds before the command)."""
    probe = (
        "import sys; from pathlib import Path; from tl_aot.frontends.cli_workload import _served_libraries; "
        f"_served_libraries({str(testlib_path)!r}, 'run'); "
        "print(sorted(m for m in ('tvm_ffi', 'torch') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr
    marker = tmp_path / "ran"
    proc = _cli("run", "--serve", testlib_path, "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')")
    assert proc.returncode == 0 and marker.exists(), proc.stderr


def test_run_serve_refuses_a_library_whose_index_was_altered(testlib_path, tmp_path):
    from tl_aot.runtime.manifest_file import manifest_texts

    data = testlib_path.read_bytes()
    index = manifest_texts(testlib_path)[0].encode()
    at = data.index(index) + index.index(b'"abi_version"')
    altered = tmp_path / "libaltered.so"
    altered.write_bytes(data[:at] + b"'" + data[at + 1 :])  # one byte of the index: its digest no longer matches
    marker = tmp_path / "ran"
    proc = _cli("run", "--serve", altered, "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')")
    assert proc.returncode == 1 and "libaltered.so: its manifest was altered after the build" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not marker.exists()


def test_output_cut_short_by_its_reader_ends_quietly(testlib_path):
    """`tl_aot inspect lib.so | head`: the reader gone, the command ends as a process killed by SIGPIPE, no traceback."""
    for args in (["--version"], ["inspect", testlib_path], ["inspect", "--json", testlib_path]):
        read, write = os.pipe()
        os.close(read)  # a reader that has already gone: every write fails with EPIPE
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "tl_aot", *map(str, args)], stdout=write, stderr=subprocess.PIPE, text=True, timeout=300
            )
        finally:
            os.close(write)
        assert proc.returncode == 141, (args, proc.returncode, proc.stderr)
        assert proc.stderr == "", (args, proc.stderr)


def test_a_command_that_cannot_start_is_named_with_the_shells_status(testlib_path, tmp_path):
    """`capture -- pytset` (a typo) or a script without its execute bit: said as such, 127 / 126 as `env` exits, no traceback;
    `verify` stops there rather than check a workload that never ran."""
    script = tmp_path / "workload.sh"
    script.write_text("#!/bin/sh\necho ran\n")  # no execute bit
    cases = [
        (["capture", "-o", tmp_path / "r.json", "--", "tl-aot-no-such-command"], 127, "no such command"),
        (["run", "--serve", testlib_path, "--", tmp_path / "missing" / "workload"], 127, "no such command"),
        (["run", "--serve", testlib_path, "--", script], 126, "not executable"),
        (["verify", testlib_path, "--", "tl-aot-no-such-command"], 127, "no such command"),
    ]
    for args, status, why in cases:
        proc = _cli(*args, cwd=tmp_path)
        assert proc.returncode == status, (args, proc.returncode, proc.stderr)
        assert f"tl_aot {args[0]}: cannot run {args[-1]}: {why}" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and "ran" not in proc.stdout and "variants" not in proc.stdout
