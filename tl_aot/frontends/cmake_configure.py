"""What CMake's ``add_tilelang_kernel()`` asks Python at configure time: the target's name, its entry, its archs.

CMake re-implements none of it. It passes its raw values and gets back the archs for
``python -m tl_aot build --arch`` (one line, space separated), how its comment shows them, the
image pack files the build writes beside the library (one line, space separated; empty without
``IMAGE_PACKS``: CMake declares them as the build step's byproducts and installs them), and notes
for the configure log, or one error line (exit status 1) it stops the configure with::

    python -m tl_aot.frontends.cmake_configure --target gemm --archs=80-real;90a --archs-variable=${TL_AOT_ARCHS}
        --cuda-architectures=${CMAKE_CUDA_ARCHITECTURES} -- kernels/gemm.py:matmul --name gemm --arg M=4096

The archs are chosen by :func:`tl_aot.config.arch_choice.resolve_archs`: ``ARCHS`` beats ``TL_AOT_ARCHS``
(the CMake variable, then the environment), which beats ``CMAKE_CUDA_ARCHITECTURES``; with none,
the build's default archs (no ``--arch``). The arguments after ``--`` are those the build gets; a
``FILE.py:FUNCTION`` entry is made (arch-free) and checked as the CLI makes it, its errors naming
CMake's keywords (``ARGS item 'M4096': ...``).
"""

from __future__ import annotations

import argparse
import re
import sys

from ..common.arch import Arch
from ..common.errors import SpecError
from ..config.arch_choice import ENV_VAR, ArchChoice, Given, cmake_spelling, env_archs, resolve_archs
from ..config.entry_keys import ENTRY_TABLE
from ..config.kernel_spec import LibrarySpec
from ..config.spec_names import check_library_name
from ..pipeline.image_packs import pack_label, pack_name
from .cli_library import entry_of
from .cli_parser import build_parser

__all__ = ["configure", "main"]

#: The add_tilelang_kernel() keyword of each CLI option of an entry.
_KEYWORDS = {k.cli: k.cmake for k in ENTRY_TABLE if k.cli.startswith("--") and k.cmake}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tl_aot.frontends.cmake_configure", description=__doc__.splitlines()[0])
    p.add_argument("--target", required=True, help="the target (library) name")
    p.add_argument("--archs", help="ARCHS, a CMake list")
    p.add_argument("--archs-variable", default="", help="the CMake variable TL_AOT_ARCHS")
    p.add_argument("--cuda-architectures", default="", help="CMAKE_CUDA_ARCHITECTURES")
    p.add_argument("build", nargs=argparse.REMAINDER, help="-- the arguments python -m tl_aot build gets")
    return p


def _given(origin: str, text: object) -> Given:
    """A CMake list (or a ``"80 90a"`` string) in CMake's arch spellings, as tl_aot's."""
    return cmake_spelling(re.split(r"[;,\s]+", str(text or "")), origin)


def _short(a: Arch) -> str:
    """``90a``, ``80+PTX``: the spelling ``--arch`` takes and CMake writes into its options file."""
    return f"{a.major}{a.minor}{a.suffix}" + ("+PTX" if a.ptx else "")


def configure(argv: list[str]) -> list[str]:
    """The lines CMake reads: archs for ``--arch`` (space separated; empty: the default), their display, the pack files, notes."""
    opts = _parser().parse_args(argv)
    check_library_name(opts.target, "target name")
    build = opts.build[1:] if opts.build[:1] == ["--"] else opts.build
    notes: list[str] = []
    try:
        chosen = _archs(opts, notes.append)
        args = build_parser().parse_args(["build", *build])
        if args.target:  # SOURCE/FUNCTION: the entry, arch-free; a SPEC or CAPTURE file is read when built
            spec = entry_of(args, None, spell=lambda flag: f"{_KEYWORDS.get(flag, flag)} item")
            LibrarySpec(name=opts.target, entries=(spec,))
    except SpecError as e:
        msg = f"target {opts.target}: {e}"
        raise SpecError(msg) from None
    display = chosen.display or "tl_aot's default archs"
    packs = _pack_files(opts.target, chosen.archs) if args.image_packs else ""
    return [" ".join(_short(a) for a in chosen.archs), display, packs, *(f"add_tilelang_kernel({opts.target}): {n}" for n in notes)]


def _pack_files(target: str, archs: tuple[Arch, ...]) -> str:
    """The pack files of ``IMAGE_PACKS`` (``libgemm.sm_80.tlpack libgemm.sm_90a.tlpack``): one per arch, named as the build names them."""
    if not archs:
        msg = (
            f"target {target}: IMAGE_PACKS needs the archs at configure time (CMake names each arch's pack file as an "
            "output of the build): give ARCHS, TL_AOT_ARCHS or CMAKE_CUDA_ARCHITECTURES"
        )
        raise SpecError(msg)
    return " ".join(sorted({pack_name(target, pack_label(a)) for a in archs}))


def _archs(opts, log) -> ArchChoice:
    """``ARCHS`` > ``TL_AOT_ARCHS`` (the CMake variable, then the environment) > ``CMAKE_CUDA_ARCHITECTURES``; else none."""
    explicit = _given("ARCHS", opts.archs)
    env = (_given(f"{ENV_VAR} (CMake variable)", opts.archs_variable), _given(ENV_VAR, env_archs().value))
    return resolve_archs(explicit, env, _given("CMAKE_CUDA_ARCHITECTURES", opts.cuda_architectures), log=log)


def main(argv=None) -> int:
    """Print :func:`configure`'s lines, or the one error line (exit status 1) CMake stops with."""
    try:
        lines = configure(sys.argv[1:] if argv is None else list(argv))
    except SpecError as e:
        print(e, file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
