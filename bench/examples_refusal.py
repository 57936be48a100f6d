"""Does TileLang itself refuse a captured kernel for an arch? The check behind the sweep's classification.

    python bench/examples_refusal.py RECORD ENTRY ARCH      # e.g. rec.json flashattn_d9bf255af9 sm_80

ENTRY is the entry a ``build --capture`` named the kernel (its record key's first 10 hex digits at
the end). The recorded prim_func is read back and lowered by ``tilelang.lower`` for ARCH under its recorded pass
configs, as TileLang's JIT would on that GPU, with nothing of tl_aot's in the way. Prints one JSON object:
``{"tilelang": "lowers"}`` or ``{"tilelang": "refuses", "error": "<its first error line>"}``. A
variant a build left out that TileLang lowers is tl_aot's to explain (or, like a kernel whose shared
memory the arch cannot give, one that could not launch there either).
"""

from __future__ import annotations

import json
import sys


def _first_error_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    picked = next((ln for ln in lines if "Check failed" in ln or "Error" in ln), lines[-1] if lines else type(exc).__name__)
    return picked[:200]


def verdict(record: str, entry: str, arch: str) -> dict[str, str]:
    """TileLang's own verdict on ENTRY of RECORD for ARCH."""
    import tilelang

    from tl_aot.jit.ir_record import load_ir

    suffix = entry.rsplit("_", 1)[-1]
    kernels = json.loads(open(record).read())["kernels"]
    key = next(k for k in kernels if k.startswith(suffix))
    target = tilelang.tvm.target.Target({"kind": "cuda", "arch": arch})
    pass_configs = kernels[key]["options"].get("pass_configs") or {}
    try:
        with target, tilelang.tvm.transform.PassContext(opt_level=3, config=pass_configs):
            tilelang.lower(load_ir(kernels[key]["ir"]), target=target)
    except Exception as exc:  # noqa: BLE001 (TileLang's refusals come as any exception type)
        return {"tilelang": "refuses", "error": _first_error_line(exc)}
    return {"tilelang": "lowers"}


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    print(json.dumps(verdict(*sys.argv[1:])))
