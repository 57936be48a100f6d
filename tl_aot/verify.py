"""Check that a library holds exactly the kernels the operator library's own JIT compiles.

Every variant of a tl_aot library records the JIT compile request it answers: the prim_func (its
key covers the IR without source locations) and the options (``out_idx``, pass configs, compile
flags with headers by content, backend, target). ``verify`` compares them with a capture of the
library's workload (``python -m tl_aot capture``, on a GPU or with ``--device`` on a CPU): per
entry and arch, the variant is *identical* to a request the JIT made, *different* (the nearest
request of the same prim_func name, and what differs), or *not reached* by the workload.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Finding", "verify", "report"]

#: The options compared one by one when a variant has no identical request.
_OPTIONS = ("out_idx", "pass_configs", "compile_flags", "backend", "target")


@dataclass(frozen=True)
class Finding:
    """What ``verify`` found for one variant of one entry."""

    library: str
    entry: str
    arch: str
    status: str  # identical, different, unreached, unchecked
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status in ("identical", "unchecked")


def verify(manifests, kernels: dict) -> list[Finding]:
    """Findings for every variant of ``manifests`` (``(library name, Manifest)`` pairs) against a record's ``kernels``."""
    by_name: dict[str, list] = {}
    for key, item in kernels.items():
        by_name.setdefault(str(item.get("name", "main")), []).append((key, item))
    ccs = {_cc(d["arch"]) for item in kernels.values() for d in item.get("devices", []) if d.get("arch")}
    hashes: dict[str, str] = {}
    out = []
    for library, manifest in manifests:
        for e in manifest.entries:
            for v in e.variants:
                key = v.request_key or e.capture_key
                where = (library, e.name, v.arch)
                if ccs and _cc(v.arch) not in ccs:
                    out.append(Finding(*where, "unchecked", f"the workload ran on sm_{'/'.join(sorted(ccs))} only"))
                elif not key or not v.request:
                    out.append(Finding(*where, "unchecked", "built from a plain prim_func or by an older tl_aot: no request recorded"))
                elif key in kernels:
                    out.append(Finding(*where, "identical", _origin(kernels[key])))
                else:
                    request = json.loads(v.request)  # its compile flags are portable already
                    candidates = by_name.get(request["name"], [])
                    if not candidates:
                        detail = f"the workload's JIT compiled no prim_func named {request['name']!r}"
                        out.append(Finding(*where, "unreached", detail))
                        continue
                    scored = []
                    for k, item in candidates:
                        diffs, same_func = _differences(v.func_hash, request["options"], item, hashes, k)
                        named = _jit_name(item) and _jit_name(item) in v.resolved
                        scored.append((not same_func, not named, len(diffs), diffs, item))
                    other_func, _, _, diffs, item = min(scored, key=lambda s: s[:3])
                    if other_func:  # no request for this prim_func: the workload never made this call
                        detail = f"no request for this prim_func; nearest {_origin(item)}: {'; '.join(diffs)}"
                        out.append(Finding(*where, "unreached", detail))
                    else:
                        out.append(Finding(*where, "different", f"{_origin(item)} asks for it with other options: {'; '.join(diffs)}"))
    return out


def _jit_name(item: dict) -> str:
    """The short name of the jit function a recorded request came through ("" if none)."""
    jit = next((o["jit"] for o in item.get("origins", []) if o.get("jit")), "")
    return jit.rsplit(".", 1)[-1]


def _differences(func_hash: str, options: dict, item: dict, hashes: dict, key: str) -> tuple[list[str], bool]:
    """What differs between a variant and a recorded request, and whether the prim_func is the same.

    The prim_func is compared first (structural hash), then each option.
    """
    from .capture import recorded_flags

    theirs = {**item.get("options", {}), "compile_flags": recorded_flags(item)}
    out = []
    if key not in hashes:
        hashes[key] = _hash_of(item)
    if hashes[key] != func_hash:
        out.append(f"a different prim_func (structural hash {func_hash} built, {hashes[key]} requested)")
    for name in _OPTIONS:
        mine, other = options.get(name), theirs.get(name)
        if name == "pass_configs" and mine != other:
            mine, other = mine or {}, other or {}
            keys = sorted(k for k in {*mine, *other} if mine.get(k) != other.get(k))
            out.append("pass_configs: " + ", ".join(f"{k} = {_show(mine, k)} built, {_show(other, k)} requested" for k in keys))
        elif mine != other:
            out.append(f"{name}: {json.dumps(mine)} built, {json.dumps(other)} requested")
    return out or ["the prim_funcs differ in what the structural hash ignores (names, attributes)"], hashes[key] == func_hash


def _hash_of(item: dict) -> str:
    from tilelang import tvm

    from .resolve import func_hash

    try:
        return func_hash(tvm.ir.load_json(item["ir"]))
    except Exception:  # noqa: BLE001 (a record from another TileLang: reported as unknown, never a crash)
        return "unknown"


def _show(d: dict, k: str) -> str:
    return json.dumps(d[k]) if k in d else "absent"


def _origin(item: dict) -> str:
    """Where a recorded request came from: the jit function and its arguments, or the caller's file:line."""
    o = next((o for o in item.get("origins", []) if o.get("jit")), (item.get("origins") or [{}])[0])
    if o.get("jit"):
        return f"{o['jit']}({', '.join(f'{k}={v}' for k, v in o.get('args', {}).items())})"
    if o.get("file"):
        return f"{Path(o['file']).name}:{o.get('line', '?')} ({o.get('function', '?')})"
    return f"prim_func {item.get('name', 'main')!r}"


def _cc(arch: str) -> str:
    return "".join(ch for ch in arch.removeprefix("sm_") if ch.isdigit())


def report(findings: list[Finding], *, allow_unreached: bool = False) -> tuple[str, bool]:
    """The findings as lines for a terminal, and whether the check passed."""
    lines = []
    for f in findings:
        mark = {"identical": "ok", "different": "DIFFERENT", "unreached": "NOT REACHED", "unchecked": "unchecked"}[f.status]
        lines.append(f"  {mark:<11} {f.entry} ({f.arch}): {f.detail}")
    counts = {s: sum(1 for f in findings if f.status == s) for s in ("identical", "different", "unreached", "unchecked")}
    passed = counts["different"] == 0 and (allow_unreached or counts["unreached"] == 0)
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    lines.append(f"tl_aot verify: {len(findings)} variants: {summary or 'none'}: " + ("passed" if passed else "FAILED"))
    return "\n".join(lines), passed
