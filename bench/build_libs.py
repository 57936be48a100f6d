"""Build, on the CPU machine, everything ``run.py`` needs on the GPU machine, into one small folder.

    python bench/build_libs.py [-o .benchlibs] [-j N] [--force]

Writes into the folder (carry it to the GPU machine; it is git-ignored through .git/info/exclude):

* ``libtl_aot_bench.so``: the entries of ``bench/bench.toml`` (add_one, gemm_f16, gemm_bf16,
  softmax) for sm_90a, built by tl_aot's own pipeline (``tl_aot.pipeline.library.build_library``);
* ``libtl_aot_bench_noop.so``: a TVM-FFI no-op (the launch floor's call half, ``cpp/noop.cc``);
* ``culaunch`` + ``add_one.sm_90a.cubin`` + ``culaunch.json``: a C++ loop of ``cuLaunchKernel`` on
  the cubin tl_aot embedded for ``add_one`` (the floor's launch half, ``cpp/culaunch.cc``);
* ``entrycall``: the launch-path profile (``cpp/entrycall.cc``): the ``add_one`` entry called from C++,
  interleaved with plain ``cuLaunchKernel``, to split tl_aot's launch cost from Python's and the driver's;
* ``build_info.json``: versions and the build time.

Reads ``MAX_JOBS`` (default parallel nvcc jobs) and ``TL_AOT_CACHE_DIR`` like ``python -m tl_aot build``.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path[0] = str(Path(__file__).resolve().parent.parent)  # run as a script: import bench.* and tl_aot

from bench.common import ROOT, environment

HERE = Path(__file__).resolve().parent
SPEC = HERE / "bench.toml"
LIBRARY = "tl_aot_bench"
NOOP = "tl_aot_bench_noop"
LAUNCH_ENTRY = "add_one"
_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1}


def build_bench_library(out: Path, *, jobs: int | None, force: bool):
    """``libtl_aot_bench.so`` through tl_aot's build pipeline; returns its BuildResult."""
    from tl_aot.pipeline.library import build_library
    from tl_aot.spec import load_spec_file

    return build_library(load_spec_file(SPEC), out_dir=out, jobs=jobs, force=force, log=lambda s: print(s, flush=True))


def build_noop(out: Path) -> Path:
    """The no-op TVM-FFI library, compiled and linked like tl_aot links its libraries."""
    from tl_aot.cuda.toolchain import find_cxx, run, tvm_ffi_paths

    p = tvm_ffi_paths()
    lib = out / f"lib{NOOP}.so"
    cmd = [
        find_cxx(), "-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
        "-I", p["include"], "-I", p["dlpack"], str(HERE / "cpp" / "noop.cc"),
        "-o", str(lib), "-L" + p["libdir"], "-ltvm_ffi", "-Wl,--no-undefined",
    ]  # fmt: skip
    run(cmd, what="compiling the no-op TVM-FFI library")
    return lib


def build_tool(name: str, out: Path) -> Path:
    """Compile ``cpp/<name>.cc`` into ``out/<name>`` (the driver is resolved with dlopen: no libcuda needed).

    ``culaunch`` is the floor's cuLaunchKernel loop; ``entrycall`` the launch-path profile, which
    calls a tl_aot entry from C++ and so also needs tvm-ffi's headers and libtvm_ffi.
    """
    from tl_aot.cuda.toolchain import cuda_include_dir, find_cxx, run, tvm_ffi_paths

    exe = out / name
    cmd = [find_cxx(), "-std=c++17", "-O2", "-I", cuda_include_dir(), str(HERE / "cpp" / f"{name}.cc"), "-o", str(exe), "-ldl"]
    if name == "entrycall":
        p = tvm_ffi_paths()
        cmd += ["-I", p["include"], "-I", p["dlpack"], "-L" + p["libdir"], "-ltvm_ffi"]
    run(cmd, what=f"compiling bench/cpp/{name}.cc")
    return exe


