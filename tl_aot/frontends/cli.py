"""``python -m tl_aot``: build libraries, inspect them, and locate tl_aot's CMake/include files.

The grammar is :mod:`tl_aot.frontends.cli_parser`'s; the library a command line names, :mod:`tl_aot.frontends.cli_library`'s;
what ``inspect`` prints, :mod:`tl_aot.frontends.inspect_text`'s; the commands that run the user's workload (``capture``,
``run``, ``verify``), :mod:`tl_aot.frontends.cli_workload`'s. This module runs the rest and dispatches.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..common.build_tool_watch import watch_build_tool
from ..common.errors import TlAotError, ToolchainNotFound
from ..common.fs_errors import fs_error
from ..common.metadata_json import to_json
from ..common.versions import __version__
from ..config.arg_text import parse_arg
from ..config.user_code import local_dependencies
from ..cuda.cuda_toolkit import find_toolkit
from ..cuda.toolchain import cuda_home
from ..runtime.manifest_file import manifest_of_file
from ..tune.tuning_record import TuningRecord, apply_record, record_path_for
from .cli_library import library_of, log_of
from .cli_parser import build_parser
from .cli_workload import WorkloadNotStarted, cmd_capture, cmd_run, cmd_verify
from .inspect_text import describe, manifest_json

if TYPE_CHECKING:
    from ..pipeline.build_result import BuildResult
    from ..pipeline.image_packs import ImagePacks
    from ..pipeline.part import Part

__all__ = ["main", "describe", "cmake_dir", "include_dir"]

_PKG = Path(__file__).resolve().parents[1]


def cmake_dir() -> Path:
    """Folder holding ``TileLangAOTConfig.cmake``: inside an installed package, else the checkout's cmake/."""
    shipped = _PKG / "cmake"
    return shipped if (shipped / "TileLangAOTConfig.cmake").is_file() else _PKG.parent / "cmake"


def include_dir() -> Path:
    """Folder of tl_aot's C++ headers (``tl_aot/launcher_runtime.h``)."""
    return _PKG / "include"


def _cmd_build(args) -> int:
    """Build the library the command line names (a tuning record's configs applied), or with ``--shard`` one part of it."""
    from ..pipeline.library import build_library  # the whole pipeline: ~60 ms of imports no other subcommand needs
    from ..pipeline.shards import build_part

    watch_build_tool()  # under ninja (CMake): stop if ninja is killed
    lib = library_of(args, "build")
    log = log_of(args)
    tune_file = args.tune_file or (record_path_for(args.spec) if args.spec and record_path_for(args.spec).is_file() else None)
    if tune_file:
        lib = apply_record(lib, TuningRecord.load(tune_file), strict=args.strict_tune, where=str(tune_file))
        tuned = sum(1 for e in lib.entries if e.tuned)
        if log:
            log(f"tuning record {Path(tune_file).name}: configs for {tuned} of {len(lib.entries)} entries")
    if args.shard:
        _check_shard_flags(args)
        result: Part | BuildResult = build_part(
            lib,
            shard=args.shard,
            out_dir=args.output,
            jobs=args.jobs,
            cache_dir=args.cache_dir,
            log=log,
            force=args.force,
            keep_going=args.keep_going,
            report_all=bool(args.capture),
            cluster=args.cluster,
            cache_url=args.cache_url,
        )
    else:
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
            image_packs=_image_packs_of(args, "build"),
            native_log="raw" if args.verbose else None,
            cluster=args.cluster,
            cache_url=args.cache_url,
        )
    if result.left_out and not log:  # the summary lists them; with -q this line does
        left = result.left_out
        print(f"tl_aot build: left out {len(left)} variant(s) (--keep-going):", file=sys.stderr)
        for x in left:
            print(f"  {x.spelled()}", file=sys.stderr)
    return 0


def _check_shard_flags(args) -> None:
    """``build --shard`` writes a part: the flags that shape the library belong to ``link`` (or to no sharded build)."""
    for_link = {"--header-dir": "--header-dir DIR", "--image-packs": "--image-packs", "--pack-hint": "--pack-hint TEXT"}
    given = {"--header-dir": args.header_dir, "--depfile": args.depfile, "--torch-ops": args.torch_ops,
             "--image-packs": args.image_packs, "--pack-hint": args.pack_hint}  # fmt: skip
    dropped = [flag for flag, value in given.items() if value]
    if not dropped:
        return
    msg = f"build --shard writes a part, not a library: drop {', '.join(dropped)}"
    moved = [for_link[flag] for flag in dropped if flag in for_link]
    if moved:
        them = "them" if len(moved) > 1 else "it"
        msg += f"; link makes the library, pass {them} there: python -m tl_aot link PART... -o OUT {' '.join(moved)}"
    raise TlAotError(msg)


def _image_packs_of(args, command: str) -> ImagePacks | None:
    """The ``--image-packs`` / ``--pack-hint`` choice of ``build`` or ``link``; a hint without packs is an error."""
    from ..pipeline.image_packs import ImagePacks

    if args.pack_hint and not args.image_packs:
        msg = f"{command}: --pack-hint is what a user missing an image pack is told: it needs --image-packs"
        raise TlAotError(msg)
    return ImagePacks(hint=args.pack_hint) if args.image_packs else None


