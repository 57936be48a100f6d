"""Run-time autotuning, captured and served: the tuner's choice recorded by a capture, answered by serving.

Operator libraries run TileLang's autotuner (``tilelang.autotuner.AutoTuner.run``, reached by
``@autotune`` functions and by ``AutoTuner.from_kernel(...).run()``) the first time an op is used:
it compiles every candidate config and times each on the GPU. A capture on the GPU records, per
tuning, the tuner's choice: the **tuning key** (what was tuned: the function, by name and source,
the values its closure holds, the arguments it was tuned for, the candidate configs, the compile
options and the GPU's compute capability) -> the chosen config (its index among the candidates,
and spelled) and the request key of the kernel the tuner chose. ``build --capture`` ships the
tunings whose kernel it built in the library's manifest; serving answers a tuner whose key a
library holds with that kernel -- no benchmarking, no compile: the chosen config's prim_func is
built and asked for, as the tuner itself would, and served by its request key like any other.

The key is a digest of values spelled the same on any machine (paths and object addresses never
enter it): an argument that cannot be spelled so makes the tuning a miss, never a wrong answer.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Mapping
from typing import Any

from ..common.json_types import JsonMapping, JsonObject
from ..common.metadata import Tuning
from ..config.options import plain_pass_configs
from ..config.user_code import source_digest, user_function

__all__ = [
    "TUNING_SCHEMA",
    "tunables_given",
    "tuning_key",
    "describe",
    "resolved_configs",
    "chosen_index",
    "spelled_config",
    "answer",
]

#: Bumped when what the key covers changes (a tuning recorded under another schema is a miss).
TUNING_SCHEMA = 1
_RESERVED = frozenset({"pass_configs"})


def _spell(v):
    """JSON-able spelling of a value that reads the same in every process, or a marker that never matches."""
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_spell(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _spell(x) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))}
    text = repr(v) if type(v).__repr__ is not object.__repr__ else ""
    if not text or " at 0x" in text:
        return {"unspellable": type(v).__qualname__, "id": id(v)}  # this process only: a miss elsewhere
    return {type(v).__qualname__: text}


def _closure(fn: Any) -> JsonObject:
    code = getattr(fn, "__code__", None)
    cells = getattr(fn, "__closure__", None) or ()
    if code is None:
        return {}
    out = {}
    for name, cell in zip(code.co_freevars, cells):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(value, (bool, int, float, str, type(None))):
            out[name] = value  # what TileLang's own tuning cache keys on
    return out


def resolved_configs(tuner) -> list:
    """The tuner's candidate configs as a list (a callable ``configs`` is called with the tuned arguments, as TileLang does)."""
    configs = tuner.configs
    if callable(configs):
        args, kwargs = tuner._kernel_parameters or ((), ())
        configs = tuner.configs = configs(*args, **dict(kwargs))
    return list(configs)


def tunables_given(tuner: Any) -> bool:
    """Whether the call already gives a tunable argument, so TileLang compiles it once and times nothing.

    TileLang's ``AutoTuner.run`` test: a config key among the keyword arguments, or a tunable parameter
    placed among the positional ones (its index below their count).
    """
    params = getattr(tuner, "_kernel_parameters", None)
    names = list(getattr(tuner, "_function_parameters", None) or ())
    configs = resolved_configs(tuner) if params is not None else []
    if params is None or not configs or not names:
        return False
    args, kwargs = params
    tunable = [k for k in configs[0] if k != "pass_configs"]
    return any(k in configs[0] for k, _ in kwargs) or any(k in names and names.index(k) < len(args) for k in tunable)


def tuning_key(tuner: Any, cc: str) -> tuple[str, JsonObject]:
    """(key, what it covers) of the tuning ``tuner`` (a ``tilelang.autotuner.AutoTuner`` about to run) on a GPU of ``cc``."""
    fn = user_function(tuner.fn)
    ca = tuner.compile_args
    out_idx = getattr(ca, "out_idx", None)
    material = {
        "schema": TUNING_SCHEMA,
        "function": f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}",
        "source": source_digest(fn),
        "closure": _closure(fn),
        "args": _spell(tuner._kernel_parameters),
        "configs": _spell(resolved_configs(tuner)),
        "out_idx": _spell(out_idx),
        "backend": str(getattr(ca, "execution_backend", None)),
        "target": str(getattr(ca, "target", None)),
        "pass_configs": _spell(plain_pass_configs(dict(getattr(ca, "pass_configs", None) or {}))),
        "cc": cc,
    }
    text = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32], material


def describe(material: JsonMapping) -> str:
    """``pkg.gemm(M=1024, ...)`` over 15 configs: a tuning as messages name it."""
    args = material.get("args")
    spelled = json.dumps(args, separators=(",", ":"))[:160] if args is not None else ""
    return f"{material['function']}({spelled}) over {len(material.get('configs') or [])} configs"


def spelled_config(config) -> str:
    """A config as the record and the manifest spell it (compared, never evaluated)."""
    return json.dumps(_spell(config), sort_keys=True)


def chosen_index(tuner, config) -> int:
    """The index of ``config`` (the tuner's choice) among the tuner's candidates, or -1."""
    configs = resolved_configs(tuner)
    for i, c in enumerate(configs):
        if c is config:
            return i
    want = _spell(config)
    return next((i for i, c in enumerate(configs) if _spell(c) == want), -1)


def config_args(tuner: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments the tuner compiles one candidate with (TileLang's own ``run`` builds them the same way)."""
    import sys

    params = inspect.signature(tuner.fn).parameters
    out = {name: config[name] for name in params if name in config}
    pc_key = getattr(sys.modules.get(type(tuner).__module__), "_PASS_CONFIGS_KEY", None)
    if pc_key is not None:  # TileLang 0.1.15: per-config pass configs travel under a reserved key
        out[pc_key] = config.get("pass_configs")
    return out


def answer(tuner, tuning: Tuning):
    """The tuner's result for a recorded ``tuning``: the chosen config compiled through TileLang's own path (so served).

    Nothing is benchmarked: the chosen candidate alone is elaborated and asked for, exactly as the
    tuner asks for each candidate; serving answers that request from the library.
    """
    from tilelang.autotuner.param import AutotuneResult

    configs = resolved_configs(tuner)
    if not 0 <= tuning.index < len(configs) or spelled_config(configs[tuning.index]) != tuning.config:
        return None
    config = configs[tuning.index]
    compile_func = tuner.jit_compile
    if compile_func is None:
        ensure = getattr(tuner, "_ensure_jit_functions", None)
        compile_func = ensure()[0] if ensure is not None else tuner._default_compile
    kernel = compile_func(**config_args(tuner, config))
    latency = tuning.latency_ms or None
    update = getattr(kernel, "update_tuner_result", None)
    if update is not None:
        kernel = update(latency=latency, config=dict(config), ref_latency=None)
    source = getattr(kernel, "get_kernel_source", None)
    return AutotuneResult(
        latency=latency,
        config=dict(config),
        ref_latency=None,
        libcode=source() if source is not None else None,
        func=getattr(kernel, "prim_func", None),
        kernel=kernel,
    )
