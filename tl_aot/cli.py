"""``python -m tl_aot``: build libraries, inspect them, and locate tl_aot's CMake/include files."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .errors import TlAotError, ToolchainNotFound
from .versions import __version__

__all__ = ["main"]

_PKG = Path(__file__).resolve().parent


def cmake_dir() -> Path:
    """Folder holding ``TileLangAOTConfig.cmake``: inside an installed package, else the checkout's cmake/."""
    shipped = _PKG / "cmake"
    return shipped if (shipped / "TileLangAOTConfig.cmake").is_file() else _PKG.parent / "cmake"


def include_dir() -> Path:
    return _PKG / "include"


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tl_aot",
        description="Ahead-of-time TileLang: build kernels into a self-contained TVM-FFI shared library.",
    )
    p.add_argument("--version", action="store_true", help="print the tl_aot version")
    p.add_argument("--cmake-dir", action="store_true", help="print the folder of TileLangAOTConfig.cmake")
    p.add_argument("--include-dir", action="store_true", help="print tl_aot's C++ include folder")
    p.add_argument("--nvcc", action="store_true", help="print the nvcc tl_aot builds with (TL_AOT_NVCC, CUDA_HOME, PATH, then pip's)")
    p.add_argument("--cuda-home", action="store_true", help="print the root of the CUDA toolkit tl_aot builds with")
    sub = p.add_subparsers(dest="command")

    for add in (_add_build, _add_link, _add_capture, _add_run, _add_verify, _add_tune, _add_inspect):
        add(sub)
    return p


def _kernel_options(sp) -> None:
    """What to build or tune: the same options for ``build`` and ``tune``."""
    sp.add_argument("target", nargs="?", help="FILE.py:FUNCTION (or use --spec / --capture)")
    sp.add_argument("--spec", help="TOML/JSON file listing several entries of one library")
    sp.add_argument("--name", help="library (and, with FILE.py:FUNCTION, entry) name; default: the function name")
    sp.add_argument("--entry", help="entry name when it should differ from --name")
    sp.add_argument("--arch", action="append", default=[], help="target arch: sm_90a, 90a, 9.0a, 80+PTX (repeatable)")
    sp.add_argument(
        "--arg",
        action="append",
        default=[],
        help="argument NAME=VALUE for whichever level takes it: a literal, a bare word, or an expression (torch.float16)",
    )
    sp.add_argument("--factory-arg", action="append", default=[], help="NAME=VALUE for the function named only")
    sp.add_argument("--jit-arg", action="append", default=[], help="NAME=VALUE for the @tilelang.jit function it returns only")
    sp.add_argument("--select", help="the kernel to build when the function gives several (a key or index)")
    sp.add_argument("--import", dest="imports", action="append", default=[], help="module to import before the kernel file")
    sp.add_argument("--pass-config", action="append", default=[], help="TileLang pass config KEY=VALUE")
    sp.add_argument("--nvcc-flag", action="append", default=[], help="extra nvcc flag for the kernel images")
    sp.add_argument(
        "--device",
        help="GPU that device queries made while lowering (driver.get_num_sms(), ...) describe, e.g. H100-PCIe; "
        "default per arch: A100-SXM (80), A10 (86), L40S (89), H100-SXM (90a), B200 (100a)",
    )
    sp.add_argument(
        "--out-idx",
        action="append",
        help="a parameter (index, negative from the end, or name) the entry allocates and returns, like "
        "@tilelang.jit(out_idx=...) (repeatable; 'none' for no outputs; default: the kernel's own out_idx / T.empty)",
    )
    sp.add_argument(
        "--backend",
        choices=("cuda", "cutedsl"),
        help="TileLang code generator: cuda (CUDA C++ through nvcc) or cutedsl (CuTeDSL, needs tl_aot[cutedsl]); "
        "default: what the kernel file asks (target=/execution_backend=), else cuda",
    )
    sp.add_argument("-j", "--jobs", type=_job_count, help="jobs at once, shared by lowering and nvcc (default: MAX_JOBS or the CPU count)")
    sp.add_argument("--cache-dir", help="variant cache (default: TL_AOT_CACHE_DIR or OUTPUT/.tl_aot/cache)")


