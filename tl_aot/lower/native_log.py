"""TileLang's C++ log while one variant lowers: captured from fd 2, then shown as the build's verbosity asks.

TileLang's C++ logger writes straight to file descriptor 2 (``[08:26:48] : Fatal: No valid warp
partition ...``), past Python's ``sys.stderr``, so ``build -q`` printed it anyway, before tl_aot's own
error or left-out list that says the same once, with the entry, arch and the user's file:line. Each
variant's lowering runs with fd 2 pointed at a temporary file; afterwards its text is shown by mode:

``"off"``  (``build -q``, ``log=None``): nothing; an error's message already carries the diagnostic.
``"warnings"`` (the default): TileLang's records but its ``Fatal:`` ones, which repeat the error the
    build reports (its warnings stay: they name a line of the user's kernel and how to fix it).
``"raw"`` (``build -v``): everything, as TileLang wrote it.

Python-level writes of other threads during the window (progress lines, at most one variant's
lowering long) land in the same file and are shown after it, unless the mode is ``"off"``; a quiet
build prints no progress.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator

__all__ = ["NATIVE_LOG_ENV", "NATIVE_LOG_FILE_ENV", "NATIVE_LOG_MODES", "captured_native_log", "shown_text"]

#: The mode a lowering worker process runs with (set by the pool that starts it).
NATIVE_LOG_ENV = "TL_AOT_NATIVE_LOG"
#: A lowering worker's capture file, which its pool reads when the worker dies mid-variant (a segfault
#: in TileLang's C++ leaves its last words there, not on the terminal).
NATIVE_LOG_FILE_ENV = "TL_AOT_NATIVE_LOG_FILE"
NATIVE_LOG_MODES = ("off", "warnings", "raw")

#: The head of one record of TVM / TileLang's C++ logger: ``[hh:mm:ss] file:line: Level: text``.
_RECORD = re.compile(r"^\[\d\d:\d\d:\d\d\] [^\n]*?: (Debug|Info|Warning|Error|Fatal): ", re.M)
#: fd 2 is one per process: lowerings on several threads (none today: TileLang is not thread safe) take turns.
_FD2 = threading.Lock()


def shown_text(text: str, mode: str) -> str:
    """What of the captured ``text`` a build in ``mode`` shows: all, none, or all but the ``Fatal:`` records."""
    if mode == "raw":
        return text
    if mode == "off":
        return ""
    heads = list(_RECORD.finditer(text))
    if not heads:
        return text
    kept = [text[: heads[0].start()]]
    for head, nxt in zip(heads, [*heads[1:], None]):
        if head.group(1) != "Fatal":
            kept.append(text[head.start() : nxt.start() if nxt else len(text)])
    return "".join(kept)


@contextlib.contextmanager
def captured_native_log(mode: str) -> Iterator[None]:
    """Run the block with fd 2 in a temporary file; then write what ``mode`` shows of it to the real fd 2."""
    if mode not in NATIVE_LOG_MODES:
        msg = f"native log mode must be one of {', '.join(NATIVE_LOG_MODES)}, got {mode!r}"
        raise ValueError(msg)
    kept = os.environ.get(NATIVE_LOG_FILE_ENV)
    with _FD2, tempfile.TemporaryFile() as scratch:
        sink = os.open(kept, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600) if kept else os.dup(scratch.fileno())
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(sink, 2)
        try:
            yield
        finally:  # shown whether the lowering raised or not: the error's own text is printed by the build
            os.dup2(saved, 2)
            os.close(saved)
            shown = shown_text(_read_all(sink).decode("utf-8", "replace"), mode)
            os.close(sink)
            if shown:  # through Python's stderr: where the build's own messages go (a test's capture too)
                sys.stderr.write(shown)
                sys.stderr.flush()


def _read_all(fd: int) -> bytes:
    """The whole of the file open as ``fd``, from its start."""
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)
