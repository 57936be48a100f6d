"""The options a kernel is compiled with, as TileLang's JIT applies them.

TileLang's JIT folds a kernel's ``compile_flags`` into the ``tl.device_compile_flags`` pass
config before lowering; tl_aot lowers with that same dict and derives nvcc's flags from it. Files
those flags name (``-include helper.h``, ``-I include/``) are inputs of the image: their digests
are recorded with the variant, so an edited header is a cache miss, never a stale kernel.

A relative ``-include`` is found as nvcc finds it (:func:`resolve_include`): in the working
directory, else along the include path, which is TileLang's own (its device templates and
CUTLASS, what its JIT passes) and then the flags' ``-I`` folders. ``-include
tl_templates/cuda/gemm.h`` is TileLang's header, wherever the command runs.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..common.fileutil import StrPath, file_digest
from ..common.tilelang_compat import header_dirs

__all__ = [
    "jit_pass_configs",
    "plain_pass_configs",
    "absolute_flags",
    "flag_inputs",
    "nvcc_flags_for",
    "portable_flags",
    "map_flag_paths",
    "resolve_include",
    "include_files",
    "tilelang_relative",
]

#: Flags whose value (attached or the next word) is a path nvcc reads.
_PATH_FLAGS = ("-include", "--pre-include", "-I", "--include-path", "-isystem", "--system-include")
_FILE_FLAGS = ("-include", "--pre-include")
_MAX_DIR_FILES = 4000


def jit_pass_configs(pass_configs: Mapping[Any, Any], compile_flags: Iterable[str]) -> dict[Any, Any]:
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


def _plain(v: Any) -> Any:
    """TVM containers and scalars as Python values (pass configs arrive as either)."""
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    for conv in (int, float, str):
        if type(v).__name__ in ("IntImm", "Integer") and conv is int:
            return int(v)
    if hasattr(v, "items"):
        return {str(k): _plain(x) for k, x in v.items()}
    if hasattr(v, "__iter__"):
        return [_plain(x) for x in v]
    return str(v)


def plain_pass_configs(pc: Mapping[Any, Any]) -> dict[str, Any]:
    """Pass configs as JSON-able Python values under their string keys (``tl.disable_tma_lower``), sorted."""
    return dict(sorted((_key(k), _plain(v)) for k, v in pc.items()))


def _key(k: object) -> str:
    return str(getattr(k, "value", k))


def nvcc_flags_for(pass_configs: Mapping[Any, Any]) -> tuple[str, ...]:
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


def map_flag_paths(opts: Iterable[object], fn: Callable[[str, bool], str]) -> list[str]:
    """The flags with ``fn(path, folder)`` applied to every path they name (``folder``: an ``-I``-like flag's)."""
    out: list[str] = []
    pending = None
    for given in opts:
        o = str(given)
        if pending is not None:
            out.append(fn(o, pending not in _FILE_FLAGS))
            pending = None
            continue
        flag = next((f for f in _PATH_FLAGS if o == f or o.startswith(f + "=") or (f == "-I" and o.startswith("-I"))), None)
        if flag is None:
            out.append(o)
        elif o == flag:
            out.append(o)
            pending = flag
        else:
            sep = "=" if o.startswith(flag + "=") else ""
            out.append(f"{flag}{sep}{fn(o[len(flag) + len(sep) :], flag not in _FILE_FLAGS)}")
    return out


def absolute_flags(opts: Collection[object], cwd: StrPath | None = None) -> tuple[str, ...]:
    """Relative paths after ``-I`` / ``-include`` made absolute (nvcc runs in another folder than the JIT would).

    An ``-include`` is the file nvcc would read (:func:`resolve_include`); one found nowhere is
    spelled under ``cwd``, so nvcc's error names where it was looked for.
    """
    base = Path(cwd or os.getcwd())

    def one(value: str, folder: bool) -> str:
        if os.path.isabs(value):
            return value
        found = None if folder else resolve_include(value, opts, base)
        return str(found or base / value)

    return tuple(map_flag_paths(opts, one))


def resolve_include(value: str, opts: Collection[object] = (), cwd: StrPath | None = None) -> Path | None:
    """The file an ``-include VALUE`` reads, searched as nvcc searches it; None when there is none.

    An absolute path is itself; a relative one is looked for in ``cwd`` (the working directory),
    then in TileLang's include path (:func:`tl_aot.common.tilelang_compat.header_dirs`, first on the
    command line of TileLang's JIT and of tl_aot's build), then in the ``-I`` folders ``opts`` name.
    """
    p = Path(value)
    if p.is_absolute():
        return p if p.is_file() else None
    base = Path(cwd or os.getcwd())
    _, dirs = _named(opts)
    for d in (base, *header_dirs(), *(d if d.is_absolute() else base / d for d in dirs)):
        if (d / p).is_file():
            return d / p
    return None


def tilelang_relative(path: StrPath) -> tuple[int, str] | None:
    """``(index of the include folder, path under it)`` when ``path`` is one of TileLang's headers (or folders), else None."""
    p = Path(path).resolve()
    for i, d in enumerate(header_dirs()):
        d = d.resolve()
        if p == d or p.is_relative_to(d):
            return i, p.relative_to(d).as_posix()
    return None


def portable_flags(opts: Collection[object], digests: Mapping[str, str] | None = None) -> list[str]:
    """The flags with every path they name spelled ``<name>#<digest of its contents>``.

    Equal wherever the package lives (a folder's digest covers the headers under it), different
    when a header changed: what a compile request's identity holds. ``digests`` (path -> SHA-256)
    stands in for the files on disk, e.g. the headers a capture record carries.
    """
    if digests is None:
        known = dict(flag_inputs(opts))
        found = {v: str(r) for v, r in include_files(opts) if r is not None}  # an -include as spelled -> the file read
    else:
        known, found = {str(Path(f)): d for f, d in digests.items()}, dict[str, str]()

    def one(value: str, folder: bool) -> str:
        p = Path(value)
        if not folder:
            return f"{p.name}#{known.get(found.get(value, str(p)), 'missing')[:16]}"
        h = hashlib.sha256()
        for f, d in sorted(known.items()):
            if Path(f) != p and Path(f).is_relative_to(p):
                h.update(f"{Path(f).relative_to(p).as_posix()}\0{d}\0".encode())
        return f"{p.name}/#{h.hexdigest()[:16]}"

    return map_flag_paths(opts, one)


def _named(opts: Collection[object]) -> tuple[list[str], list[Path]]:
    """The ``-include`` values (as spelled) and the folders (``-I``...) the flags name."""
    files: list[str] = []
    dirs: list[Path] = []

    def note(value: str, folder: bool) -> str:
        if folder:
            dirs.append(Path(value))
        else:
            files.append(value)
        return value

    map_flag_paths(opts, note)
    return files, dirs


def include_files(opts: Collection[object]) -> list[tuple[str, Path | None]]:
    """Each ``-include`` value, as spelled, with the file nvcc reads for it (None: found nowhere)."""
    files, _ = _named(opts)
    return [(v, resolve_include(v, opts)) for v in files]


def flag_inputs(opts: Collection[object]) -> tuple[tuple[str, str], ...]:
    """(path, sha256) of every header the flags name: ``-include`` files and the headers under ``-I`` folders.

    An ``-include`` found (:func:`resolve_include`) is listed by the path read; one found nowhere
    as spelled, with the digest ``missing``.
    """
    _, dirs = _named(opts)
    found: dict[str, str] = {}
    for value, f in include_files(opts):
        found[str(f or Path(value))] = _digest_or_missing(f or Path(value))
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


def inputs_unchanged(inputs: Iterable[tuple[str, str]]) -> bool:
    """Whether every recorded input still has the digest it had when the image was built."""
    return all(_digest_or_missing(Path(p)) == d for p, d in inputs)


def _digest_or_missing(p: Path) -> str:
    try:
        return file_digest(p)
    except OSError:
        return "missing"
