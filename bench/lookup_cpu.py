"""Serving's lookup per request, on the CPU, over a realistic process: many kernel functions, each called a few times.

A test process of an operator library makes a new ``@tilelang.jit`` object each time a kernel
class is built (the factory's closure) and compiles it once: most functions are looked up only a
few times, so the first lookup of each function weighs as much as the rest. This bench runs such
a workload twice, each in a fresh process with an H100 profile answering device queries (no GPU):

- ``capture``: every ``@tilelang.jit`` compile of the workload captured (traced, nothing compiled):
  its request key and its call key recorded, as ``python -m tl_aot capture`` records them;
- ``serve``: the same workload answered by a server holding the captured kernels (a library's
  index built from the record, each entry standing for a built kernel): every compile goes through
  TileLang's seam to :meth:`Server.answer_call`, as a served test run asks it. Reported: serving's
  own figures (``Stats.lookup_s / lookups``, entries' first use counted apart, exactly the line a
  served process prints at exit), and per lookup the first of each function against the later
  ones (CPU time of the process). Then, as the anchor in the same process, for the first call of
  up to ``--anchor`` functions: TileLang's own warm-cache key (``KernelCache._generate_key``) of
  the traced prim_func, and tl_aot's key of that prim_func (the fallback for calls that cannot be
  keyed), each timed alone (the trace, ~90 ms each, is not counted).

Workloads: ``tileops`` (every ``Kernel`` class of TileOPs' ``tileops.kernels`` that can be built
from plain sizes, at ``--scales`` problem sizes: needs TileOPs' sources, e.g. a ``git archive``,
at ``--tileops DIR``; TileOPs is measured only, nothing of it is used elsewhere), ``faithful``
(tests/kernels/faithful.py's @tilelang.jit kernels at several sizes: no extra sources needed) or
``eager`` (tests/kernels' eager kernels, ``T.const`` sizes and tensors as arguments, compiled as
``JITImpl.__call__`` compiles them: 18 compiles of 2 functions at 6 sizes). Eager, CPU machine, 3
served processes, medians: before call keys spelled an eager kernel's tensors every one was
traced, and serving's own figure (``stats_lookup_ms_each``, the traced prim_func's hash, TileLang's
trace of it, ~2.2 ms, not counted) was **1.69 ms** a lookup; after, all 18 are answered by call key
before the trace at **0.051 ms** (0.28 for the first of each function, 0.026 later).

``cpu_lookup_ms_each`` counts an entry's first use (its record parsed, its function found: module
loading) apart, as serving's stats do; ``cpu_lookup_with_first_use_ms_each`` is the whole call;
``tilelang_key_per_lookup`` is TileLang's warm-cache key over one lookup of ours.

Figures (CPU machine, 2 shared cores, 5 served processes, medians; TileOPs: 233 compiles, 35
functions, 131 served untraced): per lookup 0.085 ms (0.098 with first use; before the issue-39
rework of keeping and writing the key, 0.115 in all, same window), first lookup of a function 0.31
-> 0.20 ms, later ones 0.081 -> 0.065; TileLang's own key of the traced prim_func 1.41 ms, 16.6x
one lookup. ``faithful``: 0.101 -> 0.059 (0.068 with first use), 29x under TileLang's key.

Where the time goes: the same calls keyed again after the workload (memos cleared, caches warm)
cost 0.029 ms each (0.044 before; first of a function 0.073, was 0.156). In the served process a
lookup runs after the test's own work has pushed tl_aot's code and data out of the CPU caches:
that is the 3x between the two (keying the previous call just before each lookup takes 0.098 to
0.070 ms; evicting the caches before each replayed lookup brings 0.022 to 0.097).

Also reported: ``wall_lookup_ms_each`` (the same lookups by the wall clock: above the CPU figure
when the machine is busy; equal on an idle one), ``stats_gpu_first_ms`` (the process's first GPU
question, counted apart by serving) and ``source_files_read`` / ``source_read_ms`` (kernel files
read from disk inside lookups: once per file). Issue 39's third pass (2 shared cores, other
sessions' builds running: load 2-4; three rounds of 5 processes each, before/after interleaved):
per lookup 0.079/0.086, 0.070/0.066, 0.098/0.101 ms (CPU): no change beyond the window's noise;
helper spellings kept per function object cut the helpers spelled from 94 to 50 (of 233
lookups). Under load the wall clock exceeds the CPU time by 25-45% (a 2-core machine at load
4.6: 0.089-0.110 ms wall against 0.071-0.076 CPU); idle, the two agree (0.0748 / 0.0744). A
stand-in lookup of one SHA-256 of the arguments' repr costs 0.013-0.017 ms in the same place:
that is the floor a cold process sets on any lookup in Python.

Where a lookup's time goes, by path (``cpu_{new_code,new_jit,same_jit}_ms_each`` and the
``*_lookups`` counts; issue 39's fourth pass, TileOPs, 5 processes, medians, load 2.5-3.8 on 2
cores: 0.103 ms per lookup in this window, 0.0885 in the quieter one before, same code):

- ``new_code``, 69 lookups at 0.185 ms (53% of the time): the lookup spells a code object never
  seen, the function's or a helper's (35 functions, 77 code objects: TileOPs' elementwise kernels
  share one kernel function in ``_base.py`` and close over an ``op_func`` of each class's own);
  its span read (``code_span``, ~0.02 ms), its file's text and its globals spelled;
- ``new_jit``, 71 at 0.114 ms (34%): a new ``@tilelang.jit`` object whose code was all seen
  (a kernel class built again at another size): its closure values spelled again. Counted in the
  same process, none of these could be answered from an identity memo of an earlier function of
  the same code: every one differs in its closure's values (sizes, dtypes: 196 ints, 179 strings)
  or closes over a new helper function (79) that differs in its own; the spelling is the work;
- ``same_jit``, 93 at 0.031 ms (12%): the same jit object asked with other arguments (its
  spelling kept, re-checked slot by slot; the arguments spelled, the key hashed).

The first of these was thought the whole cost left; it is half. Also measured there: no garbage
collection runs inside a lookup (``gc.callbacks``: 0 of 2,020 collections; the 11 full ones,
1.2-1.7 s in all, fall in the workload), the process's first GPU question is 0.01 ms, and kernel
files are read 5 times (0.5 ms in all). The CPU time (``process_time``) and the wall clock agree
when the machine is quiet (0.0885 / 0.0876) and part under load (0.105 / 0.173 at load ~4).

Issue 39's fifth pass (three rounds, main and the branch interleaved, load 1-2.4; medians and
[spread] of the rounds' medians): TileOPs 0.0944 [0.094-0.105] -> 0.0836 [0.081-0.092] ms per
lookup (``same_jit`` 0.030 -> 0.019, ``new_jit`` 0.108 -> 0.096, ``new_code`` 0.170 -> 0.161);
``faithful`` 0.0630 [0.061-0.063] -> 0.0582 [0.058-0.059] (later lookups 0.022 -> 0.017, the first
of each function 0.132 both). The waste removed: a kept spelling's check set up its columns
(``_Check``, 6.1 us warm) on its first check, where one pass over its ~8 slots costs 1.6 us, and in
a test suite most spellings are checked once or twice (TileOPs: 93 of its 140 jits asked twice,
none more); now the first 16 checks are passes. What is left is the first spelling of each
function (``new_code``, ``new_jit``: 92% of the time, once per function and process: a code
object's span and globals, the values its closure and module hold, each read once), not work
repeated per call: the same calls spelled again warm cost 0.006 (asked again), 0.014 (a new jit
of seen code) and 0.027 ms (all memos cleared) per lookup, the rest is the process's caches.

``python bench/lookup_cpu.py [--workload tileops --tileops DIR | --workload eager] [--scales 2] [--anchor 12] [--json OUT]``
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import json
import pkgutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "tests" / "kernels"
CLOCK = time.process_time  # CPU time of this process: the build machine's cores are shared
#: Constructor parameters that are not problem sizes (kept as given when the sizes are scaled).
_FIXED = {"kernel_h", "kernel_w", "stride_h", "stride_w", "pad_h", "pad_w", "dilation_h", "dilation_w", "groups", "topk"}


def _tileops_workload(root: Path, scales: int) -> None:
    """Build every TileOPs kernel class that takes plain sizes, at ``scales`` sizes, and compile its kernel with its config."""
    for p in (root, root / "src"):
        sys.path.insert(0, str(p))
    import torch  # noqa: F401 (loaded before the emulation, which answers torch.cuda's queries)

    sys.path.insert(0, str(ROOT))
    from bench.tileops_factories import SIZES, _dtypes

    kernels = importlib.import_module("tileops.kernels")
    base = importlib.import_module("tileops.kernels.kernel_base").Kernel
    classes = {}
    for info in pkgutil.walk_packages(kernels.__path__, kernels.__name__ + ".", onerror=lambda name: None):
        with contextlib.suppress(Exception):  # a module that needs a real GPU at import
            mod = importlib.import_module(info.name)
            for name, cls in vars(mod).items():
                if inspect.isclass(cls) and issubclass(cls, base) and cls is not base and cls.__module__ == mod.__name__:
                    if not inspect.isabstract(cls):
                        classes[f"{mod.__name__}.{name}"] = cls
    for scale in range(1, scales + 1):
        values = {**SIZES, **_dtypes()}
        values = {k: v * scale if type(v) is int and k not in _FIXED else v for k, v in values.items()}
        for _, cls in sorted(classes.items()):
            args = {}
            for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    continue
                if p.name in values:
                    args[p.name] = values[p.name]
                elif p.default is p.empty:
                    break
            else:
                with contextlib.suppress(Exception):  # the class refuses the problem
                    obj = cls(**args)
                    jit = getattr(obj, "kernel", None)
                    if type(jit).__name__ == "JITImpl":
                        jit.compile(**dict(getattr(obj, "config", None) or {}))  # what forward's first call compiles


def _faithful_workload(scales: int) -> None:
    sys.path.insert(0, str(KERNELS))
    import faithful

    for n in (256, 512, 1024, 2048)[: max(scales, 1) * 2]:
        faithful.gemm_jit.compile(n, n, n)
        faithful.flashattn_fwd.compile(1, 8, n, 64)
        faithful.bmm_fp8_persistent.compile(4, n, n, n)
    faithful.flashattn_bwd.compile(1, 2, 256, 64)
    faithful.attn_fwd_persistent_causal.compile(1, 8, 512, 128)


def _eager_workload(scales: int) -> None:
    """Eager kernels (``T.const`` sizes, tensors as arguments), each compiled as ``JITImpl.__call__`` compiles it.

    tests/kernels' new-style GEMM (three tile shapes) and two-output row reduction, at several sizes,
    with CPU tensors: TileLang reads only their dtype, shape and strides. Each jit object is asked
    once per size, so its spelling is kept between sizes (the ``same_jit`` path) after its first.
    """
    import torch

    sys.path[:0] = [str(KERNELS), str(KERNELS / "conformance")]
    import new_style_gemm
    import outputs

    for n in (256, 512, 1024, 2048, 4096, 8192)[: max(scales, 1) * 3]:
        a, b = torch.empty(n, 256, dtype=torch.float16), torch.empty(256, n, dtype=torch.float16)
        calls = [(new_style_gemm.gemm, (a, b), {"block_M": bm}) for bm in (64, 128)]
        calls.append((outputs.row_stats, (torch.empty(n, 128),), {}))
        for jit, args, kwargs in calls:
            jit.initialize_jit_mode(*args, **kwargs)  # as __call__ decides it, before it compiles
            jit.compile(*args, **kwargs)


def _run_workload(a) -> None:
    if a.workload == "tileops":
        _tileops_workload(Path(a.tileops), a.scales)
    elif a.workload == "eager":
        _eager_workload(a.scales)
    else:
        _faithful_workload(a.scales)


def _inner_capture(a) -> dict:
    import torch  # noqa: F401

    from tl_aot.capture.record import CaptureRecord
    from tl_aot.capture.recorder import Capturer
    from tl_aot.gpu.device import emulate, find_profile
    from tl_aot.jit.seam import Interception, intercepting

    cap = Capturer(Path(a.record), compile_for_real=False)
    with emulate(find_profile("H100-SXM")), intercepting(Interception(cap._on_request, name="capture")):
        _run_workload(a)
    cap.flush()
    return {"kernels": len(CaptureRecord.load(a.record).kernels)}


def _library(record: str):
    """A served library's shape built from the capture record: its index (entries, calls), entries by name."""
    import types

    from tl_aot.capture.record import CaptureRecord
    from tl_aot.capture.record_specs import recorded_calls
    from tl_aot.common.arch import parse_arch
    from tl_aot.common.manifest_index import index_of
    from tl_aot.common.metadata import ArchVariant, LoweredEntry, Manifest

    keys = list(CaptureRecord.load(record).kernels)
    entries = tuple(
        LoweredEntry(
            variants=(ArchVariant(request_key=k, arch=parse_arch("sm_90a")),),
            capture_key=k,
            name=f"k_{k[:12]}",
            function="captured",
            source="captured.py",
        )
        for k in keys
    )
    manifest = Manifest(abi_version=0, library="bench", entries=entries, calls=recorded_calls([record], set(keys)))

    class Lib(types.SimpleNamespace):
        def __getitem__(self, name: str):
            return lambda *args: name

    return Lib(index=index_of(manifest), tunings=(), signature=manifest.entry, path=Path(record).with_suffix(".so"))


