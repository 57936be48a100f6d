"""The command line's grammar: ``python -m tl_aot``'s options and subcommands (argparse), and nothing they do."""

from __future__ import annotations

import argparse

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m tl_aot``: locator flags and one subcommand per job."""
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
        "default per arch: A100-SXM (80), A10 (86), L40S (89), H100-SXM (90a), B200 (100a), RTX-5090 (120)",
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


def _library_folders(p) -> None:
    """``-o`` / ``--header-dir``: where ``build`` and ``link`` put the library and its header."""
    p.add_argument("-o", "--output", default=".", help="output folder (default: .)")
    p.add_argument("--header-dir", help="folder for the C++ header (default: the output folder)")


def _pack_options(p) -> None:
    """``--image-packs`` / ``--pack-hint``: where the library is made (``build``, ``link`` of a sharded build)."""
    p.add_argument(
        "--image-packs",
        action="store_true",
        help="keep the images beside the library, compressed and stored once by content, one lib<NAME>.<arch>.tlpack per "
        "arch, each image read on its entry's first call; a wheel then splits by arch (python -m tl_aot split-wheel; "
        "docs/wheels.md)",
    )
    p.add_argument(
        "--pack-hint",
        default="",
        help="with --image-packs: what a user missing an arch's pack is told to run, {tag} standing for the arch "
        "(\"pip install 'mylib-{tag}==1.0'\"); default: copy the pack beside the library",
    )


def _add_build(sub) -> None:
    """``build``: lower, compile and link."""
    b = sub.add_parser("build", help="lower, compile and link kernels into lib<NAME>.so")
    _kernel_options(b)
    _library_folders(b)
    b.add_argument("--depfile", help="write a Makefile depfile of every Python file the kernels import")
    b.add_argument("--force", action="store_true", help="rebuild every variant, ignoring the cache")
    b.add_argument(
        "--tune-file",
        help="tuning record (python -m tl_aot tune) whose configs to build; default: SPEC's <stem>.tune.json if present",
    )
    b.add_argument("--strict-tune", action="store_true", help="a record older than the kernel's source is an error, not a warning")
    b.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    b.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print TileLang's own C++ log as it wrote it while lowering, 'Fatal:' lines included (by default "
        "its warnings are shown and its 'Fatal:' lines only through tl_aot's error; with -q nothing)",
    )
    b.add_argument(
        "--capture",
        action="append",
        default=[],
        help="capture record (python -m tl_aot capture): build every kernel in it (repeatable; records merge)",
    )
    b.add_argument(
        "--keep-going",
        action="store_true",
        help="leave out variants that fail to lower or compile instead of failing the build, and entries whose generated "
        "launcher code fails to compile (a tl_aot bug to report: every arch of them, with the compiler's error); what was "
        "left out is listed (even with -q) and recorded in the library (inspect shows it). Without it a build fails, and "
        "--capture names every kernel that failed",
    )
    b.add_argument(
        "--torch-ops",
        action="store_true",
        default=None,
        help="also build lib<NAME>_torch.so: the entries as native torch operators (LibTorch Stable ABI, torch >= 2.10; "
        "needs torch's headers; default: the spec's [library] torch_ops)",
    )
    _pack_options(b)
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
        "identical to a one-machine build (with --image-packs, its packs too: parts never hold packs). Refuses parts of "
        "other sources or tools, and missing or duplicate shards.",
    )
    k.add_argument("parts", nargs="+", metavar="PART")
    _library_folders(k)
    k.add_argument("--cache-dir", help="where the launcher runtime object is kept (default: TL_AOT_CACHE_DIR or OUTPUT/.tl_aot/cache)")
    _pack_options(k)
    k.add_argument(
        "--keep-going",
        action="store_true",
        help="an entry whose generated launcher code does not compile (a tl_aot bug) is left out, every arch of it, "
        "and the rest linked, as build --keep-going does (variants the shards left out are left out either way)",
    )
    k.add_argument(
        "-j",
        "--jobs",
        type=_job_count,
        help="jobs at once, as build's -j: the launcher's units compiled and, with --image-packs, the images compressed "
        "(default: MAX_JOBS or the CPU count); the library's bytes do not depend on it",
    )
    k.add_argument("-q", "--quiet", action="store_true", help="print errors only")


def _add_capture(sub) -> None:
    """``capture``: record what a command's JIT compiles."""
    c = sub.add_parser(
        "capture",
        help="run a command and record every kernel TileLang's JIT compiles",
        description="Run COMMAND (after --) and record every compile request TileLang's JIT gets into RECORD "
        "(merged with what it holds). Python subprocesses are captured too, each writing its own parts of the record "
        "(RECORD.parts/), merged when COMMAND ends: run the workload under pytest -n N or any process pool. "
        "Exits with COMMAND's status (127 when it is not found, 126 when it cannot be run, as env exits), or 1 when "
        "a kernel could not be recorded.",
    )
    c.add_argument("-o", "--output", required=True, help="record to write or extend (JSON)")
    c.add_argument(
        "--serve",
        metavar="LIB",
        help="incremental capture: kernels the library LIB (or a folder of libraries) holds are recorded and served by it, "
        "not compiled (nor lowered, with --device); only what LIB lacks is compiled. The record still holds every kernel "
        "the command asks for, so a build from it builds them all",
    )
    c.add_argument(
        "--keep-going",
        action="store_true",
        help="exit with COMMAND's status even when kernels could not be recorded (they are still listed)",
    )
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
        description="Run COMMAND (after --) with TileLang's JIT answered from the tl_aot libraries of --serve. Exits with "
        "COMMAND's status (127 when it is not found, 126 when it cannot be run).",
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
    w.add_argument("--retag", action="store_true", help="rewrite a linux_* or mistagged any wheel with its oldest true manylinux tag")
    w.add_argument("-w", "--wheel-dir", help="write retagged wheels here (default: replace them in place)")

    s = sub.add_parser(
        "split-wheel",
        help="split a wheel whose libraries keep their images in packs into a base wheel and one wheel per arch",
        description="For a wheel built with image packs (TileLangExtension(image_packs=True), build --image-packs): "
        "`python -m tl_aot split-wheel dist/*.whl` leaves the base wheel (launcher and manifest; each arch an extra, "
        "pip install 'NAME[sm90a]') and writes NAME_sm90a-VERSION-TAGS.whl per arch (docs/wheels.md).",
    )
    s.add_argument("wheels", nargs="+", metavar="WHEEL")
    s.add_argument("-w", "--wheel-dir", help="write the wheels here (default: beside each, the base replaced in place)")


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
