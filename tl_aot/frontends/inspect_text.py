"""What ``python -m tl_aot inspect`` prints: a library's manifest as text, or as JSON with pass configs as objects."""

from __future__ import annotations

import json

__all__ = ["describe", "manifest_json"]


def describe(manifest) -> str:
    """Human-readable description of a manifest (what ``inspect`` prints)."""
    exports = manifest.exports()
    lines = [
        f"library {manifest.library}: {len(exports)} entr{'y' if len(exports) == 1 else 'ies'}",
        f"  built with tl_aot {manifest.tl_aot_version}, TileLang {manifest.tilelang_version}, "
        f"nvcc {manifest.nvcc_version}, launcher ABI {manifest.abi_version}",
    ]
    if manifest.compiler:
        lines.append(f"  compiler: {manifest.compiler}")
    if manifest.driver_min_cuda:
        driver = f" ({manifest.driver_min_version} or newer on Linux)" if manifest.driver_min_version else ""
        lines.append(f"  loads on NVIDIA drivers supporting CUDA {manifest.driver_min_cuda} or newer{driver}")
    if manifest.left_out:
        lines.append(f"  LEFT OUT by a --keep-going build: {len(manifest.left_out)} variant(s)")
        lines.extend(f"    {x.spelled()}" for x in manifest.left_out)
    if manifest.tunings:
        lines.append(f"  run-time tunings served: {len(manifest.tunings)} (TileLang's autotuner answered with the recorded choice)")
        by_key = {e.capture_key: e.name for e in manifest.entries if e.capture_key}
        for t in manifest.tunings:
            lines.append(
                f"    {t.function}({t.args[:80]}) on sm_{t.cc}: candidate {t.index + 1}/{t.candidates} {t.config} "
                f"-> {by_key.get(t.request_key, t.request_key)}"
            )
    position = {e.name: (i, len(ms)) for ms in exports.values() for i, e in enumerate(ms)}
    for e in manifest.entries:
        lines.append("")
        i, n = position[e.name]
        if n > 1 and i == 0:
            lines.append(f"{e.exported}: {n} specialisations, one function picking by the input tensors' dtypes and sizes")
        lines.append(f"{e.signature()}" + (f"   [specialisation {i + 1}/{n}]" if n > 1 else ""))
        lines.append(f"  from {e.source}:{e.function}({', '.join(f'{k}={v}' for k, v in e.args)})")
        if e.captured_on:
            lines.append(f"  captured on {', '.join(e.captured_on)}")
        for p in e.params:
            if p.is_tensor:
                role = " (output: returned when the call passes the inputs alone)" if p.output else ""
                k = p.packing
                how = f"{k.pack} per element, as TileLang's JIT takes it" if k and k.pack > 1 else "any DLPack dtype of these bits"
                packed = f" packed in {p.storage} ({how})" if k and p.storage else ""
                lines.append(f"  param {p.name}: tensor {p.dtype_spelled}[{', '.join(str(d) for d in p.shape)}]{packed}{role}")
            else:
                lines.append(f"  param {p.name}: scalar {p.dtype_spelled}")
        if e.symbols:
            lines.append("  dynamic: " + ", ".join(s.spelled() for s in e.symbols))
        for v in e.variants:
            backend = "CuTeDSL backend, kernels found by pattern" if v.backend == "cutedsl" else "CUDA C++ backend"
            lines.append(f"  arch {v.arch}: {v.image_kind} {v.image_bytes} bytes ({backend})")
            if v.device:
                lines.append(f"    device queries answered as {v.device}")
            if v.config:
                lines.append(f"    config ({v.config_source}): " + ", ".join(f"{k}={val}" for k, val in v.config))
            if v.resolved:
                lines.append(f"    built from {v.resolved}  [prim_func {v.func_hash}]")
            if v.request_key:
                lines.append(f"    answers the JIT request {v.request_key} (served by tl_aot.serve, checked by verify)")
            if v.pass_configs:
                lines.append("    pass_configs: " + ", ".join(f"{k}={val}" for k, val in v.pass_configs))
            if v.compile_flags:
                lines.append("    compile_flags: " + " ".join(v.compile_flags))
            for w in v.workspaces:
                lines.append(f"    workspace {w.name}: {w.dtype}[{', '.join(w.shape)}], allocated per call")
            for k in v.kernels:
                grid = ", ".join(k.grid_display or k.grid)
                block = ", ".join(k.block_display or k.block)
                extra = []
                if k.dynamic_smem not in ("0", ""):
                    extra.append(f"smem {k.dynamic_smem} B")
                if k.cluster_dims:
                    extra.append(f"cluster ({', '.join(map(str, k.cluster_dims))})")
                if k.cooperative:
                    extra.append("cooperative")
                lines.append(f"    kernel {k.name}: grid ({grid}) block ({block}){'; ' + ', '.join(extra) if extra else ''}")
            for d in v.tma_descriptors:
                lines.append(f"    tma {d.name}: {d.mode} on {d.tensor}, box ({', '.join(d.box_dim)}), swizzle {d.swizzle}")
    return "\n".join(lines)


def manifest_json(text: str) -> str:
    """The manifest as JSON, each variant's ``pass_configs`` an object (key -> value) as used."""
    data = json.loads(text)
    if data.get("driver_min_cuda"):  # the oldest driver that loads the library, as its own key
        data["driver"] = {"min_cuda": data["driver_min_cuda"], "min_version": data.get("driver_min_version", "")}
    for e in data.get("entries", []):
        for v in e.get("variants", []):
            v["pass_configs"] = {k: json.loads(val) for k, val in v.get("pass_configs", [])}
    return json.dumps(data, indent=2)