def _add_build(sub) -> None:
    """``build``: lower, compile and link."""
    b = sub.add_parser("build", help="lower, compile and link kernels into lib<NAME>.so")
    _kernel_options(b)
    b.add_argument("-o", "--output", default=".", help="output folder (default: .)")
    b.add_argument("--header-dir", help="folder for the C++ header (default: the output folder)")
    b.add_argument("--depfile", help="write a Makefile depfile of every Python file the kernels import")
    b.add_argument("--force", action="store_true", help="rebuild every variant, ignoring the cache")
    b.add_argument(
        "--tune-file",
        help="tuning record (python -m tl_aot tune) whose configs to build; default: SPEC's <stem>.tune.json if present",
    )
    b.add_argument("--strict-tune", action="store_true", help="a record older than the kernel's source is an error, not a warning")
    b.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    b.add_argument(
        "--capture",
        action="append",
        default=[],
        help="capture record (python -m tl_aot capture): build every kernel in it (repeatable; records merge)",
    )
    b.add_argument(
        "--keep-going",
        action="store_true",
        help="leave out variants that fail to lower or compile instead of failing the build; what was left out is listed "
        "(even with -q) and recorded in the library (inspect shows it). Without it a build fails, and --capture names "
        "every kernel that failed",
    )
    b.add_argument(
        "--torch-ops",
        action="store_true",
        default=None,
        help="also build lib<NAME>_torch.so: the entries as native torch operators (LibTorch Stable ABI, torch >= 2.10; "
        "needs torch's headers; default: the spec's [library] torch_ops)",
    )
    b.add_argument(
        "--cluster",
        help="Dask scheduler (tcp://HOST:8786, or a scheduler file) whose workers lower and compile each variant; "
        "the library is linked here (default: TL_AOT_CLUSTER; needs tl_aot[cluster])",
    )
    b.add_argument(
        "--cache-url",
        help="variant cache shared between machines, an fsspec URL (file:///shared/tl_aot, s3://bucket/tl_aot) behind "
        "the local cache (default: TL_AOT_CACHE_URL)",
    )
    b.add_argument(
        "--shard",
        metavar="K/N",
        help="build only shard K of N of the variants into the part folder -o PART (no library); "
        "join the parts with python -m tl_aot link PART... -o OUT",
    )


def _add_link(sub) -> None:
    """``link``: the library from build shards."""
    k = sub.add_parser(
        "link",
        help="make lib<NAME>.so from the part folders of build --shard K/N (every shard, once)",
        description="Join the parts of a sharded build (python -m tl_aot build ... --shard K/N -o PART) into the library, "
        "identical to a one-machine build. Refuses parts of other sources or tools, and missing or duplicate shards.",
    )
    k.add_argument("parts", nargs="+", metavar="PART")
    k.add_argument("-o", "--output", default=".", help="output folder (default: .)")
    k.add_argument("--header-dir", help="folder for the C++ header (default: the output folder)")
    k.add_argument("--cache-dir", help="where the launcher runtime object is kept (default: TL_AOT_CACHE_DIR or OUTPUT/.tl_aot/cache)")
    k.add_argument("-q", "--quiet", action="store_true", help="print errors only")


def _add_capture(sub) -> None:
    """``capture``: record what a command's JIT compiles."""
    c = sub.add_parser(
        "capture",
        help="run a command and record every kernel TileLang's JIT compiles",
        description="Run COMMAND (after --) and record every compile request TileLang's JIT gets into RECORD "
        "(merged with what it holds). Python subprocesses are captured too.",
    )
    c.add_argument("-o", "--output", required=True, help="record to write or extend (JSON)")
    c.add_argument(
        "--device",
        help="compile nothing and answer device queries (torch.cuda, TileLang's driver) as this GPU, e.g. H100-SXM: "
        "a capture on a machine without one. Each new kernel is lowered for that GPU's arch to record a digest of its "
        "device code, which the build checks (TL_AOT_CAPTURE_LOWER=0 skips it)",
    )
    c.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")


