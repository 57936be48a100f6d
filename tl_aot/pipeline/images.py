"""Stage 3, compile images: a lowered variant's CUDA → its image (nvcc), or its CuTeDSL module → a cubin.

Errors name the entry, the arch and the user's code the kernel came from; a tool that died on a
nearly full disk is said to have, rather than blamed on the CUDA code.
"""

from __future__ import annotations

import re
import shutil
import signal
import tempfile
from pathlib import Path

from ..common.destinations import disk_full_note
from ..common.errors import CompileError, FailedProcessError, TlAotError, tool_signal
from ..common.file_names import case_safe_stem
from ..common.metadata import LoweredVariant
from ..cuda.arch_traps import ArchTrap, ArchTrapped, arch_trap
from ..cuda.device_image import Unit, compile_image, compile_images
from ..lower.cuda_source import shadowed_names
from ..lower.cutedsl import compile_cubin, match_kernels

__all__ = ["first_diagnostic", "image_of", "images_of"]


def image_of(variant: LoweredVariant, arch, work: Path, source: str, *, path_map=()) -> bytes:
    """The image of one lowered variant (nvcc, or CuTeDSL for a ``cutedsl`` variant), compiled under ``work``.

    ``source`` (``kernels.py:12 (matmul)``) is where errors point; ``path_map`` ((old, new) folder
    pairs) respells paths in the image's line table: a cluster worker's copy of the sources as the
    driver's folder, so the image is the driver's own.
    """
    if variant.backend == "cutedsl":
        return _cutedsl(variant, arch, work)
    return _nvcc(variant, arch, work, source, path_map)


def _nvcc(variant: LoweredVariant, arch, work: Path, source: str, path_map=()) -> bytes:
    """The image of one variant; nvcc's error says which entry and user code it came from."""
    unit = _unit(variant, arch)
    try:
        image = compile_image(arch, work / "kernels", unit.stem, unit.source, variant.nvcc_options, what=unit.what, path_map=path_map)
    except ArchTrapped as e:  # a +PTX image's PTX: refused before the fatbin was made
        raise _trapped(e.trap, variant, arch, work, source, unit.stem) from None
    except FailedProcessError as e:
        raise _nvcc_error(e, variant, arch, work, source, unit.stem) from e
    trapped = _trap_error(image, variant, arch, work, source, unit.stem)
    if trapped is not None:
        raise trapped
    return image


def images_of(variants: list[tuple[LoweredVariant, str]], arch, work: Path, on_done, *, path_map=(), on_batch=None) -> None:
    """The images of several variants of one ``arch`` (each with where its errors point): ``on_done(i, image or error)`` for each.

    nvcc variants with the same flags compile to PTX in one nvcc run (:func:`tl_aot.cuda.device_image.compile_images`:
    the headers are parsed once; the images are those each variant gets alone); CuTeDSL ones one by one.
    Each result is passed on as soon as it is known. ``path_map`` as for :func:`image_of`;
    ``on_batch(indices)`` is called for each group of variants whose images came from one nvcc run.
    """
    groups: dict[tuple[str, ...], list[int]] = {}  # nvcc options -> the variants compiled with them
    for i, (v, _) in enumerate(variants):
        if v.backend != "cutedsl":
            groups.setdefault(tuple(v.nvcc_options), []).append(i)
            continue
        try:
            image = _cutedsl(v, arch, work)
        except TlAotError as e:
            on_done(i, e)
        else:
            on_done(i, image)
    for options, members in groups.items():
        units = [_unit(variants[i][0], arch) for i in members]
        index = {u.stem: i for u, i in zip(units, members)}

        def done(stem: str, got, index=index) -> None:
            i = index[stem]
            if isinstance(got, FailedProcessError):
                got = _nvcc_error(got, variants[i][0], arch, work, variants[i][1], stem)
            elif isinstance(got, ArchTrapped):
                got = _trapped(got.trap, variants[i][0], arch, work, variants[i][1], stem)
            elif isinstance(got, bytes):
                got = _trap_error(got, variants[i][0], arch, work, variants[i][1], stem) or got
            on_done(i, got)

        def shared(stems: list, index=index) -> None:
            if on_batch is not None:
                on_batch([index[s] for s in stems])

        compile_images(arch, work / "kernels", units, options, path_map=path_map, on_done=done, on_batch=shared)


