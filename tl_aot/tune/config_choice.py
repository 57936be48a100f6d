"""Building ``@autotune``-decorated TileLang functions without running TileLang's autotuner.

TileLang picks a config by compiling and timing every candidate on the GPU at the first call.
tl_aot builds one config per variant, chosen at build time (first that applies): a tuning record's
(``python -m tl_aot tune``, :mod:`tl_aot.tune.tuning_record`), the config the build names explicitly
(``--arg block_M=128 ...``), then the function's own defaults (with a warning), else the build
stops and lists the candidates.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..common.errors import LoweringError
from ..common.json_types import JsonObject

__all__ = ["is_autotuned", "candidate_configs", "Choice", "choose_config"]

_log = logging.getLogger("tl_aot")
_RESERVED = frozenset({"pass_configs"})


def is_autotuned(obj) -> bool:
    """Whether ``obj`` is what ``@autotune(configs=...)`` returns (it wraps a ``@tilelang.jit`` function)."""
    return hasattr(obj, "jit_impl") and hasattr(obj, "configs") and hasattr(obj.jit_impl, "get_tir")


def candidate_configs(obj: Any, kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The decorator's configs as a list of dicts (a callable ``configs`` is called with the build's args)."""
    configs = obj.configs
    if callable(configs):
        try:
            params = inspect.signature(configs).parameters
            takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
            configs = configs(**(kwargs if takes_all else {k: v for k, v in kwargs.items() if k in params}))
        except TypeError as e:
            msg = f"the @autotune configs function could not be called with {kwargs}: {e}"
            raise LoweringError(msg) from None
    return [dict(c) for c in configs]


@dataclass(frozen=True)
class Choice:
    """The config one variant is built with, and where it came from."""

    kwargs: dict[str, Any]  # everything passed to the kernel function (the build's args with the config merged in)
    config: dict[str, Any]  # the tunable values alone
    source: str  # "explicit", "record" or "default"
    pass_configs: dict[str, Any]


def _tunable(configs: list[dict[str, Any]]) -> list[str]:
    keys: list[str] = []
    for c in configs:
        keys += [k for k in c if k not in _RESERVED and k not in keys]
    return keys


def _spelled(config: Mapping[str, Any]) -> str:
    return " ".join(f"--arg {k}={v!r}" for k, v in config.items() if k not in _RESERVED)


def choose_config(obj: Any, kwargs: Mapping[str, Any], *, function: str, where: str, record: Mapping[str, Any] | None = None) -> Choice:
    """Pick the config of one variant of the @autotune'd ``obj`` (see the module docstring)."""
    configs = candidate_configs(obj, kwargs)
    keys = _tunable(configs)
    sig = obj.jit_impl.signature  # the decorated function's own signature
    defaults = {n: p.default for n, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}

    def matching(values: Mapping[str, Any]) -> JsonObject:
        for c in configs:
            if all(c.get(k) == values.get(k) for k in keys if k in c):
                return dict(c.get("pass_configs") or {})
        return {}

    given = [k for k in keys if k in kwargs]
    if record is not None:  # tuned on a GPU (python -m tl_aot tune): wins over the build's own args
        config = {k: v for k, v in record.items() if k not in _RESERVED}
        return Choice({**kwargs, **config}, config, "record", matching(config))
    if given:
        missing = [k for k in keys if k not in kwargs and defaults.get(k) is None]
        if missing:
            msg = (
                f"{where}: {function} is @autotune'd over {', '.join(keys)}; the build sets {', '.join(given)} "
                f"but not {', '.join(missing)}, which have no default. Set them too, e.g. {_spelled(configs[0])}"
            )
            raise LoweringError(msg)
        config = {k: kwargs.get(k, defaults.get(k)) for k in keys}
        return Choice(dict(kwargs), config, "explicit", matching(config))
    if keys and all(defaults.get(k) is not None for k in keys):
        config = {k: defaults[k] for k in keys}
        _log.warning(
            "%s: %s is @autotune'd and no config was chosen; building its defaults (%s). Choose one with --arg.",
            where,
            function,
            ", ".join(f"{k}={v!r}" for k, v in config.items()),
        )
        return Choice({**kwargs, **config}, config, "default", matching(config))
    listing = "\n".join(f"    {_spelled(c)}" for c in configs[:16])
    more = f"\n    ... and {len(configs) - 16} more" if len(configs) > 16 else ""
    msg = (
        f"{where}: {function} is @autotune'd over {len(configs)} configs and none was chosen. tl_aot builds ahead of "
        "time and never runs TileLang's autotuner; choose the config to build with --arg (or the entry's args in a "
        f"spec file), one of:\n{listing}{more}"
    )
    raise LoweringError(msg)
