"""Cost per kernel (issue 34): CPU-seconds per kernel, tl_aot's build vs TileLang's JIT compile, same kernels, same parallelism.

    python bench/cost_per_kernel.py [--spec bench/cost_mix.toml] [-j 2] [--arch 90a] [--out cost.jsonl] [--cuts]

* ``tl_aot``: ``python -m tl_aot build --spec SPEC -j J`` from an empty variant cache (the launcher
  runtime's object, built once per toolchain, is built first and shared), in a fresh process.
* ``jit``: J fresh processes, each importing TileLang and compiling its share of the same variants
  (round robin) with ``tilelang.compile`` for the same target, TileLang's kernel cache off
  (``TILELANG_DISABLE_CACHE=1``). The prim_func, pass configs and flags are those TileLang's JIT gets
  from each factory (tl_aot's resolver intercepts that compile; the factory call is in both).
* CPU-seconds are the ``getrusage(RUSAGE_CHILDREN)`` of this process around each run: the build or
  worker processes and every tool they waited for (lowering workers, nvcc, cicc, ptxas, the host
  compiler). ``ratio`` = tl_aot's per kernel / the JIT's (goal <= 0.5).
* ``--cuts``: what parts of the cost are: ``import tilelang`` in one process (paid per lowering
  worker and per JIT process), and nvcc over the variants' CUDA sources: all of one arch and flags
  batched as a build compiles them (one front end, then ptxas per variant: ``compile_images``),
  each alone as tl_aot compiles one variant (CUDA -> PTX, paths mapped, own part -> cubin), in one
  step as TileLang's JIT runs it, and that without ``-lineinfo``.

Run it on a quiet machine: the load average goes into each line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_JOB_TIME = re.compile(r"job time: lowering ([\d.]+) s \((.*?)\), nvcc ([\d.]+) s, host compile ([\d.]+) s, link ([\d.]+) s")

# What one JIT process runs: compile its share of the spec's variants as TileLang's JIT would.
_JIT_WORKER = r"""
import json, sys, time
spec_file, arch_text, share, nshares = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
t0 = time.perf_counter()
import tilelang
from tilelang import tvm
from tl_aot.common.arch import parse_arch
from tl_aot.gpu.device import default_profile, emulate
from tl_aot.lower.lower import _resolve
from tl_aot.spec import load_spec_file
t_import = time.perf_counter() - t0
arch = parse_arch(arch_text)
entries = load_spec_file(spec_file, archs=[arch_text]).entries
mine = [e for i, e in enumerate(entries) if i % nshares == share]
target = tvm.target.Target({"kind": "cuda", "arch": arch.sm})
times = []
for spec in mine:
    t = time.perf_counter()
    with target, emulate(default_profile(arch)):
        r = _resolve(spec, arch, spec.name)
        out_idx = r.out_idx if spec.out_idx is None else list(spec.out_idx)
        kwargs = {"out_idx": out_idx, "target": target, "pass_configs": dict(r.pass_configs)}
        if r.compile_flags:
            kwargs["compile_flags"] = list(r.compile_flags)
        tilelang.compile(r.func, **kwargs)
    times.append([spec.name, round(time.perf_counter() - t, 3)])