def _unit(variant: LoweredVariant, arch) -> Unit:
    stem = case_safe_stem(f"{variant.entry}__{arch.sm}{'_ptx' if arch.ptx else ''}")
    return Unit(stem, variant.cuda_source, f"nvcc ({variant.entry}, {arch})")


def _nvcc_error(e: FailedProcessError, variant: LoweredVariant, arch, work: Path, source: str, stem: str) -> CompileError:
    """Nvcc's failure on one variant as the error a user reads: entry, arch, their code, the generated source."""
    crash = _crash_of(e, work)
    if crash:
        return CompileError(f"entry {variant.entry!r} ({arch}): {crash}", entry=variant.entry, arch=arch.sm, location=source)
    hint = ""
    if variant.nvcc_options and re.search(r"Unknown option|unknown option|Unsupported|invalid", e.stderr + e.stdout):
        hint = (
            f"\n  the extra nvcc flags ({' '.join(variant.nvcc_options)}) come from the entry's compile_flags / "
            "--nvcc-flag, or the kernel's TL_DEVICE_COMPILE_FLAGS pass config"
        )
    hint += _arch_feature_hint(e, arch) + _missing_header_hint(e) + _shadowed_hint(variant)
    diagnostic = first_diagnostic(e.stderr + "\n" + e.stdout)
    msg = (
        f"entry {variant.entry!r} ({arch}): nvcc failed on the CUDA code TileLang generated from {source}"
        f"{': ' + diagnostic if diagnostic else ''}\n"
        f"  generated source: {work / 'kernels' / (stem + '.cu')}{hint}\n{e}"
    )
    return CompileError(msg, entry=variant.entry, arch=arch.sm, location=source)


def _trap_error(image: bytes, variant: LoweredVariant, arch, work: Path, source: str, stem: str) -> CompileError | None:
    """The variant refused when nvcc compiled TileLang's trap for a missing arch feature into its image (``cuda/arch_traps.py``).

    Such an image builds and loads, then fails at its first launch; the error names the target the kernel needs.
    """
    trap = arch_trap(image)
    return None if trap is None else _trapped(trap, variant, arch, work, source, stem)


def _trapped(trap: ArchTrap, variant: LoweredVariant, arch, work: Path, source: str, stem: str) -> CompileError:
    """The error of a variant whose image (or, ``+PTX``, whose PTX) holds TileLang's ``trap``: the target it needs."""
    needed = trap.target.removeprefix("sm_")
    digits = "".join(ch for ch in needed if ch.isdigit())
    if digits == str(arch.number):
        fix = f"Build --arch {needed} (what TileLang's JIT compiles on that GPU)"
    else:  # sm_121a of a kernel whose instruction TileLang enables on sm_120a only: no target of this GPU has it
        fix = (
            f"An {trap.target} image runs on compute capability {digits[:-1]}.{digits[-1]} only: TileLang has no path for this "
            f"kernel on a {arch.major}.{arch.minor} GPU (its JIT compiles the same trap there); drop --arch {arch.number}{arch.suffix}"
        )
    ptx = f"; its PTX, which the driver compiles for newer GPUs, holds the same trap (an {trap.target} image has none for them)"
    ptx = ptx if arch.ptx else ""
    msg = (
        f"entry {variant.entry!r} ({arch}): the kernel TileLang generated from {source} needs {trap.target}: for {arch.sm} "
        f'nvcc compiled TileLang\'s run-time trap in place of the instruction ("{trap.message}"){ptx}, an image that fails at '
        f"its first launch. {fix}\n"
        f"  generated source: {work / 'kernels' / (stem + '.cu')}"
    )
    return CompileError(msg, entry=variant.entry, arch=arch.sm, location=source)


def _shadowed_hint(variant: LoweredVariant) -> str:
    """Names of the user's that hide what TileLang's code needs (a parameter ``blockIdx``, ``half_t``): rename them."""
    return "".join(f"\n  {what}: rename it (TileLang's own JIT fails the same way)" for _, what in shadowed_names(variant.cuda_source))


#: A compiler's diagnostic: ``intrin.h(184): error: static assertion failed ...``, ``k.cu:8:10: fatal error: x.h: No such
#: file or directory``, ``ptxas error   : Entry function ... uses too much shared data``.
_DIAGNOSTIC = re.compile(r"(?:^|[\s:)])((?:fatal )?error\s*:\s.*|ptxas (?:error|fatal)\s*:.*)$")


