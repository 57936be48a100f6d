"""Values as a command line spells them: ``NAME=VALUE`` arguments, ``KEY=VALUE`` pass configs, ``FILE.py:FUNCTION``.

The CLI and CMake's ``add_tilelang_kernel()`` (through the CLI) spell an entry's keys this way.
"""

from __future__ import annotations

from pathlib import Path

from ..common.errors import SpecError
from .function_path import is_function_path
from .values import parse_value_text

__all__ = ["parse_arg", "parse_pass_config", "parse_target"]


def parse_arg(text: str, flag: str = "--arg") -> tuple[str, object]:
    """Parse ``NAME=VALUE``: a Python literal, a bare word (a string), or an expression (:class:`~tl_aot.config.values.Expr`).

    ``M=4096``, ``dtype=float16``, ``dtype=torch.float16``, ``cfg=GemmConfig(block_m=128)``,
    ``eps=float('inf')``: expressions are evaluated in the kernel module when it is built.
    """
    if "=" not in text:
        msg = f"{flag} {text!r}: expected NAME=VALUE, e.g. M=4096 or dtype='float16'"
        raise SpecError(msg)
    name, _, raw = text.partition("=")
    name = name.strip()
    if not name.isidentifier():
        msg = f"{flag} {text!r}: {name!r} is not a Python identifier"
        raise SpecError(msg)
    return name, parse_value_text(raw, f"{flag} {text!r}")


def parse_pass_config(text: str, flag: str = "--pass-config") -> tuple[str, object]:
    """Parse ``--pass-config KEY=VALUE`` with a dotted TileLang key (``tl.disable_tma_lower``).

    ``true`` / ``false`` are booleans, as in a spec file; other values parse as ``--arg`` values.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not all(part.isidentifier() for part in key.split(".")):
        msg = f"{flag} {text!r}: expected KEY=VALUE with a TileLang pass config key, e.g. tl.disable_tma_lower=true"
        raise SpecError(msg)
    word = raw.strip().lower()
    if word in ("true", "false"):
        return key, word == "true"
    return key, parse_value_text(raw, f"{flag} {text!r}")


def parse_target(text: str) -> tuple[Path, str]:
    """Split ``path/kernels.py:function`` (or ``kernels.py:Class.method``) into the file and the function path."""
    path, sep, func = str(text).rpartition(":")
    if not sep or not path or not func:
        msg = f"kernel {text!r}: expected FILE.py:FUNCTION, e.g. kernels.py:matmul"
        raise SpecError(msg)
    if not is_function_path(func):
        msg = f"kernel {text!r}: {func!r} is not a Python function name (or Class.method)"
        raise SpecError(msg)
    return Path(path), func
