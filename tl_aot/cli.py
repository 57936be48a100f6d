"""``python -m tl_aot``: build libraries, inspect them, and locate tl_aot's CMake/include files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .errors import TlAotError

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
    sub = p.add_subparsers(dest="command")

    b = sub.add_parser("build", help="lower, compile and link kernels into lib<NAME>.so")
    b.add_argument("target", nargs="?", help="FILE.py:FUNCTION (or use --spec)")
    b.add_argument("--spec", help="TOML/JSON file listing several entries of one library")
    b.add_argument("--name", help="library (and, with FILE.py:FUNCTION, entry) name; default: the function name")
    b.add_argument("--entry", help="entry name when it should differ from --name")
    b.add_argument("--arch", action="append", default=[], help="target arch: sm_90a, 90a, 9.0a, 80+PTX (repeatable)")
    b.add_argument("--arg", action="append", default=[], help="specialisation argument NAME=VALUE (a Python literal)")
    b.add_argument("--pass-config", action="append", default=[], help="TileLang pass config KEY=VALUE")
    b.add_argument("--nvcc-flag", action="append", default=[], help="extra nvcc flag for the kernel images")
    b.add_argument(
        "--device",
        help="GPU that device queries made while lowering (driver.get_num_sms(), ...) describe, e.g. H100-PCIe; "
        "default per arch: A100-SXM (80), A10 (86), L40S (89), H100-SXM (90a), B200 (100a)",
    )
    b.add_argument(
        "--out-idx",
        action="append",
        help="a parameter (index, negative from the end, or name) the entry allocates and returns, like "
        "@tilelang.jit(out_idx=...) (repeatable; 'none' for no outputs; default: the kernel's own out_idx / T.empty)",
    )
    b.add_argument("-o", "--output", default=".", help="output folder (default: .)")
    b.add_argument("--header-dir", help="folder for the C++ header (default: the output folder)")
    b.add_argument("--depfile", help="write a Makefile depfile of every Python file the kernels import")
    b.add_argument("-j", "--jobs", type=int, help="jobs at once, shared by lowering and nvcc (default: MAX_JOBS or the CPU count)")
    b.add_argument("--cache-dir", help="variant cache (default: TL_AOT_CACHE_DIR or OUTPUT/.tl_aot/cache)")
    b.add_argument("--force", action="store_true", help="rebuild every variant, ignoring the cache")
    b.add_argument("-q", "--quiet", action="store_true", help="print errors only")

    i = sub.add_parser("inspect", help="show a library's entries, parameters, kernels and versions")
    i.add_argument("library", help="path to lib<NAME>.so")
    i.add_argument("--json", action="store_true", help="print the full manifest as JSON")

    d = sub.add_parser("deps", help="print the local Python files a kernel file imports")
    d.add_argument("file")
    return p


def _out_idx(values: list | None) -> tuple | None:
    """``--out-idx`` values: ints or names; a lone ``none`` means the entry has no outputs."""
    if values is None:
        return None
    if values == ["none"]:
        return ()
    return tuple(int(v) if v.lstrip("-").isdigit() else v for v in values)


def _cmd_build(args) -> int:
    from .build import build_library
    from .spec import KernelSpec, LibrarySpec, archs_from_env, load_spec_file, parse_arg, parse_target

    if bool(args.target) == bool(args.spec):
        msg = "build: give either FILE.py:FUNCTION or --spec FILE"
        raise TlAotError(msg)
    if args.spec and args.out_idx:
        msg = "build: --out-idx applies to FILE.py:FUNCTION; in a spec file set out_idx per entry"
        raise TlAotError(msg)
    if args.spec:
        lib = load_spec_file(args.spec, archs=args.arch or None, name=args.name, device=args.device)
    else:
        source, func = parse_target(args.target)
        archs = archs_from_env(None) or args.arch or None  # KernelSpec parses them, naming the entry
        if archs is None:
            from .toolchain import default_archs

            archs = default_archs()
        kwargs = dict(parse_arg(a) for a in args.arg)
        pcs = dict(parse_arg(a) for a in args.pass_config)
        name = args.name or func
        spec = KernelSpec.create(
            name=args.entry or name,
            source=source,
            function=func,
            args=kwargs,
            archs=archs,
            pass_configs=pcs,
            compile_flags=args.nvcc_flag,
            device=args.device,
            out_idx=_out_idx(args.out_idx),
        )
        lib = LibrarySpec(name=name, entries=(spec,))
    log = None if args.quiet else (lambda s: print(s, flush=True))
    build_library(
        lib,
        out_dir=args.output,
        jobs=args.jobs,
        cache_dir=args.cache_dir,
        header_dir=args.header_dir,
        depfile=args.depfile,
        log=log,
        force=args.force,
    )
    return 0


def describe(manifest) -> str:
    """Human-readable description of a manifest (what ``inspect`` prints)."""
    exports = manifest.exports()
    lines = [
        f"library {manifest.library}: {len(exports)} entr{'y' if len(exports) == 1 else 'ies'}",
        f"  built with tl_aot {manifest.tl_aot_version}, TileLang {manifest.tilelang_version}, "
        f"nvcc {manifest.nvcc_version}, launcher ABI {manifest.abi_version}",
    ]
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
            lines.append("  dynamic: " + ", ".join(f"{s.name} = {s.param}.shape[{s.dim}]" for s in e.symbols))
        for v in e.variants:
            lines.append(f"  arch {v.arch}{'+PTX' if v.ptx else ''}: {v.image_kind} {v.image_bytes} bytes")
            if v.device:
                lines.append(f"    device queries answered as {v.device}")
            if v.config:
                lines.append(f"    config ({v.config_source}): " + ", ".join(f"{k}={val}" for k, val in v.config))
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


def _cmd_inspect(args) -> int:
    from .metadata import to_json
    from .runtime import _load_module, read_manifest

    path = Path(args.library)
    manifest = read_manifest(_load_module(path), path)
    print(to_json(manifest, indent=2) if args.json else describe(manifest))
    return 0


def main(argv=None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
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
        if args.command == "build":
            return _cmd_build(args)
        if args.command == "inspect":
            return _cmd_inspect(args)
        if args.command == "deps":
            from .source import local_dependencies

            for p in local_dependencies(args.file):
                print(p)
            return 0
    except TlAotError as e:
        print(f"tl_aot: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tl_aot: interrupted", file=sys.stderr)
        return 130
    parser.print_help()
    return 0 if argv is None and len(sys.argv) <= 1 else 2


if __name__ == "__main__":
    sys.exit(main())