def _inner_serve(a) -> dict:
    import torch  # noqa: F401
    from tilelang.cache.kernel_cache import KernelCache

    from tl_aot.config.user_code import user_function
    from tl_aot.gpu.device import emulate, find_profile
    from tl_aot.jit.request_key import RequestKeys
    from tl_aot.jit.seam import CompileRequest, Interception, install, jit_module
    from tl_aot.serving import active
    from tl_aot.serving.server import Server

    rows: list[
        tuple[object, float, float, float]
    ] = []  # (code object of the function, CPU s of answer_call: first use apart, in all; wall s)
    # per row: "new_code" (spelled a code object, the function's or a helper's, never seen), "same_jit" (the jit object
    # asked again), "new_jit" (a new @tilelang.jit object, every code it reads seen before)
    paths: list[str] = []
    from tl_aot.call_keys import code_source

    jits: dict[int, object] = {}  # id -> jit object seen (held: its id is not reused)
    calls: list = []
    install(Interception(lambda req, jit_call, proceed: object(), name="compiled-stand-in", on_jit=calls.append))
    server = active._active = Server([_library(a.record)], strict=False)
    active._patch(jit_module())
    answer = server.answer_call

    def timed(jit_call):
        first_use = server.stats.first_use_s + server.stats.gpu_first_s
        codes = len(code_source._DIGESTS)
        t0, w0 = CLOCK(), time.perf_counter()
        try:
            return answer(jit_call)
        finally:
            spent, wall = CLOCK() - t0, time.perf_counter() - w0
            # an entry made ready (module loading), the process's first GPU question: counted apart
            first_use = server.stats.first_use_s + server.stats.gpu_first_s - first_use
            code = getattr(user_function(jit_call.jit.func), "__code__", None)
            new_code = len(code_source._DIGESTS) > codes
            paths.append("new_code" if new_code else "same_jit" if id(jit_call.jit) in jits else "new_jit")
            jits[id(jit_call.jit)] = jit_call.jit
            rows.append((code, max(spent - first_use, 0.0), spent, max(wall - first_use, 0.0)))

    server.answer_call = timed  # type: ignore[method-assign]
    with emulate(find_profile("H100-SXM")):
        _run_workload(a)
        st = server.stats
        seen: set = set()
        first, later = [], []
        for code, s, *_ in rows:
            (later if code in seen else first).append(s)
            seen.add(code)
        anchor = []
        done: set = set()
        for jc in calls:
            code = getattr(user_function(jc.jit.func), "__code__", None)
            if code in done or len(done) >= a.anchor:
                continue
            jit = jc.jit
            try:
                func = jit.get_tir(*jc.args, **jc.kwargs)
            except Exception:  # noqa: BLE001 (a kernel this TileLang cannot trace: its calls were never captured either)
                continue
            done.add(code)
            t0 = CLOCK()
            KernelCache()._generate_key(
                func, out_idx=jit.out_idx, execution_backend="tvm_ffi", args=(), target="cuda", target_host=None,
                pass_configs=jit.pass_configs or None, compile_flags=jit.compile_flags or None,
            )  # fmt: skip
            t1 = CLOCK()
            req = CompileRequest.of(func, jit.out_idx, pass_configs=jit.pass_configs, compile_flags=jit.compile_flags, target=jit.target)
            RequestKeys().key(req)  # a fresh memo: the prim_func hashed as serving's fallback hashes it
            anchor.append({"tilelang_key_s": t1 - t0, "request_key_s": CLOCK() - t1})
    ms = lambda xs: round(1e3 * sum(xs) / max(len(xs), 1), 4)  # noqa: E731
    from tl_aot.call_keys.code_source import source_reads

    return {
        "compiles": len(calls),
        "functions": len(first),
        "served": st.served,
        "served_untraced": st.served_untraced,
        "compiled_after_miss": st.compiled,
        "stats_lookups": st.lookups,
        "stats_lookup_ms_each": round(1e3 * st.lookup_s / max(st.lookups, 1), 4),
        "stats_call_lookup_ms_each": round(1e3 * st.call_lookup_s / max(st.call_lookups, 1), 4),
        "stats_first_use_ms": round(1e3 * st.first_use_s, 2),
        "stats_gpu_first_ms": round(1e3 * st.gpu_first_s, 3),
        "source_files_read": source_reads.files,
        "source_read_ms": round(1e3 * source_reads.seconds, 2),
        "cpu_lookup_ms_each": ms([s for _, s, _, _ in rows]),
        "wall_lookup_ms_each": ms([w for *_, w in rows]),
        "cpu_first_of_function_ms_each": ms(first),
        "cpu_later_ms_each": ms(later),
        **{f"cpu_{path}_ms_each": ms([r[1] for r, p in zip(rows, paths) if p == path]) for path in ("new_code", "new_jit", "same_jit")},
        **{f"{path}_lookups": paths.count(path) for path in ("new_code", "new_jit", "same_jit")},
        "cpu_lookup_ms_median": round(1e3 * statistics.median([s for _, s, _, _ in rows]), 4),
        "cpu_lookup_ms_max": round(1e3 * max(s for _, s, _, _ in rows), 3),
        "cpu_lookup_with_first_use_ms_each": ms([s for _, _, s, _ in rows]),
        "anchor_functions": len(anchor),
        "anchor_tilelang_key_ms_each": ms([r["tilelang_key_s"] for r in anchor]),
        "anchor_request_key_ms_each": ms([r["request_key_s"] for r in anchor]),
    }


