"""A build under ninja stops when ninja is SIGKILLed (``tl_aot/common/build_tool_watch.py``).

Ninja runs a job as ``sh -c …`` in a process group of its own, so a group SIGKILL of ``cmake
--build`` leaves the job running. The stand-in here is a "tool" process that starts ``sh -c
"python build.py"`` in a new group, as ninja does; the tool is SIGKILLed and the build (and its
shell) must end at once, not run on for minutes.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BUILD = """\
import os, time
from tl_aot.common.build_tool_watch import watch_build_tool
print("watching" if watch_build_tool(interval_s=0.05) else "not watching", os.getpid(), flush=True)
time.sleep(60)
"""

TOOL = """\
import subprocess, sys
job = subprocess.Popen(["sh", "-c", sys.argv[1]], process_group=0, stderr=subprocess.DEVNULL)
print(job.pid, flush=True)
job.wait()
"""


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def _start(tmp_path: Path, env_value: str | None, *, by_job: bool = True) -> tuple[subprocess.Popen, int, list[str]]:
    """The tool, the build's pid, and what the build said (``watching`` or ``not watching``).

    ``by_job``: the job's shell sets the variable on its command line, as CMake's command does
    (``cmake -E env TL_AOT_STOP_WITH_BUILD_TOOL=1 ...``); else the build only inherits it.
    """
    (tmp_path / "build.py").write_text(BUILD)
    log = tmp_path / "build.log"
    env = {k: v for k, v in os.environ.items() if k != "TL_AOT_STOP_WITH_BUILD_TOOL"}
    env["PYTHONPATH"] = str(ROOT)
    job = f"{sys.executable} {tmp_path / 'build.py'} > {log}"
    if env_value is not None and by_job:
        job = f"env TL_AOT_STOP_WITH_BUILD_TOOL={env_value} {job}"
    elif env_value is not None:
        env["TL_AOT_STOP_WITH_BUILD_TOOL"] = env_value
    tool = subprocess.Popen([sys.executable, "-c", TOOL, job], env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    tool.stdout.readline()  # the job started
    deadline = time.monotonic() + 30
    while "watching" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, "the build did not start"
        time.sleep(0.05)
    *said, pid = log.read_text().split()
    return tool, int(pid), said


def test_a_build_ends_when_the_build_tool_that_started_it_is_killed(tmp_path):
    tool, build, said = _start(tmp_path, "1")
    assert said == ["watching"]
    job = os.getpgid(build)
    os.killpg(tool.pid, signal.SIGKILL)  # the tool's group: the job, in its own group, survives it
    tool.wait()
    deadline = time.monotonic() + 10
    while _alive(build) or _alive(job):
        assert time.monotonic() < deadline, "the build ran on after its build tool was killed"
        time.sleep(0.05)


def test_without_the_variable_a_build_is_left_alone(tmp_path):
    """Off unless CMake asks: a build started under nohup outlives its shell on purpose."""
    tool, build, said = _start(tmp_path, None)
    assert said == ["not", "watching"]
    os.killpg(tool.pid, signal.SIGKILL)
    tool.wait()
    time.sleep(0.5)
    assert _alive(build)
    os.kill(build, signal.SIGKILL)  # the build this test started, left running as the user asked


def test_a_build_whose_build_tool_died_before_it_started_ends_too(tmp_path):
    """The kill came while the job's Python was still starting: the watch finds its leader orphaned already."""
    (tmp_path / "build.py").write_text(BUILD)
    orphan = "import os, time; time.sleep(0.3); open('ppid', 'w').write(str(os.getppid()))"
    probe = subprocess.run(["sh", "-c", f'{sys.executable} -c "{orphan}" &'], cwd=tmp_path, check=True)
    deadline = time.monotonic() + 10
    while not (tmp_path / "ppid").is_file() or not (tmp_path / "ppid").read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    if (tmp_path / "ppid").read_text().strip() != "1" or probe.returncode:
        pytest.skip("orphans here are adopted by a subreaper, not init")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    log = tmp_path / "build.log"
    job = f"sleep 1; env TL_AOT_STOP_WITH_BUILD_TOOL=1 {sys.executable} {tmp_path / 'build.py'} > {log}"
    tool = subprocess.Popen(
        [sys.executable, "-c", TOOL, f"echo $$ > {tmp_path / 'sh'}; {job}"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    tool.stdout.readline()
    os.killpg(tool.pid, signal.SIGKILL)  # before the job's Python starts
    tool.wait()
    while not (tmp_path / "sh").is_file() or not (tmp_path / "sh").read_text().strip():
        assert time.monotonic() < deadline + 10
        time.sleep(0.05)
    shell = int((tmp_path / "sh").read_text())
    deadline = time.monotonic() + 20
    while _alive(shell):
        assert time.monotonic() < deadline, "the build ran on after its build tool was killed"
        time.sleep(0.05)


def test_a_group_the_build_does_not_own_is_never_signalled(tmp_path):
    """The variable inherited (a test runner's or CI script's group, whoever its leader's parent is): no watch."""
    tool, build, said = _start(tmp_path, "1", by_job=False)
    assert said == ["not", "watching"]
    os.killpg(tool.pid, signal.SIGKILL)
    tool.wait()
    time.sleep(0.5)
    assert _alive(build)
    os.kill(build, signal.SIGKILL)
