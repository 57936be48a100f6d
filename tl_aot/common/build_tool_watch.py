"""Stop a build whose build tool is gone: ninja's jobs outlive a SIGKILLed ninja.

Ninja runs each command in a process group of its own (so that Ctrl-C reaches ninja alone, which
then stops its jobs). A SIGKILL of ``cmake --build``'s group (a CI runner ending a job, ``kill -9
-PGID``) kills cmake and ninja, not the job: ``sh -c "cd … && cmake -E env … python -m tl_aot build
…"`` runs on, a build nobody waits for, its compilers running and the output's lock held while the
next build waits for it. CMake's command sets ``TL_AOT_STOP_WITH_BUILD_TOOL=1``; the build then
watches the leader of its process group (the job's shell): once the leader is handed to another
parent (the build tool that started it died) or is gone, the build sends its own group SIGTERM, so
the job ends as the kill meant it to (the build's tools die with it through their reapers).

Not SIGINT: a build interrupted as by Ctrl-C waits for the compiles its threads started, seconds
of a job nobody will use. Off unless asked for: a build started from a terminal under ``nohup``
outlives its shell on purpose.
"""

from __future__ import annotations

import os
import signal
import threading
import time

__all__ = ["ENV", "watch_build_tool"]

#: The environment variable CMake's build command sets (``1``: watch).
ENV = "TL_AOT_STOP_WITH_BUILD_TOOL"


def _parent_of(pid: int) -> int | None:
    """The parent pid of a live process, else None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    rest = stat[stat.rindex(")") + 2 :].split()
    return None if rest[0] == "Z" else int(rest[1])


#: Build tools that may run as pid 1 (a container's entry point): a leader whose parent is pid 1 is
#: an orphan only when pid 1 is not one of them.
_BUILD_TOOLS = {"ninja", "make", "gmake", "cmake"}


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def _is_the_job(leader: int) -> bool:
    """Whether ``leader`` is the build tool's job that asked for the watch: its command line sets the variable.

    CMake's command runs ``sh -c "... cmake -E env TL_AOT_STOP_WITH_BUILD_TOOL=1 python -m tl_aot build ..."``
    in a group of its own under ninja. Any other group (a test runner's, a CI script's, a make job
    sharing its parent's group) is never signalled, whoever its leader's parent is.
    """
    try:
        with open(f"/proc/{leader}/cmdline", "rb") as f:
            return f"{ENV}=1".encode() in f.read()
    except OSError:
        return False


def watch_build_tool(*, interval_s: float = 0.2) -> bool:
    """With ``TL_AOT_STOP_WITH_BUILD_TOOL=1``, SIGTERM this process's group once the group's leader loses its parent.

    Returns whether a watch started: not when the variable is unset, when this process leads its
    own group (a kill of the group reaches it), when the group's leader is not the job that set the
    variable (:func:`_is_the_job`: a group this build does not own is never signalled), or on a
    system without ``/proc``. A leader already
    handed to init (pid 1, not itself a build tool) means the build tool died before the watch
    could start: the group is sent SIGTERM at once.
    """
    if os.environ.get(ENV) != "1":
        return False
    leader = os.getpgrp()
    if leader == os.getpid() or not _is_the_job(leader):
        return False
    tool = _parent_of(leader)
    if tool is None or (tool == 1 and _name(1) not in _BUILD_TOOLS):
        # The build tool died before this build got here (during Python's start-up, say): its
        # job's leader went to init already, and the job ends now.
        os.killpg(leader, signal.SIGTERM)
        return True

    def watch() -> None:
        while _parent_of(leader) == tool:
            time.sleep(interval_s)
        os.killpg(leader, signal.SIGTERM)  # the job: its shell, cmake -E env, this build

    threading.Thread(target=watch, name="tl_aot-build-tool-watch", daemon=True).start()
    return True