print(json.dumps({"import_s": round(t_import, 3), "kernels": times}))
"""


#: Builds the launcher runtime's object into a cache folder, keyed as a build keys it.
_WARM_RUNTIME = (
    "import sys; from tl_aot.cuda.host_objects import runtime_object as r; from tl_aot.pipeline.stages import objects_key as k; "
    "from tl_aot.cuda.toolchain import nvcc_version as n; from tl_aot.common.versions import package_version as p; "
    "r(sys.argv[1], extra_key=k(n(), p('apache-tvm-ffi')))"
)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), TILELANG_DISABLE_CACHE="1")


def tl_aot_build(spec: Path, jobs: int, arch: str, work: Path) -> dict:
    """One fresh ``python -m tl_aot build`` of ``spec``: wall, CPU-seconds and its job-time line."""
    out, cache = work / "tl_aot-out", work / "tl_aot-cache"
    warm = work / "runtime-cache"
    if not warm.is_dir():  # the launcher runtime object: once per toolchain, not per build
        subprocess.run(
            [sys.executable, "-c", _WARM_RUNTIME, str(warm)],
            check=True,
            env=_env(),
        )
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    shutil.copytree(warm, cache)
    cmd = [
        sys.executable,
        "-m",
        "tl_aot",
        "build",
        "--spec",
        str(spec),
        "--arch",
        arch,
        "-o",
        str(out),
        "-j",
        str(jobs),
        "--cache-dir",
        str(cache),
    ]
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=_env(), cwd=ROOT)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if proc.returncode != 0:
        raise RuntimeError(f"tl_aot build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    kernels = len(re.findall(r"\] nvcc ", proc.stdout))
    rec = {"what": "tl_aot", "jobs": jobs, "kernels": kernels, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}
    rec["cpu_s_per_kernel"] = round(cpu / max(1, kernels), 3)
    m = _JOB_TIME.search(proc.stdout)
    if m:
        rec.update(lowering_s=float(m[1]), lowering_in=m[2], nvcc_s=float(m[3]), host_s=float(m[4]), link_s=float(m[5]))
    return rec


def jit_compile(spec: Path, jobs: int, arch: str) -> dict:
    """``jobs`` fresh processes compiling the spec's variants with TileLang's JIT: wall, CPU-seconds, per-kernel wall."""
    cpu0, t0 = _children_cpu(), time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _JIT_WORKER, str(spec), arch, str(i), str(jobs)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            cwd=ROOT,
        )
        for i in range(jobs)
    ]
    outs = [p.communicate() for p in procs]
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    kernels, imports = [], []
    for p, (out, err) in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"a JIT process failed ({p.returncode}):\n{err[-3000:]}")
        data = json.loads(out.strip().splitlines()[-1])
        kernels += data["kernels"]
        imports.append(data["import_s"])
    rec = {"what": "jit", "jobs": jobs, "kernels": len(kernels), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}
    rec.update(cpu_s_per_kernel=round(cpu / max(1, len(kernels)), 3), import_wall_s=imports, per_kernel_wall_s=kernels)
    return rec


def cuts(work: Path) -> list[dict]:
    """``import tilelang`` CPU, and nvcc's cost per variant: batched, alone, one step as the JIT runs it, without -lineinfo."""
    from tl_aot.common.metadata import LoweredVariant
    from tl_aot.common.metadata_json import from_json
    from tl_aot.cuda.device_image import Unit, compile_image, compile_images
    from tl_aot.cuda.nvcc_command import nvcc_command

    recs = []
    cpu0 = _children_cpu()
    subprocess.run([sys.executable, "-c", "import tilelang"], check=True, env=_env())
    recs.append({"what": "cut", "name": "import tilelang (one process)", "cpu_s": round(_children_cpu() - cpu0, 2)})
    totals = {"batched (tl_aot build)": 0.0, "alone (tl_aot, one variant)": 0.0, "one_step (JIT)": 0.0, "one_step_no_lineinfo": 0.0}
    variants = [from_json(LoweredVariant, f.read_text()) for f in sorted((work / "tl_aot-cache").glob("*/variant.json"))]
    groups: dict = {}
    for i, v in enumerate(variants):
        groups.setdefault((v.arch, tuple(v.nvcc_options)), []).append(Unit(f"k{i}", v.cuda_source, "bench"))
    for (arch, options), units in groups.items():
        d = Path(tempfile.mkdtemp(dir=work))
        c = _children_cpu()
        compile_images(arch, d, units, options)
        totals["batched (tl_aot build)"] += _children_cpu() - c
        shutil.rmtree(d, ignore_errors=True)
    n = 0
    for v in variants:
        d = Path(tempfile.mkdtemp(dir=work))
        c = _children_cpu()
        compile_image(v.arch, d, "k", v.cuda_source, v.nvcc_options, what="bench")
        totals["alone (tl_aot, one variant)"] += _children_cpu() - c
        (d / "k.cu").write_text(v.cuda_source)
        for label, drop in (("one_step (JIT)", False), ("one_step_no_lineinfo", True)):
            cmd = nvcc_command(arch, "k.cu", "k.cubin", v.nvcc_options)
            if drop:
                cmd.remove("-lineinfo")
            c = _children_cpu()
            subprocess.run(cmd, cwd=d, check=True, capture_output=True)
            totals[label] += _children_cpu() - c
        shutil.rmtree(d, ignore_errors=True)
        n += 1
    for label, total in totals.items():
        recs.append(
            {
                "what": "cut",
                "name": f"nvcc {label}",
                "variants": n,
                "cpu_s": round(total, 2),
                "cpu_s_per_kernel": round(total / max(1, n), 3),
            }
        )
    return recs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default=str(HERE / "cost_mix.toml"))
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--arch", default="90a")
    ap.add_argument("--out", default="")
    ap.add_argument("--cuts", action="store_true", help="also measure what the cost is made of (import, nvcc steps and flags)")
    ap.add_argument("--work", default="", help="scratch folder (default: a temporary one)")
    args = ap.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="tl_aot_cost_"))
    work.mkdir(parents=True, exist_ok=True)
    out = open(args.out, "a") if args.out else None  # noqa: SIM115

    def emit(rec: dict) -> None:
        rec = {"bench": "cost_per_kernel", "load": _load(), "cpus": os.cpu_count(), **rec}
        line = json.dumps(rec)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    spec = Path(args.spec).resolve()
    ours = tl_aot_build(spec, args.jobs, args.arch, work)
    emit(ours)
    jit = jit_compile(spec, args.jobs, args.arch)
    emit(jit)
    emit({"what": "ratio", "jobs": args.jobs, "tl_aot_over_jit": round(ours["cpu_s_per_kernel"] / jit["cpu_s_per_kernel"], 3), "goal": 0.5})
    if args.cuts:
        for rec in cuts(work):
            emit(rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
