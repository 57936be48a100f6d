"""The options a kernel is compiled with, as TileLang's JIT applies them.

TileLang's JIT folds a kernel's ``compile_flags`` into the ``tl.device_compile_flags`` pass
config before lowering; tl_aot lowers with that same dict and derives nvcc's flags from it. Files
those flags name (``-include helper.h``, ``-I include/``) are inputs of the image: their digests
are recorded with the variant, so an edited header is a cache miss, never a stale kernel.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from .fileutil import file_digest

__all__ = ["jit_pass_configs", "absolute_flags", "flag_inputs", "nvcc_flags_for"]

#: Flags whose value (attached or the next word) is a path nvcc reads.
_PATH_FLAGS = ("-include", "--pre-include", "-I", "--include-path", "-isystem", "--system-include")
_MAX_DIR_FILES = 4000


def jit_pass_configs(pass_configs: dict, compile_flags) -> dict:
    """``pass_configs`` with ``compile_flags`` appended to ``tl.device_compile_flags``, as TileLang's JITKernel does."""
    from tilelang.transform import PassConfigKey

    out = dict(pass_configs)
    flags = list(compile_flags)
    if not flags:
        return out
    key = PassConfigKey.TL_DEVICE_COMPILE_FLAGS
    have = out.get(key)
    have = [] if have is None else [have] if isinstance(have, str) else [str(f) for f in have]
    out[key] = [*have, *flags]
    return out


def nvcc_flags_for(pass_configs: dict) -> tuple[str, ...]:
    """Nvcc flags equivalent to TileLang's own device compile for these (folded) pass configs."""
    from tilelang.transform import PassConfigKey

    opts: list[str] = []
    if pass_configs.get(PassConfigKey.TL_ENABLE_FAST_MATH, False):
        opts.append("--use_fast_math")
    level = pass_configs.get(PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL)
    if level is not None:
        opts.append(f"--ptxas-options=--register-usage-level={int(level)}")
    extra = pass_configs.get(PassConfigKey.TL_DEVICE_COMPILE_FLAGS)
    for flags in [extra] if isinstance(extra, str) else list(extra or []):
        opts += shlex.split(str(flags))
    return absolute_flags(opts)


def absolute_flags(opts, cwd: str | os.PathLike | None = None) -> tuple[str, ...]:
    """Relative paths after ``-I`` / ``-include`` made absolute (nvcc runs in another folder than the JIT would)."""
    base = Path(cwd or os.getcwd())
    out: list[str] = []
    take_next = False
    for o in opts:
        if take_next:
            out.append(str(base / o) if not os.path.isabs(o) else o)
            take_next = False
            continue
        flag = next((f for f in _PATH_FLAGS if o == f or o.startswith(f + "=") or (f == "-I" and o.startswith("-I"))), None)
        if flag is None:
            out.append(o)
        elif o == flag:
            out.append(o)
            take_next = True
        else:
            sep = "=" if o.startswith(flag + "=") else ""
            value = o[len(flag) + len(sep) :]
            out.append(f"{flag}{sep}{value if os.path.isabs(value) else base / value}")
    return tuple(out)


def _paths(opts) -> tuple[list[Path], list[Path]]:
    """Files (``-include``) and folders (``-I``...) the flags name."""
    files: list[Path] = []
    dirs: list[Path] = []
    it = iter(opts)
    for o in it:
        for f in _PATH_FLAGS:
            if o == f:
                value = next(it, "")
            elif o.startswith(f + "="):
                value = o[len(f) + 1 :]
            elif f == "-I" and o.startswith("-I") and len(o) > 2:
                value = o[2:]
            else:
                continue
            (files if f in ("-include", "--pre-include") else dirs).append(Path(value))
            break
    return files, dirs


def flag_inputs(opts) -> tuple[tuple[str, str], ...]:
    """(path, sha256) of every header the flags name: ``-include`` files and the headers under ``-I`` folders."""
    files, dirs = _paths(opts)
    found: dict[str, str] = {}
    for f in files:
        found[str(f)] = _digest_or_missing(f)
    for d in dirs:
        if not d.is_dir():
            continue
        n = 0
        for p in sorted(d.rglob("*")):
            if p.suffix in (".h", ".hpp", ".cuh", ".hh", ".inl", ".inc") and p.is_file():
                found[str(p)] = _digest_or_missing(p)
                n += 1
                if n >= _MAX_DIR_FILES:
                    break
    return tuple(sorted(found.items()))


def inputs_unchanged(inputs) -> bool:
    """Whether every recorded input still has the digest it had when the image was built."""
    return all(_digest_or_missing(Path(p)) == d for p, d in inputs)


def _digest_or_missing(p: Path) -> str:
    try:
        return file_digest(p)
    except OSError:
        return "missing"