def _add_run(sub) -> None:
    """``run --serve``: a command with its JIT served."""
    r = sub.add_parser(
        "run",
        help="run a command with TileLang's JIT served from prebuilt libraries",
        description="Run COMMAND (after --) with TileLang's JIT answered from the tl_aot libraries of --serve.",
    )
    r.add_argument("--serve", required=True, help="a library built with --capture, or a folder of them")
    r.add_argument("--strict", action="store_true", help="a kernel the libraries do not hold is an error, never compiled")
    r.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")


def _add_verify(sub) -> None:
    """``verify``: a library against its library's own JIT requests."""
    v = sub.add_parser(
        "verify",
        help="check that a library's kernels are the ones the operator library's own JIT compiles",
        description="Run COMMAND (after --: the library's workload) with TileLang's compile intercepted, or read "
        "--record, and check every variant of LIBRARY against the requests: identical, different (and what differs) "
        "or not reached. Exits 1 unless every variant is identical to a request.",
    )
    v.add_argument("library", help="a tl_aot library, or a folder of them")
    v.add_argument("--record", help="compare with this capture record instead of running a command")
    v.add_argument(
        "--device",
        help="run the command compiling nothing, device queries answered as this GPU (e.g. H100-SXM): a check without a GPU",
    )
    v.add_argument("--allow-unreached", action="store_true", help="variants the workload never asks for do not fail the check")
    v.add_argument("cmd", nargs="*", help="-- COMMAND [ARGS...]")


def _add_tune(sub) -> None:
    """``tune``: time candidate configs on this GPU."""
    t = sub.add_parser("tune", help="on a GPU host: time each entry's candidate configs, write a tuning record")
    _kernel_options(t)
    t.add_argument("-o", "--output", help="tuning record to write or update (default: SPEC's <stem>.tune.json, else tune.json)")
    t.add_argument("--dim", action="append", default=[], help="NAME=SIZE for a dynamic dim (or a scalar's value) while timing")
    t.add_argument("--warmup", type=int, help="untimed calls per candidate (default: the decorator's, else 25)")
    t.add_argument("--rep", type=int, help="timed calls per candidate (default: the decorator's, else 100)")


def _add_inspect(sub) -> None:
    """``inspect`` and ``deps``."""
    i = sub.add_parser("inspect", help="show a library's entries, parameters, kernels and versions")
    i.add_argument("library", help="path to lib<NAME>.so")
    i.add_argument("--json", action="store_true", help="print the full manifest as JSON")

    d = sub.add_parser("deps", help="print the local Python files a kernel file imports")
    d.add_argument("file")

    w = sub.add_parser(
        "check-wheel",
        help="find a wheel's oldest true manylinux tag from its libraries' symbol versions (refuses a vendored libtvm_ffi.so)",
        description="For CMake / scikit-build-core projects: `pip wheel . -w dist && python -m tl_aot check-wheel --retag dist/*.whl` "
        "gives the wheel the manylinux tag its libraries fit, with no auditwheel repair step.",
    )
    w.add_argument("wheels", nargs="+", metavar="WHEEL")
    w.add_argument("--retag", action="store_true", help="rewrite a linux_* wheel with its oldest true manylinux tag")
    w.add_argument("-w", "--wheel-dir", help="write retagged wheels here (default: replace them in place)")


def _job_count(text: str) -> int:
    """``-j N``: a whole number of job slots, at least 1 (argparse turns the ValueError into a usage error)."""
    try:
        n = int(text)
    except ValueError:
        msg = f"expected a whole number of jobs (at least 1), got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None
    if n < 1:
        msg = f"must be at least 1, got {n}"
        raise argparse.ArgumentTypeError(msg)
    return n


def _cli_archs(args, log) -> tuple | list | None:
    """The archs the command line asks for: ``--arch`` wins; else ``TL_AOT_ARCHS`` (said so in the log); else None."""
    from .spec import archs_from_env

    if args.arch:
        return args.arch
    env = archs_from_env(None)
    if env and log:
        log(f"archs {', '.join(str(a) for a in env)} from TL_AOT_ARCHS (no --arch given)")
    return env


def _out_idx(values: list | None) -> tuple | None:
    """``--out-idx`` values: ints or names; a lone ``none`` means the entry has no outputs."""
    if values is None:
        return None
    if values == ["none"]:
        return ()
    return tuple(int(v) if v.lstrip("-").isdigit() else v for v in values)


