"""A tl_aot library's entries as torch custom operators: ``torch.ops.<namespace>.<entry>``.

Each op's schema and fake (meta) implementation come from the library's manifest, so
``torch.compile(fullgraph=True)`` traces models calling them without a graph break and CUDA graphs
capture them. An entry that returns its outputs becomes a functional op (inputs → outputs); an
entry without outputs becomes an op that mutates every tensor it takes. A library built with torch
ops has a native companion (``lib<name>_torch.so``, :mod:`tl_aot.codegen.torch_native`) whose C++ kernels
serve the ops without a Python frame; torch < 2.10, or a companion that cannot load, falls back to
the Python implementations here (the schemas and fake implementations are the same either way).

Standalone on purpose: this module imports only torch, the standard library and its sibling
:mod:`tl_aot.runtime.torch_fakes` (the fake implementations), never the rest of tl_aot, so a package
built by tl_aot ships a copy of the two as the package ``_tl_aot_torch`` (this module its
``__init__.py``, the sibling beside it: the relative import reads the same in both places) and
depends on nothing more.
"""

from __future__ import annotations

import json
import logging
import operator
import re
import sys
import threading
from typing import Any

from .torch_fakes import Entry, current_device, fake_impl, output_spec, outputs_of, shape_values

__all__ = ["allocating_call", "backend_of", "register", "schema_of", "takes_no_tensor"]

_LOCK = threading.Lock()
#: namespace -> (library name, torch.library.Library, backend): the Library object must stay alive, or torch drops the ops.
_REGISTERED: dict[str, tuple[str, Any, str]] = {}
#: Loaded native companions (kept: their kernels serve registered ops).
_COMPANIONS: list = []
_LOG = logging.getLogger("tl_aot.runtime.torch_ops")


def _scalar_type(dtype: str) -> str:
    if dtype == "bool":
        return "bool"
    if dtype.startswith(("int", "uint")):
        return "int"
    return "float"


def schema_of(entry: Entry) -> str:
    """The op schema of one manifest entry: ``(Tensor x, Tensor b) -> Tensor``, or a mutating one."""
    outs = outputs_of(entry)
    parts = []
    alias = 0
    for p in entry["params"]:
        if p.get("output"):
            continue
        if p["kind"] != "tensor":
            parts.append(f"{_scalar_type(p['dtype'])} {p['name']}")
        elif outs:
            parts.append(f"Tensor {p['name']}")
        else:  # nothing declared as output: any tensor may be written
            if alias >= 26:
                msg = f"entry {entry['name']!r}: more than 26 tensors to mark as mutated; declare its outputs (out_idx)"
                raise ValueError(msg)
            parts.append(f"Tensor({chr(ord('a') + alias)}!) {p['name']}")
            alias += 1
    ret = "()" if not outs else ("Tensor" if len(outs) == 1 else "(" + ", ".join("Tensor" for _ in outs) + ")")
    return f"({', '.join(parts)}) -> {ret}"


def takes_no_tensor(entry: Entry) -> bool:
    """Whether an entry (a manifest entry as a dict) returns outputs and takes no input tensor to place them by."""
    return bool(outputs_of(entry)) and not any(p["kind"] == "tensor" and not p.get("output") for p in entry["params"])