def _static_int(expr: str, what: str) -> int:
    try:
        return int(str(expr))
    except ValueError:
        msg = f"{what} is {expr!r}, not a constant: the launch-floor loop needs a statically shaped kernel"
        raise SystemExit(msg) from None


def export_launch_kernel(out: Path, result) -> dict:
    """Copy the cubin tl_aot embedded for the launch entry next to the loop, with its launch config."""
    from tl_aot.common.arch import parse_arch
    from tl_aot.common.cpp_spelling import image_symbol

    entry = result.manifest.entry(LAUNCH_ENTRY)
    variant = next(v for v in entry.variants if v.arch == parse_arch("sm_90a"))
    if len(variant.kernels) != 1:
        raise SystemExit(f"{LAUNCH_ENTRY}: expected one device kernel, found {len(variant.kernels)}")
    k = variant.kernels[0]
    if any(not a.ctype.endswith("*") for a in k.args):
        raise SystemExit(f"{LAUNCH_ENTRY}: the launch-floor loop passes pointers only, the kernel takes {[a.ctype for a in k.args]}")
    src = out / ".tl_aot" / LIBRARY / f"{image_symbol(entry.name, variant.arch)}.bin"
    if not src.is_file():
        raise SystemExit(f"{src} is missing: tl_aot's build folder layout changed; update bench/build_libs.py")
    cubin = out / f"{LAUNCH_ENTRY}.{variant.arch.sm}.cubin"
    shutil.copyfile(src, cubin)
    nbytes = max(math.prod(_static_int(d, f"{p.name} dim") for d in p.shape) * _ITEMSIZE[p.dtype] for p in entry.params if p.is_tensor)
    cfg = {
        "entry": entry.name,
        "cubin": cubin.name,
        "kernel": k.name,
        "grid": [_static_int(g, "grid") for g in k.grid],
        "block": [_static_int(b, "block") for b in k.block],
        "smem": _static_int(k.dynamic_smem, "dynamic shared memory"),
        "num_ptr_args": len(k.args),
        "bytes": nbytes,
    }
    if cfg["grid"][1:] != [1, 1] or cfg["block"][1:] != [1, 1]:
        raise SystemExit(f"{LAUNCH_ENTRY}: the launch-floor loop launches 1-D grids and blocks only, got {cfg}")
    (out / "culaunch.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return cfg


def _exclude_from_git(out: Path) -> None:
    """Keep the output folder out of git (a build output), when it lies inside this checkout."""
    try:
        rel = out.resolve().relative_to(ROOT)
    except ValueError:
        return
    exclude = ROOT / ".git" / "info" / "exclude"
    if not exclude.parent.is_dir():
        return
    line = f"/{rel.as_posix()}/"
    lines = exclude.read_text().splitlines() if exclude.is_file() else []
    if line not in lines:
        with open(exclude, "a") as f:
            f.write(line + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", default=str(ROOT / ".benchlibs"), help="output folder (default: .benchlibs in the checkout)")
    ap.add_argument("-j", "--jobs", type=int, help="parallel nvcc jobs (default: MAX_JOBS or the CPU count)")
    ap.add_argument("--force", action="store_true", help="rebuild every variant, ignoring tl_aot's cache")
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    _exclude_from_git(out)
    t0 = time.perf_counter()
    result = build_bench_library(out, jobs=args.jobs, force=args.force)
    launch_cfg = export_launch_kernel(out, result)
    noop = build_noop(out)
    exe = build_tool("culaunch", out)
    build_tool("entrycall", out)
    info = {
        "library": result.library.name,
        "noop_library": noop.name,
        "culaunch": exe.name,
        "launch_kernel": launch_cfg,
        "seconds": round(time.perf_counter() - t0, 2),
        "built_on": environment(gpu=False),
    }
    (out / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"bench libraries in {out} ({size / 2**20:.1f} MiB with tl_aot's build cache); carry this folder to the GPU machine")
    return 0


if __name__ == "__main__":
    sys.exit(main())
