"""Run one tool for a build, and take it down with the build.

``python -S reaper.py PARENT_PID COMMAND...`` runs COMMAND in a process group of its own and
waits for it. When the build process dies (even by SIGKILL: the kernel sends this process SIGTERM
through ``PR_SET_PDEATHSIG``), or it is interrupted, the whole group is killed: nvcc and the cicc /
ptxas it started never outlive the build. After COMMAND exits, anything it left in its group goes
too. Standard library only, run as a script (not ``-m tl_aot...``), so that it starts in
milliseconds.

The reaper leaves the build's process group first: a SIGKILL of that whole group (a CI runner
ending a job, ``kill -9 -PGID``, CMake's or ninja's group killed) would otherwise kill the reaper
with the build, before it could kill the tool's group, and nvcc or the host compiler would run on
as orphans. Out of the group, it outlives the build by the moment it takes to kill the tool. If
the reaper itself is SIGKILLed, the tool is killed by the kernel (its own ``PR_SET_PDEATHSIG``).
"""

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> int:
    parent, cmd = int(argv[1]), argv[2:]
    try:
        os.setpgid(0, 0)  # out of the build's group: a kill of that group must leave this process to clean up
    except OSError:
        pass  # already a group leader
    child = os.fork()
    if child == 0:
        os.setpgid(0, 0)
        _die_with_parent(signal.SIGKILL)  # the reaper SIGKILLed: the tool goes too
        try:
            os.execvp(cmd[0], cmd)
        except OSError as e:
            sys.stderr.write(f"{cmd[0]}: {e.strerror}\n")
        os._exit(127)
    try:
        os.setpgid(child, child)
    except OSError:
        pass  # the child did it first, or has already exec'd

    def kill(*_: object) -> None:
        try:
            os.killpg(child, signal.SIGKILL)
        except OSError:
            pass
        os._exit(137)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, kill)
    _die_with_parent(signal.SIGTERM)  # the build died: kill() runs
    if os.getppid() != parent:  # the build died before the signal was armed
        kill()
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    try:
        os.killpg(child, signal.SIGKILL)  # whatever the tool left running in its group
    except OSError:
        pass
    return os.waitstatus_to_exitcode(status) if status else 0


def _die_with_parent(sig: int) -> None:
    """Have the kernel send ``sig`` to this process when its parent dies (Linux; elsewhere nothing)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the tool may outlive a killed build


if __name__ == "__main__":
    code = main(sys.argv)
    sys.exit(128 - code if code < 0 else code)
