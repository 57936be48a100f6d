"""Loading and serving a 2,000-entry library, on the CPU: load, serve index, lookups, memory.

The library is real (launcher, manifest unit, runtime, images, linked as a build links them; by
default the images in per-arch packs beside it, only ``--packs`` archs' installed, as TileOPs'
whole library is built and installed) but
its entries are synthesised, since lowering 2,000 kernels is hours: the entries of the golden
manifest (tests/unit/golden/manifest.json: GEMM with a dynamic M, multi-kernel, outputs,
workspaces, TMA-free and TMA kernels) cycled to ``--entries``, each with one variant per arch of
``--archs`` (its request key, image of ``--image-kb`` random bytes), a recorded ``@tilelang.jit``
call per entry and a tuning every tenth, so the manifest is TileOPs-size per entry. ``--real``
entries carry the request keys of real prim_funcs (tests/kernels/elementwise.py ``axpy``) and the
call keys of real ``@tilelang.jit`` calls (tests/kernels/faithful.py ``gemm_jit``): what the lookups
are timed on. Built once into ``--libs`` (the launcher's compile is a few CPU-minutes at 2,000).

Each figure is CPU time (``time.process_time``) of a fresh process, median over ``--repeat``:

- ``load_ms``: ``tl_aot.load(lib)`` (file check, dlopen, index); ``serve_ms``: ``tl_aot.serve(lib)``
  (load + the serving index); ``index_ms``: the serving index alone (``Server.add``); tl_aot's modules
  imported before the clock starts.
- ``load_cold_ms`` / ``serve_cold_ms`` (and ``_wall_ms``; ``_gc_ms``: the cyclic collector's passes
  within): the same as a program meets them, and as the GPU machine's whole-library run measures
  them (``bench/tileops_whole_gpu.sh serve``): tvm_ffi, torch and tl_aot imported, the modules
  loading imports counted. Against the anchor ``anchor_load_module_ms``: a bare
  ``tvm_ffi.load_module`` of the same library in a fresh process (``load_cold_vs_load_module``).
- ``part_*_ms``: load step by step (imports, ELF check, dlopen, index text, its digest, JSON,
  rows, driver check, ``Library``; then serving's imports and index): ``--inner parts --lib SO``
  says where the time goes on another machine (with the collector held off as load holds it;
  ``TL_AOT_BENCH_GC=1``: left on).
- ``serve_opened_packs``: image packs ``serve`` opened (strace; 0: none touched).
- anchors, in the same processes: ``json.loads`` of the whole manifest (``anchor_json_ms``) and the
  whole manifest parsed into dataclasses (``anchor_eager_ms``: what ``load`` did before the index).
- ``lookup_call_us``: a served ``@tilelang.jit`` call answered by its call key (first ask, and the same
  call asked again); ``lookup_request_us``: a request answered by its request key (the same
  prim_func asked again; the first ask hashes the prim_func: ``request_first_us``, against TileLang's
  own warm-cache key of the same prim_func, ``anchor_tilelang_key_us``); ``entry_first_use_us``: an
  entry's first use (its record parsed, its function looked up: counted apart from lookups), against
  ``json.loads`` of that record's text alone (``anchor_record_json_us``); the first call-key answer
  also against TileLang's own warm-cache key (``call_first_vs_tilelang_key``: the least a warm JIT
  spends per kernel). The machine's load moves the microseconds; the ratios hold within a run.
- memory: the process's anonymous and file-backed resident memory added by ``serve`` (a mapped
  image never read adds nothing), against the eager parse's; ``records_parsed``: entries whose
  record serving parsed (those asked for, no more).

The cyclic collector (2026-11-28): in a process that has just imported torch, a full pass of the
collector is due (torch's ~10^6 new objects not yet examined), and whoever allocates next pays it.
``load`` making its index (~10^5 objects) was that allocator: ``load_cold`` 111-120 ms of CPU, of
which the collector 80-93 ms; ``serve_cold`` 118-127 (80-86). Loading and serving now make their
objects with the collector held off (``tl_aot.common.gc_pause``): 27-31 and 42-43 ms (the collector
1.4-2.8 ms, in the imports); the whole bench, 3 processes each: ``load_cold`` 19.6, ``serve_cold``
24.4 ms. The pass is torch's, not moved onto the user: with no library loaded at all, the program's
next 300,000 objects pay it (90-95 ms), and they pay the same after a paused ``serve`` (86 ms),
where an unpaused one had paid it inside ``serve``. On the GPU machine the same debt made ``load`` /
``serve`` of TileOPs' library read 22-36 / 28-50 ms over one lease.

``python bench/load_scale.py [--entries 2000] [--archs sm_80,sm_89,sm_90a,sm_100a] [--json OUT]``
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CLOCK = time.process_time
GOLDEN = ROOT / "tests" / "unit" / "golden" / "manifest.json"
KERNELS = ROOT / "tests" / "kernels"
_GPU = "H100-SXM"  # the device profile answering device queries (no GPU here)
#: The measured processes' environment: modules imported from their compiled bytecode, as an installed wheel's are
#: (PYTHONDONTWRITEBYTECODE would have every fresh process compile tl_aot's sources again, inside the figures).
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _key(*parts) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


def _real_keys(count: int) -> tuple[list, list]:
    """``count`` (request key of axpy(N), call key of gemm_jit(n, n, n)) pairs, N and n as the inner runs ask."""
    from tl_aot.call_keys.key import call_key
    from tl_aot.gpu.cuda_driver import gpu_identity
    from tl_aot.gpu.device import emulate, find_profile
    from tl_aot.jit.request_key import options_of, request_key
    from tl_aot.jit.seam import CompileRequest

    sys.path.insert(0, str(KERNELS))
    import elementwise
    import faithful

    requests, calls = [], []
    with emulate(find_profile(_GPU)):
        for j in range(count):
            func = elementwise.axpy(_axpy_n(j))
            requests.append(request_key(func, options_of(CompileRequest.of(func, None))))
            calls.append(call_key(faithful.gemm_jit, _gemm_args(j), {}, gpu_identity()))
    return requests, calls


def _axpy_n(j: int) -> int:
    return 256 * (j + 1)


def _gemm_args(j: int) -> tuple:
    return (128 * (j + 1), 256, 512)


def _padded(variant, chars: int):
    """``variant`` whose recorded request lists compile flags filling ``chars`` more characters (as TileOPs' headers and defines do)."""
    flags, k = [], 0
    while sum(len(f) + 4 for f in flags) < chars:
        flags.append(f"-DTILEOPS_KERNEL_OPTION_{k}=1")
        k += 1
    return dataclasses.replace(variant, request=json.dumps({"name": "main", "options": {"compile_flags": flags}}))


def synthesised(n: int, archs: list[str], image_kb: int, real: int, entry_kb: float = 0):
    """The bench's manifest: golden entries cycled to ``n``, one variant per arch, calls and tunings recorded.

    ``entry_kb``: each entry's record padded to about that size (TileOPs' are ~7 KB an arch).
    """
    from tl_aot.common.arch import parse_arch
    from tl_aot.common.metadata import Call, Manifest, Tuning
    from tl_aot.common.metadata_json import from_json, to_json

    golden = from_json(Manifest, GOLDEN.read_text())
    base = [e for e in golden.entries if not e.export]
    requests, call_keys = _real_keys(real)
    entries, calls, tunings = [], [], []
    for i in range(n):
        e = base[i % len(base)]
        keys = [requests[i] if i < real and a == "sm_90a" else _key(i, a) for a in archs]
        variants = tuple(
            dataclasses.replace(e.variants[0], arch=parse_arch(a), request_key=k, image_bytes=image_kb * 1024) for a, k in zip(archs, keys)
        )
        short = len(to_json(dataclasses.replace(e, variants=variants))) + 40
        if entry_kb * 1024 > short:
            variants = tuple(_padded(v, int(entry_kb * 1024 - short) // len(variants)) for v in variants)
        name = f"k{i:04d}_{e.name}"
        capture = keys[archs.index("sm_90a")] if "sm_90a" in archs else keys[0]
        args = (*e.args, ("variant", str(i)))
        entries.append(dataclasses.replace(e, name=name, variants=variants, capture_key=capture, capture_name=e.function, args=args))
        calls.append(Call(key=call_keys[i] if i < real else _key(i, "call"), request_key=capture))
        if i % 10 == 0:
            tunings.append(Tuning(key=_key(i, "tuning"), function=f"ops.{e.function}", args=repr(args), config="{}", request_key=capture))
    return dataclasses.replace(golden, library="load_scale", entries=tuple(entries), calls=tuple(calls), tunings=tuple(tunings))


def build(libs: Path, n: int, archs: list[str], image_kb: int, real: int, entry_kb: float, packs: str = "") -> Path:
    """The bench library (built unless ``libs`` holds one of the same shape), linked as a build links one.

    ``packs``: keep the images in per-arch image packs beside the library (uncompressed), the
    library holding their references, as a build with ``--image-packs`` makes it; the packs of
    the archs ``packs`` names (comma-separated, or ``all``) are installed beside it, the others
    not (a user installs the archs their GPUs need). The launcher and manifest objects are cached
    by content under ``libs/cache``, so libraries of one manifest share them.
    """
    from tl_aot.codegen.render import image_symbol, render_header, render_launcher, render_manifest
    from tl_aot.common.fileutil import atomic_write
    from tl_aot.cuda.host_compile import link_library
    from tl_aot.cuda.host_objects import generated_object, runtime_object

    shape = json.dumps({"n": n, "archs": archs, "image_kb": image_kb, "real": real, "entry_kb": entry_kb, "packs": packs, "v": 2})
    work = libs / _key(shape)[:12]
    lib = work / "libload_scale.so"
    if lib.is_file() and (work / "shape.json").is_file() and (work / "shape.json").read_text() == shape:
        return lib
    work.mkdir(parents=True, exist_ok=True)
    m = synthesised(n, archs, image_kb, real, entry_kb)
    rng = random.Random(0)
    images = {image_symbol(e.name, v.arch): (v.arch, rng.randbytes(v.image_bytes)) for e in m.entries for v in e.variants}
    embedded = {s: b for s, (_, b) in images.items()}
    if packs:
        embedded = _packed(m, images, work, archs if packs == "all" else packs.split(","), libs / "cache")
    lines = []
    for sym, data in embedded.items():  # one assembler run for every image (embedding them one by one is quadratic)
        path = work / "images" / f"{sym}.bin"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
        cubin = f"__tvm_ffi__cubin_{sym}"
        lines += [f".globl {cubin}", f".hidden {cubin}", ".balign 64", f"{cubin}:", f'.incbin "{path}"', f"{cubin}_end:"]
    (work / "images.S").write_text(".section .rodata\n" + "\n".join(lines) + '\n.section .note.GNU-stack,"",@progbits\n')
    t0 = time.perf_counter()
    subprocess.run(["cc", "-c", "images.S", "-o", "images.o"], cwd=work, check=True)
    cache = libs / "cache"
    header = render_header(m)
    launcher, _ = generated_object(
        cache, {"launcher.cc": render_launcher(m, header_name="load_scale.h"), "load_scale.h": header}, "launcher.cc", "launcher.o",
        extra_key="load_scale", what="compiling the launcher",
    )  # fmt: skip
    manifest, _ = generated_object(
        cache, {"manifest.cc": render_manifest(m)}, "manifest.cc", "manifest.o", extra_key="load_scale", what="compiling the manifest"
    )
    runtime, _ = runtime_object(cache)
    link_library(work, [str(launcher), str(manifest), "images.o", str(runtime)], lib.name, what="linking")
    print(f"built {lib} ({lib.stat().st_size >> 20} MiB) in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    atomic_write(work / "shape.json", shape.encode())
    return lib


def _packed(m, images: dict, work: Path, installed: list[str], cache: Path) -> dict:
    """The references to embed in place of ``images``; the packs of the ``installed`` archs written beside the library."""
    from tl_aot.pipeline.image_packs import ImagePacks, pack_library, pack_name

    packed = pack_library(m, images, ImagePacks(compress=False), cuda_version=(13, 0), cache=cache)
    for label in installed:
        (work / pack_name(m.library, label)).write_bytes(packed.packs[pack_name(m.library, label)])
    return packed.refs


def _memory() -> dict:
    """Resident anonymous and file-backed KiB of this process (/proc/self/status)."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("RssAnon:", "RssFile:")):
            out[line.split(":")[0]] = int(line.split()[1])
    return out


def _inner_load(lib: str) -> dict:
    """``tl_aot.load`` timed in this fresh process, then the anchors (the whole manifest, parsed eagerly)."""
    import tvm_ffi  # noqa: F401 (imports are not loading's cost)

    from tl_aot.common.metadata import Manifest
    from tl_aot.common.metadata_json import from_json
    from tl_aot.runtime import loader

    gc.collect()
    out = {}
    before = _memory()
    t0 = CLOCK()
    loaded = loader.load(lib)
    out["load_ms"] = (CLOCK() - t0) * 1e3
    after = _memory()
    out["load_anon_kib"] = after["RssAnon"] - before["RssAnon"]
    out["load_file_kib"] = after["RssFile"] - before["RssFile"]
    out["entries"] = len(loaded.index.entries)
    text = str(loaded._module["tl_aot_manifest"]())  # the anchors: the whole manifest, as load parsed it before the index
    out["manifest_bytes"] = len(text)
    gc.collect()
    before = _memory()
    t0 = CLOCK()
    raw = json.loads(text)
    out["anchor_json_ms"] = (CLOCK() - t0) * 1e3
    t0 = CLOCK()
    eager = from_json(Manifest, raw)
    out["anchor_eager_ms"] = out["anchor_json_ms"] + (CLOCK() - t0) * 1e3
    out["anchor_eager_anon_kib"] = _memory()["RssAnon"] - before["RssAnon"]
    assert len(eager.entries) == out["entries"]
    return out


def _inner_serve(lib: str) -> dict:
    """``tl_aot.serve`` timed in this fresh process (its modules imported first: imports are not its cost), and its memory."""
    import tvm_ffi  # noqa: F401

    import tl_aot.jit.import_hooks  # noqa: F401
    import tl_aot.jit.request_key  # noqa: F401
    import tl_aot.runtime.loader  # noqa: F401
    from tl_aot.serving import active
    from tl_aot.serving import server as serving

    add = serving.Server.add
    spent = []

    def timed(self, libs):
        t = CLOCK()
        try:
            return add(self, libs)
        finally:
            spent.append(CLOCK() - t)

    serving.Server.add = timed
    gc.collect()
    out = {}
    before = _memory()
    t0 = CLOCK()
    server = active.serve(lib, strict=True)
    out["serve_ms"] = (CLOCK() - t0) * 1e3
    after = _memory()
    out["index_ms"] = spent[0] * 1e3
    out["serve_anon_kib"] = after["RssAnon"] - before["RssAnon"]
    out["serve_file_kib"] = after["RssFile"] - before["RssFile"]
    out["records_parsed"] = sum(x.records_parsed for x in server.libraries)
    out["kernels_indexed"] = len(server.index)
    out["calls_indexed"] = len(server.calls)
    return out


def _inner_cold(lib: str, verb: str) -> dict:
    """``tl_aot.load`` or ``tl_aot.serve`` as a program meets it: tvm_ffi, torch and tl_aot imported, nothing of tl_aot's loading.

    Timed as the GPU machine's whole-library run times it (``bench/tileops_whole_gpu.sh serve``):
    wall and CPU, the modules loading imports included; with the cyclic collector's passes in it.
    """
    import torch  # noqa: F401
    import tvm_ffi  # noqa: F401

    import tl_aot

    passes = []
    gc.callbacks.append(lambda phase, info: passes.append(time.perf_counter() * (1 if phase == "stop" else -1)))
    w, c = time.perf_counter(), CLOCK()
    getattr(tl_aot, verb)(lib)
    wall, cpu = time.perf_counter() - w, CLOCK() - c
    return {f"{verb}_cold_ms": cpu * 1e3, f"{verb}_cold_wall_ms": wall * 1e3, f"{verb}_cold_gc_ms": sum(passes) * 1e3}


def _inner_anchor(lib: str) -> dict:
    """The anchor: a bare ``tvm_ffi.load_module`` of the same library (dlopen, tvm-ffi's own lookups), in a fresh process."""
    import torch  # noqa: F401
    import tvm_ffi

    c = CLOCK()
    tvm_ffi.load_module(lib)
    return {"anchor_load_module_ms": (CLOCK() - c) * 1e3}


def _inner_parts(lib: str) -> dict:
    """Where ``tl_aot.load``'s time goes, step by step (milliseconds of CPU; run it where load is slow to see why)."""

    import torch  # noqa: F401
    import tvm_ffi

    t = CLOCK()
    from tl_aot.common.gc_pause import gc_paused
    from tl_aot.common.manifest_index import parse_index
    from tl_aot.runtime import elf, loader

    out = {"imports": CLOCK() - t}
    # load's steps with the collector held off, as load holds it (TL_AOT_BENCH_GC=1: not, to see what that costs)
    held = contextlib.ExitStack()
    if os.environ.get("TL_AOT_BENCH_GC") != "1":
        held.enter_context(gc_paused())
    path = Path(lib)
    t = CLOCK()
    elf.check_library_file(path)
    out["elf_check"] = CLOCK() - t
    t = CLOCK()
    module = tvm_ffi.load_module(str(path.resolve()))
    out["load_module"] = CLOCK() - t
    t = CLOCK()
    text = str(module["tl_aot_manifest_index"]())
    out["index_text"] = CLOCK() - t
    t = CLOCK()
    hashlib.sha256(text.encode()).hexdigest()
    out["index_sha256"] = CLOCK() - t
    t = CLOCK()
    raw = json.loads(text)
    out["index_json"] = CLOCK() - t
    t = CLOCK()
    index = parse_index(raw)
    out["index_parse"] = CLOCK() - t
    t = CLOCK()
    loader._check_driver(module, path)
    out["driver_check"] = CLOCK() - t
    t = CLOCK()
    loader.Library(path, module, index)
    out["library"] = CLOCK() - t
    t = CLOCK()
    from tl_aot.serving import server as serving

    out["serve_imports"] = CLOCK() - t
    t = CLOCK()
    serving.Server([loader.Library(path, module, index)])
    out["serve_index"] = CLOCK() - t
    held.close()
    return {f"part_{k}_ms": v * 1e3 for k, v in out.items()}


def _opened(lib: Path) -> dict:
    """The files ``tl_aot.serve`` opens in a fresh process (strace): image packs opened, and whether any was (None without strace)."""
    import shutil

    if not shutil.which("strace"):
        return {"serve_opened_packs": None}
    cmd = ["strace", "-f", "-qq", "-e", "trace=open,openat", sys.executable, __file__, "--inner", "serve_cold", "--lib", str(lib)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    packs = sorted({ln.split('"')[1] for ln in out.stderr.splitlines() if ".tlpack" in ln and '"' in ln})
    return {"serve_opened_packs": len(packs), "serve_opened_pack_files": packs}


def _per_call(fn, repeat: int) -> float:
    """Microseconds of CPU per call of ``fn()``, over ``repeat`` calls."""
    t0 = CLOCK()
    for _ in range(repeat):
        fn()
    return (CLOCK() - t0) / repeat * 1e6


def _inner_lookups(lib: str, real: int) -> dict:
    """Lookups of the ``real`` entries: by call key (untraced) and by request key, each first and again."""
    from tilelang.cache.kernel_cache import KernelCache

    from tl_aot.gpu.device import emulate, find_profile
    from tl_aot.jit.seam import CompileRequest, JitCall
    from tl_aot.serving.active import serve

    sys.path.insert(0, str(KERNELS))
    import elementwise
    import faithful

    server = serve(lib, strict=True)
    (loaded,) = server.libraries
    rows = []
    with emulate(find_profile(_GPU)):
        for j in range(real):
            name = loaded.index.entries[j].name
            row = {}
            t0 = CLOCK()
            loaded.signature(name)
            loaded[name]
            row["entry_first_use_us"] = (CLOCK() - t0) * 1e6
            text = loaded._text(loaded.index.entries[j].span)  # the anchor: its record's JSON parsed, nothing built
            t0 = CLOCK()
            json.loads(text)
            row["anchor_record_json_us"] = (CLOCK() - t0) * 1e6
            call = JitCall(faithful.gemm_jit, _gemm_args(j), {})
            t0 = CLOCK()
            served = server.answer_call(call)
            row["call_first_us"] = (CLOCK() - t0) * 1e6
            assert served is not None and served.entry == name, (served, name)
            row["call_again_us"] = _per_call(lambda call=call: server.answer_call(call), 200)
            func = elementwise.axpy(_axpy_n(j))
            req = CompileRequest.of(func, None)
            t0 = CLOCK()
            KernelCache()._generate_key(func, out_idx=None, execution_backend="tvm_ffi", args=(), target="cuda", target_host=None)
            row["anchor_tilelang_key_us"] = (CLOCK() - t0) * 1e6
            t0 = CLOCK()
            served, _ = server.lookup(req)
            row["request_first_us"] = (CLOCK() - t0) * 1e6
            assert served is not None and served.entry == name, (served, name)
            row["request_again_us"] = _per_call(lambda req=req: server.lookup(req), 200)
            rows.append(row)
    return {"rows": rows, "records_parsed": loaded.records_parsed, "hashed": server.keys.hashed}


def _sub(mode: str, lib: Path, real: int) -> dict:
    cmd = [sys.executable, __file__, "--inner", mode, "--lib", str(lib), "--real", str(real)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=_ENV)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(next(ln for ln in reversed(out.stdout.splitlines()) if ln.startswith("{")))


def summary(loads: list, lookups: dict, lib: Path) -> dict:
    med = statistics.median
    s = {k: round(med([x[k] for x in loads]), 2) for k in loads[0]}
    rows = lookups["rows"][1:]  # the first row pays the imports' warm-up
    for k in rows[0]:
        s[f"{k}_median"] = round(med([r[k] for r in rows]), 2)
    s["library_mib"] = round(lib.stat().st_size / 2**20, 1)
    s["manifest_kib_per_entry"] = round(s["manifest_bytes"] / s["entries"] / 1024, 1)
    s["load_vs_anchor_eager"] = round(s["load_ms"] / s["anchor_eager_ms"], 3)
    s["load_cold_vs_load_module"] = round(s["load_cold_ms"] / s["anchor_load_module_ms"], 3)
    s["serve_cold_vs_load_module"] = round(s["serve_cold_ms"] / s["anchor_load_module_ms"], 3)
    s["serve_vs_anchor_eager"] = round(s["serve_ms"] / s["anchor_eager_ms"], 3)
    s["serve_vs_anchor_json"] = round(s["serve_ms"] / s["anchor_json_ms"], 3)
    s["load_anon_vs_anchor_eager"] = round(s["load_anon_kib"] / max(1, s["anchor_eager_anon_kib"]), 3)
    s["serve_anon_vs_anchor_eager"] = round(s["serve_anon_kib"] / max(1, s["anchor_eager_anon_kib"]), 3)
    s["request_first_vs_tilelang_key"] = round(s["request_first_us_median"] / s["anchor_tilelang_key_us_median"], 3)
    s["call_first_vs_tilelang_key"] = round(s["call_first_us_median"] / s["anchor_tilelang_key_us_median"], 3)
    s["entry_first_use_vs_record_json"] = round(s["entry_first_use_us_median"] / s["anchor_record_json_us_median"], 3)
    s["lookup_records_parsed"] = lookups["records_parsed"]
    s["lookup_requests_hashed"] = lookups["hashed"]
    return s


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inner")
    p.add_argument("--lib")
    p.add_argument("--libs", default=str(ROOT / ".benchlibs" / "load_scale"))
    p.add_argument("--entries", type=int, default=2000)
    p.add_argument("--archs", default="sm_80,sm_89,sm_90a,sm_100a")
    p.add_argument("--image-kb", type=int, default=64)
    p.add_argument("--entry-kb", type=float, default=14, help="each entry's manifest record padded to this size")
    p.add_argument("--real", type=int, default=9, help="entries with real request and call keys (the lookups timed)")
    p.add_argument("--packs", default="sm_90a", help="images in per-arch packs, these archs' installed ('all'; '' embeds the images)")
    p.add_argument("--build-only", action="store_true", help="build the library, print its path, measure nothing")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json")
    a = p.parse_args(argv)
    if a.inner:
        inner = {
            "load": _inner_load,
            "serve": _inner_serve,
            "load_cold": lambda lib: _inner_cold(lib, "load"),
            "serve_cold": lambda lib: _inner_cold(lib, "serve"),
            "anchor": _inner_anchor,
            "parts": _inner_parts,
        }.get(a.inner)
        print(json.dumps(inner(a.lib) if inner else _inner_lookups(a.lib, a.real)))
        return 0
    lib = build(Path(a.libs), a.entries, a.archs.split(","), a.image_kb, a.real, a.entry_kb, a.packs)
    if a.build_only:
        print(lib)
        return 0
    modes = ("load", "serve", "load_cold", "serve_cold", "anchor", "parts")
    loads = [{k: v for mode in modes for k, v in _sub(mode, lib, a.real).items()} for _ in range(a.repeat)]
    lookups = _sub("lookups", lib, a.real)
    result = {"summary": {**summary(loads, lookups, lib), **_opened(lib)}, "loads": loads, "lookups": lookups["rows"]}
    print(json.dumps(result["summary"], indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
