"""TileLang's C++ log while a variant lowers: captured from fd 2 and shown as the build's verbosity asks."""

from __future__ import annotations

import os

import pytest

from tl_aot.lower.native_log import captured_native_log, shown_text

WARNING = (
    "[08:26:48] : Warning: Buffer read before initialization: 1 buffer(s) read before anything writes them\n"
    "  [1] `C_local` is read before anything writes it\n"
    "  --> kernels.py:15:1\n"
)
FATAL = "[08:26:48] : Fatal: No valid warp partition for T.gemm: M=128, N=128 cannot be evenly covered by 3 warps\n"
LOG = "a line before any record\n" + WARNING + FATAL + WARNING


def test_quiet_shows_nothing_and_raw_shows_everything():
    assert shown_text(LOG, "off") == ""
    assert shown_text(LOG, "raw") == LOG


def test_the_default_keeps_warnings_whole_and_drops_only_fatal_records():
    assert shown_text(LOG, "warnings") == "a line before any record\n" + WARNING + WARNING
    assert shown_text("plain text\n", "warnings") == "plain text\n"


@pytest.mark.parametrize(("mode", "shown"), [("off", ""), ("warnings", WARNING), ("raw", WARNING + FATAL)])
def test_what_native_code_writes_to_fd_2_is_shown_after_the_block_by_mode(capfd, mode, shown):
    with pytest.raises(RuntimeError), captured_native_log(mode):
        os.write(2, (WARNING + FATAL).encode())  # as TileLang's C++ logger writes: past sys.stderr
        assert capfd.readouterr().err == ""  # nothing reaches the terminal while the variant lowers
        raise RuntimeError  # a refused kernel: shown all the same
    assert capfd.readouterr().err == shown


def test_an_unknown_mode_is_refused_naming_the_modes():
    with pytest.raises(ValueError, match="off, warnings, raw"), captured_native_log("loud"):
        pass
