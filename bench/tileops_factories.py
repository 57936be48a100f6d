"""How many of an operator library's kernels tl_aot builds as written, identical to TileLang's JIT path.

Measures TileOPs (PyPI ``tileops``; install it where you run this, e.g. ``pip install --no-deps
--target DIR tileops`` and ``PYTHONPATH=DIR``). For every ``Kernel`` class in ``tileops._kernels``
whose constructor can be called with plain problem sizes, the class is instantiated as the
library does (device queries answered as an H100), which calls the library's kernel factory; the
factory call (function and arguments) and the config the class picks are recorded. tl_aot then
builds ``factory(**args)`` with the config, as written, for sm_90a, and the result is compared
with what TileLang's JIT path gives for the same call (the nested jit's ``get_tir(**config)``
structural hash and its ``out_idx`` / ``pass_configs`` / ``compile_flags``). Nothing here is
TileOPs code; run: ``python bench/tileops_factories.py [--limit N] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib
import inspect
import json
import pkgutil
import sys
import time
import traceback
from pathlib import Path

#: Problem sizes by constructor parameter name (a plain, small, valid-looking problem).
SIZES = {
    "batch": 2,
    "m": 256,
    "n": 256,
    "k": 256,
    "M": 256,
    "N": 256,
    "K": 256,
    "heads": 8,
    "heads_kv": 8,
    "dim": 128,
    "dim_v": 128,
    "dim_k": 128,
    "seq_len": 256,
    "seq_len_kv": 256,
    "seqlen_kv": 256,
    "N_total": 4096,
    "c_in": 64,
    "c_out": 64,
    "h_in": 32,
    "w_in": 32,
    "l_in": 256,
    "kernel_h": 3,
    "kernel_w": 3,
    "stride_h": 1,
    "stride_w": 1,
    "pad_h": 1,
    "pad_w": 1,
    "dilation_h": 1,
    "dilation_w": 1,
    "groups": 1,
    "eps": 1e-6,
    "is_causal": False,
    "has_bias": False,
    "scale": 1.0,
    "page_size": 64,
    "max_position": 4096,
    "has_sinks": False,
    "rotary_dim": 128,
    "C": 256,
    "S": 256,
    "num_tokens": 256,
    "topk": 2,
    "sm_count": 132,
    "max_pages_per_req": 8,
    "fuse_rope": False,
    "ceil_mode": False,
}


def _dtypes():
    import torch

    return {"dtype": torch.float16, "out_dtype": torch.float16, "accum_dtype": torch.float32, "cache_dtype": torch.float16}


def kernel_classes() -> dict:
    """Every concrete ``Kernel`` subclass of ``tileops._kernels``, by qualified name."""
    kernels = importlib.import_module("tileops._kernels")
    base = importlib.import_module("tileops._kernels.kernel_base").Kernel
    out = {}
    for info in pkgutil.walk_packages(kernels.__path__, kernels.__name__ + "."):
        with contextlib.suppress(Exception):
            mod = importlib.import_module(info.name)
            for name, cls in vars(mod).items():
                if inspect.isclass(cls) and issubclass(cls, base) and cls is not base and cls.__module__ == mod.__name__:
                    if not inspect.isabstract(cls):
                        out[f"{mod.__name__}.{name}"] = cls
    return out


def constructor_args(cls) -> dict | None:
    """Arguments for ``cls(...)`` from :data:`SIZES`, or None when a required one has no plain value."""
    values = {**SIZES, **_dtypes()}
    out = {}
    for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name in values:
            out[p.name] = values[p.name]
        elif p.default is p.empty:
            return None
    return out


@contextlib.contextmanager
def recording_factories(module):
    """Wrap the module's functions so each call (name, bound arguments, result) is recorded."""
    calls = []
    saved = {}
    for name, fn in list(vars(module).items()):
        target = inspect.unwrap(fn) if callable(fn) else None
        jit_func = getattr(getattr(target, "func", None), "orig_func", None)  # a module-level @tilelang.jit
        home = getattr(jit_func or target, "__module__", "")
        sig = getattr(target, "signature", None) if jit_func else None
        if home != module.__name__ or not (jit_func or inspect.isfunction(target)):
            continue
        sig = sig or inspect.signature(target)

        def wrapper(*a, __fn=fn, __name=name, __sig=sig, **kw):
            result = __fn(*a, **kw)
            try:
                calls.append((__name, dict(__sig.bind(*a, **kw).arguments), result))
            except TypeError:
                pass
            return result

        saved[name] = fn
        setattr(module, name, wrapper)
    try:
        yield calls
    finally:
        for name, fn in saved.items():
            setattr(module, name, fn)


def _facts(compile_fn) -> tuple | None:
    """Values for ``_compile(cfg, *facts)``'s facts: defaults, else False for flags; None if one has neither."""
    out = []
    for p in list(inspect.signature(compile_fn).parameters.values())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is not p.empty:
            out.append(p.default)
        elif p.annotation in (bool, "bool"):
            out.append(False)
        else:
            return None
    return tuple(out)


