"""One exception hierarchy for every stage of tl_aot, so callers can catch ``TlAotError``.

The classes are defined here and published at one stable path, :mod:`tl_aot.errors` (and each
also as ``tl_aot.<Name>``): their ``__module__`` says ``tl_aot.errors``, so a traceback names the
path a user's ``except`` clause imports from, and a pickled error (a cluster worker's) loads
wherever this module moves. ``tests/unit/test_public_errors.py`` pins the public names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import signal

__all__ = [
    "TlAotError",
    "SpecError",
    "LoweringError",
    "CompileError",
    "ToolchainNotFound",
    "FailedProcessError",
    "LibraryError",
    "FilesystemError",
    "KernelNotServed",
    "ClusterError",
    "ToolsetMismatch",
    "PartError",
    "WheelCheckError",
    "PUBLIC_ERRORS",
    "tool_signal",
]


class TlAotError(Exception):
    """Base class of every error tl_aot raises on purpose.

    Besides its message, an error may say which ``entry`` and ``arch`` it is about and where in
    the user's code (``location``, ``file:line``): callers (the keep-going build, ``tune``, the
    lowering workers) read these fields, never the message text.
    """

    def __init__(self, *args: object, entry: str | None = None, arch: str | None = None, location: str | None = None) -> None:
        super().__init__(*args)
        self.entry, self.arch, self.location = entry, arch, location

    def fields(self) -> dict[str, str | None]:
        """The structured fields, for sending across a process boundary."""
        return {"entry": self.entry, "arch": self.arch, "location": self.location}


class SpecError(TlAotError, ValueError):
    """A kernel specification (CLI flags, spec file, setup.py entry) is malformed."""


class LoweringError(TlAotError):
    """TileLang could not load or lower a kernel; names the entry, arch and user file:line."""


class CompileError(TlAotError):
    """nvcc or the host compiler refused generated code."""


class ToolchainNotFound(TlAotError):
    """A build tool (nvcc, a C++ compiler, tilelang) is missing."""


class LibraryError(TlAotError):
    """A built library cannot be loaded or was built by an incompatible tl_aot."""


class FilesystemError(TlAotError):
    """A path tl_aot reads or writes cannot be used (read-only, full, a file where a folder goes, ...).

    The message is one line naming the path and the problem; what was there before is left as it was.
    """


class FailedProcessError(CompileError):
    """A subprocess failed; the message carries the command, exit status and its output."""

    def __init__(self, what: str, cmd: list[str], returncode: int, stdout: str, stderr: str) -> None:
        self.cmd = list(cmd)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        lines = [f"{what} failed with {_status(returncode)}", "  command: " + " ".join(cmd)]
        for label, text in (("stdout", stdout), ("stderr", stderr)):
            if text.strip():
                lines.append(f"  {label}:")
                lines.extend("    " + ln for ln in text.rstrip().splitlines())
        super().__init__("\n".join(lines))


class KernelNotServed(TlAotError, LookupError):
    """Strict serving (``tl_aot.serve``) met a compile request no loaded library holds."""


class ClusterError(TlAotError):
    """The cluster cannot build: unreachable, no worker agrees with this machine, every worker left."""


class ToolsetMismatch(TlAotError):
    """A machine's TileLang / tl_aot / nvcc / tvm-ffi differ from the driver's: its outputs would differ."""


class PartError(TlAotError):
    """Parts that do not make one library: another library's, other sources or tools, a missing or duplicate shard."""


class WheelCheckError(TlAotError):
    """A wheel cannot honestly carry the platform tag asked for (or any manylinux tag)."""


#: The error classes a user may catch, by their public name (``tl_aot.errors.<name>``, ``tl_aot.<name>``).
PUBLIC_ERRORS = (
    TlAotError,
    SpecError,
    LoweringError,
    CompileError,
    FailedProcessError,
    ToolchainNotFound,
    LibraryError,
    FilesystemError,
    KernelNotServed,
    ClusterError,
    ToolsetMismatch,
    PartError,
    WheelCheckError,
)

for _cls in PUBLIC_ERRORS:  # tracebacks and pickles name the public path, not this module's
    _cls.__module__ = "tl_aot.errors"
del _cls


def tool_signal(returncode: int) -> signal.Signals | None:
    """The :class:`signal.Signals` a tool died of (a negative status, or 128 + N as a shell or the reaper reports it), else None."""
    import signal

    number = -returncode if returncode < 0 else returncode - 128 if 128 < returncode < 128 + 65 else 0
    try:
        return signal.Signals(number) if number else None
    except ValueError:
        return None


def _status(returncode: int) -> str:
    """``exit status 1``, or ``signal SIGSEGV (exit status 139)`` for a tool that died of one."""
    sig = tool_signal(returncode)
    return f"signal {sig.name} (exit status {returncode})" if sig else f"exit status {returncode}"