def _captured_library(args):
    """The LibrarySpec of ``build --capture RECORD...``: one entry per recorded kernel."""
    from .captured import specs_from_record
    from .spec import LibrarySpec

    if args.target or args.spec:
        msg = "build: --capture builds the kernels a record holds; give no FILE.py:FUNCTION or --spec with it"
        raise TlAotError(msg)
    archs = _cli_archs(args, _log_of(args))
    if archs is None:
        from .toolchain import default_archs

        archs = default_archs()
    entries: dict = {}
    for record in args.capture:
        for spec in specs_from_record(record, archs, device=args.device or ""):
            entries.setdefault(spec.capture[1], spec)
    if not entries:
        msg = f"build: {', '.join(args.capture)} holds no kernel tl_aot can build"
        raise TlAotError(msg)
    return LibrarySpec(name=args.name or "captured", entries=tuple(entries.values()))


#: Options whose argparse dest is not their name.
_DESTS = {"--import": "imports"}


def _library(args, what: str):
    """The LibrarySpec the command line names (FILE.py:FUNCTION with --arg ..., or --spec)."""
    from .entry_keys import entry_options
    from .spec import KernelSpec, LibrarySpec, load_spec_file, parse_arg, parse_pass_config, parse_target

    if getattr(args, "capture", None):
        return _captured_library(args)
    if bool(args.target) == bool(args.spec):
        msg = f"{what}: give either FILE.py:FUNCTION or --spec FILE (or --capture RECORD)"
        raise TlAotError(msg)
    if args.spec:
        per_entry = [f for f in entry_options() if getattr(args, _DESTS.get(f, f[2:].replace("-", "_"))) not in (None, [])]
        if per_entry:
            msg = f"{what}: {', '.join(per_entry)} apply to FILE.py:FUNCTION; in a spec file set them per entry"
            raise TlAotError(msg)
        return load_spec_file(args.spec, archs=_cli_archs(args, _log_of(args)), name=args.name, device=args.device)
    source, func = parse_target(args.target)
    archs = _cli_archs(args, _log_of(args))  # KernelSpec parses them, naming the entry
    if archs is None:
        from .toolchain import default_archs

        archs = default_archs()
    name = args.name or func
    spec = KernelSpec.create(
        name=args.entry or name,
        source=source,
        function=func,
        args=dict(parse_arg(a) for a in args.arg),
        archs=archs,
        pass_configs=dict(parse_pass_config(a) for a in args.pass_config),
        compile_flags=args.nvcc_flag,
        device=args.device,
        out_idx=_out_idx(args.out_idx),
        factory_args=dict(parse_arg(a, "--factory-arg") for a in args.factory_arg),
        jit_args=dict(parse_arg(a, "--jit-arg") for a in args.jit_arg),
        select=args.select,
        imports=args.imports or None,
        backend=args.backend,
    )
    return LibrarySpec(name=name, entries=(spec,))


def _log_of(args):
    """The progress log of a command (None with --quiet)."""
    return None if getattr(args, "quiet", False) else (lambda s: print(s, flush=True))


def _cmd_build(args) -> int:
    from pathlib import Path

    from .build import build_library
    from .record import Record, apply_record, record_path_for

    lib = _library(args, "build")
    log = None if args.quiet else (lambda s: print(s, flush=True))
    tune_file = args.tune_file or (record_path_for(args.spec) if args.spec and record_path_for(args.spec).is_file() else None)
    if tune_file:
        lib = apply_record(lib, Record.load(tune_file), strict=args.strict_tune, where=str(tune_file))
        tuned = sum(1 for e in lib.entries if e.tuned)
        if log:
            log(f"tuning record {Path(tune_file).name}: configs for {tuned} of {len(lib.entries)} entries")
    result = build_library(
        lib,
        out_dir=args.output,
        jobs=args.jobs,
        cache_dir=args.cache_dir,
        header_dir=args.header_dir,
        depfile=args.depfile,
        log=log,
        force=args.force,
        keep_going=args.keep_going,
        report_all=bool(args.capture),
        torch_ops=args.torch_ops,
        cluster=args.cluster,
        cache_url=args.cache_url,
        shard=args.shard,
    )
    if result.manifest.left_out and not log:  # the summary lists them; with -q this line does
        left = result.manifest.left_out
        print(f"tl_aot build: left out {len(left)} variant(s) (--keep-going):", file=sys.stderr)
        for x in left:
            print(f"  {x.spelled()}", file=sys.stderr)
    return 0


