"""Spelling user text (paths, names, values) in each language tl_aot generates: one function per language.

Every string from the user's files or spec reaches generated C++, Python, Makefile depfiles and
JSON only through these, so no path or value can end a comment, close a literal or add a line.
Text that a language cannot hold (a newline in a depfile path) is refused with a :class:`SpecError`.
Paths that are not UTF-8 arrive as ``os.fsdecode`` strings (lone surrogates) and are kept byte for byte.
"""

from __future__ import annotations

import json
import os
import re

from .errors import SpecError

__all__ = ["asm_string", "c_comment", "c_string_body", "depfile_path", "encode_text", "json_text", "py_comment", "py_doc_line", "py_str"]


def encode_text(text: str) -> bytes:
    """``text`` as the bytes of a generated file: UTF-8, non-UTF-8 path bytes (``os.fsdecode``'s surrogates) as they were."""
    return text.encode("utf-8", "surrogateescape")


def c_string_body(text: object) -> str:
    """``text`` escaped to sit between the quotes of a C/C++ string literal (octal escapes, never hex)."""
    out = []
    for b in encode_text(str(text)):
        ch = chr(b)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif 0x20 <= b < 0x7F and ch != "?":  # '?' escaped: no trigraph can form
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    return "".join(out)


def asm_string(path: str | os.PathLike[str]) -> str:
    """``path`` as a quoted GNU assembler string (``.incbin "<this>"``), read back byte for byte by gas and clang.

    The assembler takes the same escapes as C: a quote or backslash is escaped, anything outside
    printable ASCII (a newline, non-UTF-8 bytes) is a three-digit octal escape.
    """
    return '"' + c_string_body(os.fspath(path)) + '"'


def c_comment(text: object) -> str:
    """``text`` made safe for a ``//`` comment: one line, printable ASCII, no line-splicing backslash.

    ``*/`` is harmless there (a ``//`` comment is never closed); anything unprintable reads ``?``.
    """
    return "".join(c if " " <= c <= "~" and c != "\\" else ("/" if c == "\\" else "?") for c in str(text))


_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(text: object, escape: str = "") -> str:
    """``text`` with every unprintable character (and each of ``escape``) spelled as a Python escape."""
    out = []
    for c in str(text):
        if c in escape:
            out.append("\\" + c)
        elif c.isprintable() and not 0xD800 <= ord(c) <= 0xDFFF:
            out.append(c)
        elif c in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[c])
        elif ord(c) < 0x100:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}")
    return "".join(out)


def py_comment(text: object) -> str:
    r"""``text`` for a ``#`` comment of generated Python: one line, newlines and NULs shown as ``\n``, ``\x00``."""
    return _visible(text)


def py_doc_line(text: object) -> str:
    r"""``text`` for a line of a (non-raw) docstring: the docstring's value reads ``text`` back exactly.

    Backslashes and double quotes are escaped: no triple quote can close it, no ``\N`` can break it.
    """
    return _visible(text, escape='\\"')


def py_str(text: object) -> str:
    """A double-quoted Python string literal (as ruff format writes it) whose value is ``text``."""
    return json.dumps(str(text), ensure_ascii=True)


def json_text(obj: object, *, indent: int | None = None) -> str:
    r"""``obj`` as JSON, ASCII only (non-UTF-8 path bytes as ``\udcXX``), keys sorted (reproducible builds)."""
    return json.dumps(obj, indent=indent, sort_keys=True, ensure_ascii=True)


#: Makefile depfile escapes (what gcc -MD writes, read alike by make and ninja).
_DEPFILE_ESCAPES = {" ": "\\ ", "#": "\\#", "$": "$$", ":": "\\:"}


def depfile_path(path: str | os.PathLike[str]) -> str:
    """``path`` spelled for a Makefile depfile, or a :class:`SpecError` when make and ninja cannot read it back.

    A newline, carriage return or NUL cannot be written at all. Backslashes before a space, ``#``
    or the end of the name are doubled (as gcc -MD writes them); any other backslash is literal.
    """
    text = os.fspath(path)
    problem = ""
    if any(c in text for c in "\n\r\0"):
        problem = "a newline, carriage return or NUL"
    if problem:
        msg = f"path {text!r} cannot be written to a Makefile depfile (it holds {problem}): rename it, or build without a depfile"
        raise SpecError(msg)
    text = re.sub(r"(\\+)(?=[ #]|$)", r"\1\1", text)
    return "".join(_DEPFILE_ESCAPES.get(c, c) for c in text)