def allocating_call(fn, entry: Entry):
    """``fn``, an entry that takes no input tensor, allocating its outputs with torch as TileLang's JIT does.

    When torch is imported and has CUDA, a call passing the inputs (then maybe a stream) gets outputs
    from ``torch.empty`` on torch's current device, written in place on its current stream; else
    (or when the arguments give no valid shape) the library's own call allocates and reports.
    """
    fn = getattr(fn, "_tl_aot_library_fn", fn)  # already wrapped: wrap the library's function once
    where = f"entry {entry.get('export') or entry['name']!r}"
    params = entry["params"]
    n_in = sum(1 for p in params if not p.get("output"))
    first_out = next(i for i, p in enumerate(params) if p.get("output"))
    names, values = shape_values(entry, where)
    specs = [output_spec(p, names, where) for p in outputs_of(entry)]
    ins = [p for p in params if not p.get("output")]
    int_scalars = {i: p["dtype"] for i, p in enumerate(ins) if p["dtype"].startswith(("int", "uint")) and p["name"] in names}

    def call(*args):
        torch = sys.modules.get("torch")
        # the library's rule: inputs (+ a stream) unless every parameter is passed, told by the first output's place
        alloc = len(args) == n_in or (len(args) == n_in + 1 and (len(args) != len(params) or not hasattr(args[first_out], "__dlpack__")))
        shapes = _shapes(specs, values, args, int_scalars) if alloc and torch is not None and torch.cuda.is_available() else None
        if shapes is None:
            return fn(*args)  # the library allocates, or names the bad argument
        device = current_device(torch)
        made = [torch.empty(shape, dtype=getattr(torch, dt), device=device) for shape, (_, dt) in zip(shapes, specs)]
        outs, ins = iter(made), iter(args[:n_in])
        fn(*[next(outs) if p.get("output") else next(ins) for p in params], *args[n_in:])
        return made[0] if len(made) == 1 else tuple(made)

    call.__name__ = call.__qualname__ = entry.get("export") or entry["name"]
    call.__doc__ = getattr(fn, "__doc__", None)
    call._tl_aot_library_fn = fn  # type: ignore[attr-defined]  # the library function behind the op
    return call


def _shapes(specs: list[Any], values: Any, args: Any, scalars: dict[int, str]) -> Any:
    """The output shapes for ``args``, or None when an argument gives no valid shape (the library then says why)."""
    try:
        if not all(_fits(operator.index(args[i]), dtype) for i, dtype in scalars.items()):
            return None  # out of its dtype's range: refused by the library before anything is allocated
        vals = values(args)
        shapes = [[operator.index(f(vals)) for f in dims] for dims, _ in specs]
    except Exception:  # a scalar of the wrong type: the library's own check names it
        return None
    return None if any(d < 0 for shape in shapes for d in shape) else shapes


def _fits(value: int, dtype: str) -> bool:
    """Whether an integer scalar argument is in the range of its dtype (``int32``, ``uint8``, ...)."""
    bits = int(dtype.removeprefix("u").removeprefix("int"))
    return 0 <= value < 2**bits if dtype.startswith("u") else -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)


def _real(torch, fn, members: list):
    """The Python implementation of one exported entry: the library's function (wrapped where it must be)."""
    if not outputs_of(members[0]):
        return fn
    if takes_no_tensor(members[0]):  # one member: specialisations are picked by input tensors
        return allocating_call(fn, members[0])
    if len(outputs_of(members[0])) == 1:
        return fn  # no Python frame between

    def real(*args):  # several outputs come back as a tvm_ffi.Array
        return tuple(t if isinstance(t, torch.Tensor) else torch.from_dlpack(t) for t in fn(*args))

    return real


def _native_supported(torch) -> str:
    """Why this torch cannot load a native companion ('' when it can: torch >= 2.10, the stable ABI's first)."""
    m = re.match(r"(\d+)\.(\d+)", torch.__version__)
    if m is None or (int(m.group(1)), int(m.group(2))) < (2, 10):
        return f"torch {torch.__version__} predates the LibTorch Stable ABI kernels (2.10)"
    return ""


def _load_companion(torch, path, ns: str) -> str:
    """Load the native companion at ``path`` and register its ops in ``ns``; '' on success, else why not."""
    import ctypes
    import os

    why = _native_supported(torch)
    if why:
        return why
    try:
        # The companion leaves torch's C shim undefined: make torch's own copy visible to it.
        lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
        ctypes.CDLL(os.path.join(lib_dir, "libtorch_cpu.so"), mode=os.RTLD_GLOBAL | os.RTLD_NOLOAD)
        companion = ctypes.CDLL(os.fspath(path))
        error = ctypes.create_string_buffer(512)
        if companion.tl_aot_torch_register(ns.encode(), error, ctypes.c_size_t(len(error))) != 0:
            return f"{path}: {error.value.decode(errors='replace')}"
    except (OSError, AttributeError) as e:
        return f"cannot load {path}: {e}"
    _COMPANIONS.append(companion)
    return ""