def _cmd_link(args) -> int:
    """Join the parts of a sharded build into the library (``--image-packs``: its images in per-arch packs)."""
    from ..pipeline.shards import link_parts  # the pipeline, as for build

    link_parts(
        args.parts,
        out_dir=args.output,
        header_dir=args.header_dir,
        cache_dir=args.cache_dir,
        image_packs=_image_packs_of(args, "link"),
        keep_going=args.keep_going,
        jobs=args.jobs,
        log=log_of(args),
    )
    return 0


def _cmd_tune(args) -> int:
    """Time each entry's candidate configs on this GPU and write the tuning record."""
    from ..pipeline.library import build_library
    from ..tune.tuner import tune_library, write_record

    lib = library_of(args, "tune")
    out = args.output or (record_path_for(args.spec) if args.spec else "tune.json")
    items = tune_library(
        lib,
        build=build_library,
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


def _cmd_locate_cuda(args) -> int:
    """``--nvcc`` / ``--cuda-home``: the compiler tl_aot builds with, for CMake (``CMAKE_CUDA_COMPILER``) and scripts."""
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
    """Print a library's manifest (text, or JSON with --json), read from the file: no tvm-ffi, no torch."""
    path = Path(args.library)
    manifest = manifest_of_file(path)
    print(manifest_json(to_json(manifest)) if args.json else describe(manifest))
    return 0


def _cmd_split_wheel(args) -> int:
    """``split-wheel``: each wheel into its base and one wheel per arch of its image packs; one line per wheel written."""
    from ..wheel.arch_wheels import split_wheel

    for wheel in args.wheels:
        done = split_wheel(wheel, args.wheel_dir)
        print(f"{done.base} ({done.base.stat().st_size / 2**20:.2f} MiB)")
        for path in done.archs.values():
            print(f"{path} ({path.stat().st_size / 2**20:.2f} MiB)")
    return 0


#: Distributions (as wheel file names spell them) whose wheels ``check-wheel`` skips: the run-time dependency
#: that carries ``libtvm_ffi.so`` itself, which a kernel wheel must never vendor.
_NOT_YOURS = ("apache_tvm_ffi",)


def _cmd_check_wheel(args) -> int:
    """Check (and with --retag, retag) each wheel's manylinux platform tag."""
    from ..wheel.wheel_check import check_claim, check_wheel, retag_wheel  # the wheel wing: this command alone reads wheels

    for wheel in map(Path, args.wheels):
        if wheel.name.split("-")[0].lower() in _NOT_YOURS:  # `pip wheel .` without --no-deps puts it in the folder too
            print(f"{wheel.name}: skipped: apache-tvm-ffi's own wheel, a dependency (pip wheel --no-deps leaves it out)")
            continue
        try:
            report = check_wheel(wheel)
            platform = wheel.stem.split("-")[-1]
            retag = report.platform if args.retag and (platform.startswith("linux_") or platform == "any") else None
            if not retag:
                check_claim(report, platform)
        except TlAotError as e:
            msg = f"{wheel.name}: {e}"
            raise TlAotError(msg) from None
        print(f"{wheel.name}: {report.summary()}")
        if retag:  # a plain linux_* tag PyPI refuses, or 'any' on a wheel that is not pure
            print(f"  -> {retag_wheel(wheel, retag, args.wheel_dir)}")
    return 0


def _cmd_deps(args) -> int:
    """The local Python files a kernel file imports, one a line."""
    if not Path(args.file).is_file():
        msg = f"deps: no such kernel file: {args.file}"
        raise TlAotError(msg)
    for p in local_dependencies(args.file):
        print(p)
    return 0


#: Each subcommand's function (``--nvcc`` / ``--cuda-home`` are options of no subcommand).
_COMMANDS = {
    "build": _cmd_build,
    "link": _cmd_link,
    "tune": _cmd_tune,
    "capture": cmd_capture,
    "run": cmd_run,
    "verify": cmd_verify,
    "inspect": _cmd_inspect,
    "check-wheel": _cmd_check_wheel,
    "split-wheel": _cmd_split_wheel,
    "deps": _cmd_deps,
}


def main(argv=None) -> int:
    """``python -m tl_aot ARGS``: the exit status. Output cut short by its reader (``| head``) ends it quietly."""
    try:
        status = _main(argv)
        sys.stdout.flush()  # here, not at the interpreter's exit, where a closed pipe prints "Exception ignored"
    except BrokenPipeError:
        # the reader is gone: nothing more can reach it, so no traceback; stdout pointed at /dev/null so the
        # interpreter's last flush stays quiet. 141: a process ended by SIGPIPE, as `ls | head` leaves it
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141
    return status


def _main(argv) -> int:
    parser = build_parser()
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
        if args.command in _COMMANDS:
            return _COMMANDS[args.command](args)
    except WorkloadNotStarted as e:
        print(e, file=sys.stderr)
        return e.status
    except TlAotError as e:
        print(f"tl_aot: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
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
