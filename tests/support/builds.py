"""Building the test kernels' libraries: once per session, or prebuilt (``TL_AOT_TEST_LIBDIR``) on the CPU machine for the GPU one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["KERNELS", "TESTLIB_SPEC", "build_spec", "cuda_available", "prebuilt_or_build", "with_runtime"]

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
TESTLIB_SPEC = KERNELS / "testlib.toml"


def cuda_available() -> bool:
    """Whether torch is importable and sees a CUDA device (GPU tests skip otherwise)."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def prebuilt_or_build(spec: Path, name: str, tmp_path_factory, cache_dir) -> Path:
    """``lib<name>.so`` from ``TL_AOT_TEST_LIBDIR`` when set (prebuilt on the CPU machine), else built now."""
    prebuilt = os.environ.get("TL_AOT_TEST_LIBDIR")
    if prebuilt:
        return Path(prebuilt) / f"lib{name}.so"
    from tl_aot.pipeline.library import build_library
    from tl_aot.spec import load_spec_file

    out = tmp_path_factory.mktemp(name)
    return build_library(load_spec_file(spec), out_dir=out, cache_dir=cache_dir, log=None).library


def build_spec(spec: Path, tmp_path_factory, cache_dir, *, jobs: int = 2, keep_going: bool = False):
    """Build the spec file ``spec`` into a fresh folder: (BuildResult, the loaded library); ``keep_going`` as ``--keep-going``."""
    import tl_aot
    from tl_aot.pipeline.library import build_library
    from tl_aot.spec import load_spec_file

    out = tmp_path_factory.mktemp(spec.stem)
    result = build_library(load_spec_file(spec), out_dir=out, cache_dir=cache_dir, log=None, jobs=jobs, keep_going=keep_going)
    return result, tl_aot.load(result.library)


def with_runtime(cache: Path, runtime: Path) -> Path:
    """``cache``, empty but for a copy of the launcher runtime's object ``runtime`` (the ``session_runtime`` fixture's).

    For a build into a cache of its own whose point is its variants (lowered, compiled, shipped to
    workers), not the runtime: that object depends only on the toolchain, and compiling it costs
    each such cache 2-4 s of CPU. A build as a process finds it too (the same toolchain, the same key).
    """
    from tl_aot.cuda.host_objects import OBJECTS_FOLDER

    shutil.copytree(runtime.parent, Path(cache) / OBJECTS_FOLDER / runtime.parent.name)
    return Path(cache)