def register(functions, manifest, namespace: str | None = None, *, companion=None, backend: str = "auto"):
    """Register every entry of a library as ``torch.ops.<namespace>.<entry>``; returns ``torch.ops.<namespace>``.

    ``functions`` maps entry names to the library's functions, ``manifest`` is its manifest (JSON
    text or the parsed dict), ``namespace`` defaults to the library's name. ``companion`` is the
    library's native companion (``lib<name>_torch.so``): with ``backend="auto"`` its C++ kernels
    serve the ops when this torch can load it (>= 2.10), else the Python registration does;
    ``"native"`` insists on the companion, ``"python"`` ignores it. The returned namespace's
    ``backend`` attribute (and :func:`backend_of`) says which one is active. Registering the same
    library again returns the same namespace; a namespace another library took is an error.
    """
    import torch

    if backend not in ("auto", "native", "python"):
        msg = f"torch ops backend must be 'auto', 'native' or 'python', got {backend!r}"
        raise ValueError(msg)
    if backend == "native" and companion is None:
        msg = "torch ops backend 'native' needs the library's companion (build it with torch_ops enabled)"
        raise ValueError(msg)
    if isinstance(manifest, str):
        manifest = json.loads(manifest)
    lib_name = manifest["library"]
    ns = namespace or lib_name
    if not ns.isidentifier() or ns.startswith("_"):
        msg = f"torch op namespace {ns!r} must be an identifier not starting with '_'"
        raise ValueError(msg)
    with _LOCK:
        taken = _REGISTERED.get(ns)
        if taken is not None:
            if taken[0] != lib_name:
                msg = f"torch op namespace {ns!r} already holds the ops of tl_aot library {taken[0]!r}; pass another namespace"
                raise ValueError(msg)
            return getattr(torch.ops, ns)
        groups: dict[str, list[Entry]] = {}
        for entry in manifest["entries"]:
            groups.setdefault(entry.get("export") or entry["name"], []).append(entry)
        active = _define(torch, ns, groups, functions, companion if backend != "python" else None, backend == "native")
        _REGISTERED[ns] = (lib_name, active[0], active[1])
    ops = getattr(torch.ops, ns)
    if "backend" not in groups:
        ops.backend = active[1]
    return ops


def _define(torch, ns: str, groups: dict[str, list[Entry]], functions, companion, insist: bool):
    """Define the ops of ``groups`` in ``ns``, natively from ``companion`` when it loads; (torch Library, backend)."""
    why = _load_companion(torch, companion, ns) if companion is not None else "no companion"
    if why and insist:
        msg = f"torch ops of namespace {ns!r}: the native companion cannot serve them: {why}"
        raise RuntimeError(msg)
    used = "python" if why else "native"
    if companion is not None:
        _LOG.debug("torch ops %s: %s registration%s", ns, used, f" ({why})" if why else f" from {companion}")
    lib = torch.library.Library(ns, "FRAGMENT")
    for name, members in groups.items():  # one op per exported entry, whatever its specialisations
        if used == "python":
            lib.define(name + schema_of(members[0]))
            # No input tensor leaves the dispatcher no CUDA key to pick: such an op serves every key.
            lib.impl(name, _real(torch, functions[name], members), "CompositeExplicitAutograd" if takes_no_tensor(members[0]) else "CUDA")
        torch.library.register_fake(f"{ns}::{name}", fake_impl(torch, members), lib=lib)
    return lib, used


def backend_of(namespace: str) -> str | None:
    """Which registration serves the ops of ``namespace``: 'native', 'python', or None when not registered here."""
    taken = _REGISTERED.get(namespace)
    return None if taken is None else taken[2]