def _cmd_link(args) -> int:
    from .shards import link_parts

    link_parts(args.parts, out_dir=args.output, header_dir=args.header_dir, cache_dir=args.cache_dir, log=_log_of(args))
    return 0


def _command(args, what: str) -> list:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        msg = f"{what}: give the command to run after --, e.g. python -m tl_aot {what} ... -- python -m pytest tests"
        raise TlAotError(msg)
    return cmd


def _cmd_capture(args) -> int:
    """Run the command with the capture hook; report what the record holds."""
    import subprocess

    from .capture import Record
    from .startup import environment

    cmd = _command(args, "capture")
    record = Path(args.output).resolve()
    extra = {"TL_AOT_CAPTURE": str(record)}
    if args.device:
        from .device import find_profile

        extra["TL_AOT_CAPTURE_DEVICE"] = find_profile(args.device).name
    before = len(Record.load(record, missing_ok=True).kernels)
    code = subprocess.call(cmd, env=environment(extra))
    after = len(Record.load(record, missing_ok=True).kernels)
    print(f"tl_aot capture: {after} kernels in {record} ({after - before} new); the command exited with {code}", flush=True)
    return code


def _cmd_run(args) -> int:
    """Run the command with TileLang's JIT served from the libraries."""
    import subprocess

    from .startup import environment

    cmd = _command(args, "run")
    extra = {"TL_AOT_SERVE": str(Path(args.serve).resolve()), "TL_AOT_SERVE_STRICT": "1" if args.strict else "0"}
    return subprocess.call(cmd, env=environment(extra))


