"""Why a JIT's device code differs from the build's lowering of the same prim_func (issue 31, run on the GPU machine).

For each TileOPs layer-norm kernel of the smoke tests, in the order the tests compile them (float32,
float16, bfloat16 at M=1024, then M=4), in one process with an empty TileLang cache: the digest of
the device code TileLang's JIT generated, the digest of ``tilelang.lower`` of the same prim_func
for the JIT's own target, and for ``{"kind": "cuda", "arch": "sm_90a"}`` (what a build lowers
for), plus the JIT's target. Sources that differ are written to ``$OUT`` for a diff. Run:
``PYTHONPATH=.tileops/src python bench/device_code_diag_gpu.py``. TileOPs is imported from where
it lies, never copied.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

__all__ = ["main"]


def main() -> int:
    """Compile, lower and compare; one line per kernel, differing sources under $OUT."""
    os.environ["TILELANG_CACHE_DIR"] = tempfile.mkdtemp(prefix="tl_cache_")
    import torch
    from tilelang import tvm
    from tileops.kernels.norm.layer_norm import _layer_norm_kernel

    from tl_aot.capture.device_code import digest, lower, spell_target

    out = Path(os.environ.get("OUT", "."))
    build_target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    print("device", torch.cuda.get_device_name(0), file=sys.stderr)
    for m in (1024, 4):
        for dtype in ("float32", "float16", "bfloat16"):
            jit = _layer_norm_kernel(m, 4096, 1e-5, dtype)
            kernel = jit.compile(1, 128)
            func = jit.get_tir(1, 128)
            jit_src = kernel.get_kernel_source()
            with kernel.target:
                again = lower(func, kernel.target, {}).kernel_source
            with build_target:
                built = lower(func, build_target, {}).kernel_source
            name = f"layer_norm_{dtype}_{m}"
            same = digest(jit_src) == digest(again) == digest(built)
            print(name, "jit", digest(jit_src), "relowered", digest(again), "build", digest(built), "same" if same else "DIFFERS")
            print("  jit target", spell_target(kernel.target))
            if not same:
                for tag, text in (("jit", jit_src), ("relowered", again), ("build", built)):
                    (out / f"{name}.{tag}.cu").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