def _sub(mode: str, a, record: str) -> dict:
    cmd = [sys.executable, __file__, "--inner", mode, "--record", record, "--workload", a.workload, "--scales", str(a.scales)]
    cmd += ["--tileops", a.tileops, "--anchor", str(a.anchor)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(next(ln for ln in reversed(out.stdout.splitlines()) if ln.startswith("{")))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=("tileops", "faithful", "eager"), default="faithful")
    p.add_argument("--tileops", default=str(ROOT / ".tileops"), help="TileOPs' sources (a git archive of its repository)")
    p.add_argument("--scales", type=int, default=2, help="problem sizes each kernel class is built at")
    p.add_argument("--anchor", type=int, default=12, help="functions whose first call is traced for the anchor")
    p.add_argument("--repeat", type=int, default=3, help="served processes (medians reported)")
    p.add_argument("--json", metavar="OUT", help="also write the result (JSON) to OUT")
    p.add_argument("--inner", choices=("capture", "serve"), help=argparse.SUPPRESS)  # one of the bench's own processes
    p.add_argument("--record", help=argparse.SUPPRESS)  # the record the capture process writes, the serve processes read
    a = p.parse_args(argv)
    if a.inner:
        print(json.dumps(_inner_capture(a) if a.inner == "capture" else _inner_serve(a)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        record = str(Path(tmp) / "lookups.capture.json")
        captured = _sub("capture", a, record)
        runs = [_sub("serve", a, record) for _ in range(a.repeat)]
    result = {"workload": a.workload, "kernels_captured": captured["kernels"], "serve_runs": len(runs)}
    for k in runs[0]:
        values = [r[k] for r in runs]
        result[k] = statistics.median(values) if all(isinstance(v, (int, float)) for v in values) else values[0]
    if result.get("cpu_lookup_ms_each"):  # TileLang's own warm-cache key of a traced prim_func, per lookup of ours
        result["tilelang_key_per_lookup"] = round(result["anchor_tilelang_key_ms_each"] / result["cpu_lookup_ms_each"], 1)
    text = json.dumps(result, indent=1)
    print(text)
    if a.json:
        Path(a.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
