"""Checks of an entry's values (args tables, levels, tune, when, out_idx, device, backend), each written once.

:meth:`tl_aot.config.kernel_spec.KernelSpec.create` calls them for every front end; each raises one
:class:`~tl_aot.common.errors.SpecError` naming the entry, the key, what was expected and what came.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, TypedDict

from ..common.arch import Arch
from ..common.errors import SpecError
from ..common.keycheck import expect_str, expect_str_list, expect_table
from ..gpu.device import find_profile
from .values import NamedValues, as_spec_value, spell

#: An entry's ``when``: ``(symbol, lo, hi)`` per dynamic dim a specialisation covers (inclusive).
When = tuple[tuple[str, int, int], ...]
#: An entry's ``tune``: candidate configs, each as ``(name, value)`` pairs.
TuneConfigs = tuple[NamedValues, ...]


class Levels(TypedDict):
    """An entry's per-level keys, checked (:func:`check_levels`): the :class:`KernelSpec` fields of the same names."""

    factory_args: NamedValues
    jit_args: NamedValues
    select: str
    imports: tuple[str, ...]


__all__ = [
    "BACKENDS",
    "Levels",
    "TuneConfigs",
    "When",
    "check_args",
    "check_backend",
    "check_device",
    "check_levels",
    "check_loose",
    "check_out_idx",
    "check_tune",
    "check_when",
]


def check_loose(
    entry: str, source: object, pass_configs: object, compile_flags: object
) -> tuple[str | os.PathLike[str], dict[str, Any], tuple[str, ...]]:
    """``source``, ``pass_configs`` and ``compile_flags`` of entry ``entry`` checked for type (they came from a file or setup.py)."""
    where = f"entry {entry!r}"
    if not isinstance(source, (str, os.PathLike)):
        expect_str(source, "source", where, '"kernels.py"')
    pass_configs = expect_table(pass_configs or {}, "pass_configs", where, '{"tl.disable_tma_lower" = true}')
    flags = expect_str_list(compile_flags or (), "compile_flags", where, '["-lineinfo"]')
    return source, pass_configs, flags  # type: ignore[return-value]  # source: checked to be a str or a path above


#: The code generators an entry may be built with: TileLang's CUDA C++ (the default) or its CuTeDSL backend.
BACKENDS = ("cuda", "cutedsl")


def check_backend(backend: object, where: str) -> str:
    """``backend`` validated: "cuda", "cutedsl", or "" (None) for what the kernel file asks (CUDA C++ by default)."""
    if backend is None or backend == "":
        return ""
    if backend not in BACKENDS:
        msg = f"{where}: backend {backend!r} is not one of {', '.join(map(repr, BACKENDS))}"
        raise SpecError(msg)
    return str(backend)


def check_args(args: Any, entry: str, key: str) -> NamedValues:
    """An args table (dict or pairs) as (name, value) pairs with identifier names and spellable values."""
    if args is None:
        return ()
    if isinstance(args, dict):
        args = tuple(args.items())
    if not isinstance(args, (tuple, list)) or not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in args):
        msg = f"entry {entry!r}: {key} must be a table (a dict) of NAME = VALUE, got {type(args).__name__}"
        raise SpecError(msg)
    for k, v in args:
        if not isinstance(k, str) or not k.isidentifier():
            msg = f"entry {entry!r}: {key} name {k!r} is not a Python identifier"
            raise SpecError(msg)
        try:
            spell(v)
        except SpecError as e:
            msg = f"entry {entry!r}: {key}.{k}: {e}"
            raise SpecError(msg) from None
    return tuple((k, as_spec_value(v)) for k, v in args)