def _same_kernel(made, kernel) -> bool:
    """Whether a factory's result is the class's kernel (the class may keep a copy of the jit object)."""
    if made is kernel:
        return True
    func = getattr(made, "func", None)
    return func is not None and func is getattr(kernel, "func", None)


def measure(qualname: str, cls, arch) -> dict:
    """Instantiate one kernel class as the library does, then build its factory with tl_aot; compare."""
    from tilelang import tvm

    from tl_aot.config.options import plain_pass_configs
    from tl_aot.gpu.device import default_profile, emulate
    from tl_aot.jit.resolve import func_hash, intercept_compiles
    from tl_aot.jit.seam import CompiledStandIn
    from tl_aot.lower.lower import lower_variant
    from tl_aot.spec import KernelSpec

    args = constructor_args(cls)
    if args is None:
        return {"outcome": "skipped: constructor needs values this harness has no plain spelling for"}
    module = importlib.import_module(cls.__module__)  # a build may have re-imported (or dropped) it
    cls = getattr(module, cls.__name__, cls)  # a build re-imports kernel modules: use the current class
    target = tvm.target.Target({"kind": "cuda", "arch": arch.sm})
    with target, emulate(default_profile(arch)), recording_factories(module) as calls, intercept_compiles() as state:
        try:
            obj = cls(**args)
        except Exception as e:  # noqa: BLE001 (the library refuses this problem: not a tl_aot result)
            return {"outcome": f"skipped: the class refuses the problem ({type(e).__name__})"}
        config = dict(getattr(obj, "config", None) or {})
        kernel = getattr(obj, "kernel", None)
        found = [(n, a) for n, a, r in calls if kernel is not None and _same_kernel(r, kernel)]
        if found and not isinstance(kernel, CompiledStandIn):
            try:
                kernel.compile(**config)  # what forward's self.kernel(**config) compiles
            except Exception as e:  # noqa: BLE001
                return {"outcome": f"skipped: the JIT path itself fails ({type(e).__name__})"}
        elif not found and callable(getattr(obj, "_compile", None)):
            facts = _facts(obj._compile)
            if facts is None:
                return {"outcome": "skipped: the class's _compile needs facts this harness cannot give"}
            try:
                obj._compile(config, *facts)  # the library's own build of its program (forward's first call)
            except Exception as e:  # noqa: BLE001
                return {"outcome": f"skipped: the class's _compile refuses ({type(e).__name__})"}
            jits = [j for j, _, _ in state.jit_calls]
            found = [(n, a) for n, a, r in calls if isinstance(r, CompiledStandIn) or any(_same_kernel(r, j) for j in jits)]
        if not found or not state.requests:
            return {"outcome": "skipped: no factory call of the module made the class's kernel"}
        factory, fargs = found[-1]
        made = next(r for n, a, r in reversed(calls) if n == factory)
        req = made.tl_aot_request if isinstance(made, CompiledStandIn) else state.requests[-1]
        config = {} if isinstance(made, CompiledStandIn) else dict(state.jit_calls[-1][2]) if state.jit_calls else {}
        ref = {"hash": func_hash(req.func), "pass_configs": plain_pass_configs(req.pass_configs), "flags": list(req.compile_flags)}
    source = Path(inspect.getsourcefile(module))
    t0 = time.perf_counter()
    try:
        spec = KernelSpec.create(name="k", source=source, function=factory, args={**fargs, **config}, archs=[arch.sm.removeprefix("sm_")])
        v = lower_variant(spec, arch)
    except Exception as e:  # noqa: BLE001 (a tl_aot failure: reported, the harness goes on)
        return {"outcome": "tl_aot failed", "factory": factory, "error": f"{type(e).__name__}: {str(e)[:600]}"}
    same = v.func_hash == ref["hash"] and dict(v.pass_configs) == {k: json.dumps(x) for k, x in ref["pass_configs"].items()}
    same = same and list(v.compile_flags) == ref["flags"]
    return {
        "outcome": "identical" if same else "DIFFERENT",
        "factory": factory,
        "shape": "compiled in factory" if not config else "two-level" if v.resolved.count("->") else "single",
        "seconds": round(time.perf_counter() - t0, 2),
        **({} if same else {"ours": [v.func_hash, dict(v.pass_configs), list(v.compile_flags)], "jit": ref}),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--match", default="")
    p.add_argument("--json", help="write every result here")
    args = p.parse_args(argv)
    from tl_aot.common.arch import parse_arch

    arch = parse_arch("90a")
    classes = {k: v for k, v in sorted(kernel_classes().items()) if args.match in k}
    if args.limit:
        classes = dict(list(classes.items())[: args.limit])
    results = {}
    for i, (name, cls) in enumerate(classes.items()):
        try:
            results[name] = measure(name, cls, arch)
        except Exception:  # noqa: BLE001
            results[name] = {"outcome": "harness error", "error": traceback.format_exc(limit=3)[-600:]}
        print(f"[{i + 1}/{len(classes)}] {name}: {results[name]['outcome']}", flush=True)
    counts = collections.Counter(r["outcome"].split(":")[0] for r in results.values())
    print(json.dumps(counts, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