def _cmd_verify(args) -> int:
    """Check the library's variants against the requests of a workload (run now, or a record)."""
    import tempfile

    from .capture import Record
    from .runtime import _load_module, read_manifest
    from .verify import report, verify

    path = Path(args.library)
    files = sorted(path.glob("lib*.so")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        msg = f"verify: {path} is not a tl_aot library or a folder holding some"
        raise TlAotError(msg)
    manifests = [(f.name, read_manifest(_load_module(f), f)) for f in files]
    if args.record:
        if args.cmd:
            msg = "verify: give either --record RECORD or a command after --, not both"
            raise TlAotError(msg)
        kernels = Record.load(args.record).kernels
    else:
        with tempfile.TemporaryDirectory(prefix="tl_aot_verify_") as tmp:
            args.output = str(Path(tmp) / "requests.json")
            code = _cmd_capture(args)
            if code != 0:
                print(f"tl_aot verify: the workload exited with {code}; checking what it asked for before that", file=sys.stderr)
            kernels = Record.load(args.output, missing_ok=True).kernels
    text, passed = report(verify(manifests, kernels), allow_unreached=args.allow_unreached)
    print(text)
    return 0 if passed else 1


def _cmd_tune(args) -> int:
    from .record import record_path_for
    from .spec import parse_arg
    from .tune import tune_library, write_record

    lib = _library(args, "tune")
    out = args.output or (record_path_for(args.spec) if args.spec else "tune.json")
    items = tune_library(
        lib,
        values=dict(parse_arg(d) for d in args.dim),
        jobs=args.jobs,
        cache_dir=args.cache_dir,
        warmup=args.warmup,
        rep=args.rep,
        log=lambda s: print(s, flush=True),
    )
    if not items:
        print("nothing to tune: no entry has candidate configs (@autotune, or a `tune` table in the spec)")
        return 1
    record = write_record(out, items)
    print(f"wrote {out}: {len(items)} tuned, {len(record.items)} in the record")
    return 0


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
        for p in e.params:
            if p.is_tensor:
                role = " (output: returned when the call passes the inputs alone)" if p.output else ""
                lines.append(f"  param {p.name}: tensor {p.dtype}[{', '.join(str(d) for d in p.shape)}]{role}")
            else:
                lines.append(f"  param {p.name}: scalar {p.dtype}")
        if e.symbols:
            lines.append("  dynamic: " + ", ".join(s.spelled() for s in e.symbols))
        for v in e.variants:
            backend = "CuTeDSL backend, kernels found by pattern" if v.backend == "cutedsl" else "CUDA C++ backend"
            lines.append(f"  arch {v.arch}{'+PTX' if v.ptx else ''}: {v.image_kind} {v.image_bytes} bytes ({backend})")
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


def _cmd_locate_cuda(args) -> int:
    """``--nvcc`` / ``--cuda-home``: the compiler tl_aot builds with, for CMake (``CMAKE_CUDA_COMPILER``) and scripts."""
    from .cuda_toolkit import find_toolkit
    from .toolchain import cuda_home

    tk = find_toolkit()
    if args.nvcc:
        if not tk.nvcc:
            msg = f"the CUDA compiler found ({tk.describe}) has no nvcc (none is on PyPI for CUDA 12)"
            raise ToolchainNotFound(msg)
        print(tk.nvcc)
    if args.cuda_home:
        print(cuda_home())
    return 0


def _cmd_inspect(args) -> int:
    from .metadata import to_json
    from .runtime import _load_module, read_manifest

    path = Path(args.library)
    manifest = read_manifest(_load_module(path), path)
    print(_manifest_json(to_json(manifest)) if args.json else describe(manifest))
    return 0


def _cmd_check_wheel(args) -> int:
    from .wheel_check import check_claim, check_wheel, retag_wheel

    for wheel in map(Path, args.wheels):
        report = check_wheel(wheel)
        platform = wheel.stem.split("-")[-1]
        check_claim(report, platform)
        print(f"{wheel.name}: {report.summary()}")
        if args.retag and report.platform and platform.startswith("linux_"):
            print(f"  -> {retag_wheel(wheel, report.platform, args.wheel_dir)}")
    return 0


def _manifest_json(text: str) -> str:
    """The manifest as JSON, each variant's ``pass_configs`` an object (key -> value) as used."""
    data = json.loads(text)
    if data.get("driver_min_cuda"):  # the oldest driver that loads the library, as its own key
        data["driver"] = {"min_cuda": data["driver_min_cuda"], "min_version": data.get("driver_min_version", "")}
    for e in data.get("entries", []):
        for v in e.get("variants", []):
            v["pass_configs"] = {k: json.loads(val) for k, val in v.get("pass_configs", [])}
    return json.dumps(data, indent=2)


def main(argv=None) -> int:
    parser = _build_parser()
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    # `capture`/`run`/`verify` take a command after `--`: split there, so options may follow a positional
    head, tail = (argv[: argv.index("--")], argv[argv.index("--") :]) if "--" in argv else (argv, [])
    args = parser.parse_args(head)
    if tail:
        if not hasattr(args, "cmd"):
            parser.error(f"unrecognized arguments: {' '.join(tail)}")
        args.cmd = tail
    if args.version:
        print(__version__)
        return 0
    if args.cmake_dir:
        print(cmake_dir())
        return 0
    if args.include_dir:
        print(include_dir())
        return 0
    try:
        if args.nvcc or args.cuda_home:
            return _cmd_locate_cuda(args)
        if args.command == "build":
            return _cmd_build(args)
        if args.command == "link":
            return _cmd_link(args)
        if args.command == "tune":
            return _cmd_tune(args)
        if args.command == "capture":
            return _cmd_capture(args)
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "verify":
            return _cmd_verify(args)
        if args.command == "inspect":
            return _cmd_inspect(args)
        if args.command == "check-wheel":
            return _cmd_check_wheel(args)
        if args.command == "deps":
            from .source import local_dependencies

            if not Path(args.file).is_file():
                msg = f"deps: no such kernel file: {args.file}"
                raise TlAotError(msg)
            for p in local_dependencies(args.file):
                print(p)
            return 0
    except TlAotError as e:
        print(f"tl_aot: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        from .destinations import fs_error

        if not e.filename:  # not about a path: a bug to report with its traceback
            raise
        print(f"tl_aot: error: {fs_error(e, 'use', e.filename)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tl_aot: interrupted", file=sys.stderr)
        return 130
    parser.print_help()
    return 0 if argv is None and len(sys.argv) <= 1 else 2


if __name__ == "__main__":
    sys.exit(main())