def check_levels(entry: str, factory_args: object, jit_args: object, select: object, imports: Any) -> Levels:
    """The per-level keys of an entry (``factory_args``, ``jit_args``, ``select``, ``imports``), validated."""
    if select is not None and not isinstance(select, (str, int)) or isinstance(select, bool):
        msg = f"entry {entry!r}: select must be a kernel's key or index, got {select!r}"
        raise SpecError(msg)
    if imports is not None and (not isinstance(imports, (list, tuple)) or not all(isinstance(m, str) and m for m in imports)):
        msg = f'entry {entry!r}: imports must be a list of module names, e.g. ["mypkg.ops"]'
        raise SpecError(msg)
    for m in imports or ():
        if not all(part.isidentifier() for part in m.split(".")):
            msg = f"entry {entry!r}: imports names {m!r}, which is not a module name"
            raise SpecError(msg)
    return {
        "factory_args": check_args(factory_args, entry, "factory_args"),
        "jit_args": check_args(jit_args, entry, "jit_args"),
        "select": "" if select is None else str(select),
        "imports": tuple(imports or ()),
    }


def check_tune(tune: object, entry: str) -> TuneConfigs:
    """A spec's ``tune`` table (candidate configs of a plain factory) as a tuple of (name, value) tuples."""
    if tune is None:
        return ()
    if not isinstance(tune, (list, tuple)) or not tune or not all(isinstance(c, dict) and c for c in tune):
        msg = f"entry {entry!r}: tune must be a non-empty list of configs, e.g. [{{block_M = 64}}, {{block_M = 128}}]"
        raise SpecError(msg)
    return tuple(tuple(c.items()) for c in tune)


def check_when(when: object, where: str) -> When:
    """``{m = [1, 64], n = 128}`` → ``(("m", 1, 64), ("n", 128, 128))``: the dynamic dims a specialisation covers."""
    if when is None:
        return ()
    if not isinstance(when, dict):
        msg = f"{where}: when must be a table of dynamic dim names to a value or a [lo, hi] range"
        raise SpecError(msg)
    out = []
    for sym, rng in sorted(when.items()):
        if isinstance(rng, (list, tuple)) and len(rng) == 2:
            lo, hi = rng
        else:
            lo = hi = rng
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi)) or not 1 <= lo <= hi:
            msg = f"{where}: when.{sym} = {rng!r}: expected a positive int or a [lo, hi] range with 1 <= lo <= hi"
            raise SpecError(msg)
        out.append((str(sym), lo, hi))
    return tuple(out)


def check_out_idx(out_idx: Any, entry: str) -> tuple[int | str, ...] | None:
    """``out_idx`` as given (an int, a name, or a list of them; ``[]`` means no outputs), validated in form only."""
    if out_idx is None:
        return None
    items = [out_idx] if isinstance(out_idx, (int, str)) else out_idx
    try:
        items = list(items)
    except TypeError:
        items = [None]
    for it in items:
        if isinstance(it, bool) or not isinstance(it, (int, str)) or (isinstance(it, str) and not it.isidentifier()):
            msg = f"entry {entry!r}: out_idx {out_idx!r} must be parameter indices (negative from the end) or names"
            raise SpecError(msg)
    if len(set(items)) != len(items):
        msg = f"entry {entry!r}: out_idx {out_idx!r} names a parameter twice"
        raise SpecError(msg)
    return tuple(items)


def check_device(device: object, archs: tuple[Arch, ...], entry: str) -> str:
    """``device`` (a profile name) validated against the archs it will answer for (none yet: the name alone)."""
    if not device:
        return ""
    try:
        find_profile(str(device))  # a name no profile has
    except SpecError as e:
        msg = f"entry {entry!r}: {e}"
        raise SpecError(msg, entry=entry) from None
    if not archs:
        return str(device)
    fits = []
    for arch in archs:
        with contextlib.suppress(SpecError):  # a known device of another arch
            fits.append(find_profile(str(device), arch).name)
    if not fits:
        msg = f"entry {entry!r}: device {device!r} fits none of its archs ({', '.join(str(a) for a in archs)})"
        raise SpecError(msg, entry=entry)
    return fits[0]