def first_diagnostic(output: str, limit: int = 200) -> str:
    """The first error a compiler printed, without the file it names.

    The message's first line carries it: a ``--keep-going`` build lists that line for each variant
    it left out, so the list says why nvcc refused, not only that it did.
    """
    for line in output.splitlines():
        m = _DIAGNOSTIC.search(line.strip())
        if m:
            return re.sub(r"\s+", " ", m.group(1))[:limit]
    return ""


#: CUDA libraries whose headers TileLang's generated code may include: header prefix -> (library, pip package).
_CUDA_LIBRARY_HEADERS = {
    "curand": ("cuRAND", "nvidia-curand"),
    "cublas": ("cuBLAS", "nvidia-cublas"),
    "cufft": ("cuFFT", "nvidia-cufft"),
    "cusparse": ("cuSPARSE", "nvidia-cusparse"),
    "cusolver": ("cuSOLVER", "nvidia-cusolver"),
}


def _missing_header_hint(e: FailedProcessError) -> str:
    """For a CUDA library's header the toolkit lacks (``T.rng`` includes ``curand_kernel.h``): where it comes from.

    A minimal toolkit (or the compiler from PyPI alone) has no cuRAND headers; TileLang's JIT on a machine with
    the full toolkit compiles the same code, so the fix is the toolkit's, not the kernel's.
    """
    m = re.search(r"fatal error: ([\w./-]+\.h): No such file or directory", e.stderr + e.stdout)
    if not m:
        return ""
    header = m.group(1)
    known = next((v for k, v in _CUDA_LIBRARY_HEADERS.items() if Path(header).name.startswith(k)), None)
    if known is None:
        return f"\n  {header} was not found on nvcc's include path (the CUDA toolkit's, TileLang's, and the entry's -I flags)"
    library, package = known
    return (
        f"\n  {header} is {library}'s header, which the CUDA toolkit nvcc uses does not have: install {library}'s "
        f"development headers with the toolkit (the full CUDA toolkit has them), or, with the compiler from PyPI "
        f"(tl_aot[build]), `pip install {package}` (its headers join the compiler's include folder)"
    )


def _arch_feature_hint(e: FailedProcessError, arch) -> str:
    """Why TileLang's code needs an arch-specific target, when its templates say so (sm_120: TileLang warp-specializes pipelines).

    TileLang pipelines a TMA kernel with warp specialization and register reconfiguration
    (``setmaxnreg``), which only arch-specific targets have (``sm_90a``, ``sm_100a``, ``sm_120a``,
    or a family ``f`` target): its templates refuse a plain ``sm_90`` / ``sm_120`` with a static assertion.
    """
    if "requires a target with CTA register reconfiguration" not in e.stderr + e.stdout or arch.suffix:
        return ""
    specific = f"{arch.major}{arch.minor}a"
    return (
        f"\n  TileLang warp-specialized this kernel with register reconfiguration (setmaxnreg), which {arch.sm} lacks and "
        f"sm_{specific} has: build --arch {specific} (its images run on compute capability {arch.major}.{arch.minor} only), "
        "or keep the arch and turn warp specialization off (--pass-config tl.disable_warp_specialized=true)"
    )


def _crash_of(e: FailedProcessError, work: Path) -> str:
    """For a tool that died of a signal on a nearly full disk: what happened, in words ("" otherwise).

    cicc and ptxas crash (SIGSEGV, SIGBUS) rather than report a failed write when the disk fills
    under them; the CUDA code is not at fault then, and saying so would send the user the wrong way.
    """
    sig = tool_signal(e.returncode)
    if sig is None or sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL, signal.SIGHUP):
        return ""
    disk = disk_full_note(work, tempfile.gettempdir())
    tool = Path(e.cmd[0]).name if e.cmd else "the tool"
    if disk:
        return f"{tool} died of {sig.name} with the {disk}; free some space and build again"
    return ""


def _cutedsl(variant: LoweredVariant, arch, work: Path) -> bytes:
    """The cubin CuTeDSL compiles from the variant's generated module; every launch's kernel pattern matched once in it."""
    image, module = compile_cubin(variant, arch, work)
    match_kernels(variant.kernels, image, entry=variant.entry, arch=arch.sm)
    shutil.rmtree(module.parent, ignore_errors=True)
    return image
