"""The library a command line names: ``FILE.py:FUNCTION`` with ``--arg ...``, ``--spec FILE`` or ``--capture RECORD``.

The command line's archs are chosen by :func:`tl_aot.config.arch_choice.resolve_archs` (``--arch`` beats
``TL_AOT_ARCHS`` beats a spec file's, else the default archs); the entry itself is made and checked
by :meth:`tl_aot.config.kernel_spec.KernelSpec.create`, as every front end's is.
"""

from __future__ import annotations

from ..capture.record_specs import specs_from_record, specs_from_records, with_captures
from ..common.arch import Arch
from ..common.errors import SpecError, TlAotError
from ..config.arch_choice import Given, env_archs, resolve_archs
from ..config.arg_text import parse_arg, parse_pass_config, parse_target
from ..config.entry_keys import entry_options
from ..config.function_path import function_leaf
from ..config.kernel_spec import KernelSpec, LibrarySpec
from ..config.spec_file import load_spec_file
from ..cuda.toolchain import default_archs

__all__ = ["entry_of", "library_of", "log_of"]

#: Options whose argparse dest is not their name.
_DESTS = {"--import": "imports"}


def log_of(args):
    """The progress log of a command (None with --quiet)."""
    return None if getattr(args, "quiet", False) else (lambda s: print(s, flush=True))


def library_of(args, what: str) -> LibrarySpec:
    """The LibrarySpec the command line names (FILE.py:FUNCTION with --arg ..., --spec, or --capture)."""
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
        return with_captures(load_spec_file(args.spec, archs=args.arch, name=args.name, device=args.device, log=log_of(args)))
    spec = entry_of(args, None)
    return LibrarySpec(name=args.name or function_leaf(parse_target(args.target)[1]), entries=(spec.for_archs(_archs(args, spec)),))


def entry_of(args, archs, spell=str) -> KernelSpec:
    """The entry ``FILE.py:FUNCTION`` and its options declare, for ``archs`` (None: arch-free).

    ``spell`` names an option in errors (CMake names its keyword: ``ARGS item``, not ``--arg``).
    """
    source, func = parse_target(args.target)
    spec = KernelSpec.create(
        name=args.entry or args.name or function_leaf(func),
        source=source,
        function=func,
        args=dict(parse_arg(a, spell("--arg")) for a in args.arg),
        archs=archs,
        pass_configs=dict(parse_pass_config(a, spell("--pass-config")) for a in args.pass_config),
        compile_flags=args.nvcc_flag,
        device=args.device,
        out_idx=_out_idx(args.out_idx),
        factory_args=dict(parse_arg(a, spell("--factory-arg")) for a in args.factory_arg),
        jit_args=dict(parse_arg(a, spell("--jit-arg")) for a in args.jit_arg),
        select=args.select,
        imports=args.imports or None,
        backend=args.backend,
    )
    assert isinstance(spec, KernelSpec)  # no specialisations: one spec
    return spec


def _archs(args, spec: KernelSpec | None = None) -> tuple[Arch, ...]:
    """``--arch``, else ``TL_AOT_ARCHS`` (said so in the log), else the default archs this nvcc supports.

    A wrong arch is refused naming where it came from and, for ``FILE.py:FUNCTION``, the entry it
    was for (``entry 'add_one' (kernels.py): --arch: unsupported arch name 'sm_91x' ...``).
    """
    try:
        return resolve_archs(Given("--arch", args.arch), env_archs(), default=default_archs, log=log_of(args)).archs
    except SpecError as e:
        if spec is None:
            raise
        msg = f"entry {spec.name!r} ({spec.source}): {e}"
        raise SpecError(msg, **{**e.fields(), "entry": spec.name}) from None


def _out_idx(values: list[str] | None) -> tuple[int | str, ...] | None:
    """``--out-idx`` values: ints or names; a lone ``none`` means the entry has no outputs."""
    if values is None:
        return None
    if values == ["none"]:
        return ()
    return tuple(int(v) if v.lstrip("-").isdigit() else v for v in values)


def _captured_library(args) -> LibrarySpec:
    """The LibrarySpec of ``build --capture RECORD...``: one entry per recorded kernel."""
    if args.target or args.spec:
        msg = "build: --capture builds the kernels a record holds; give no FILE.py:FUNCTION or --spec with it"
        raise TlAotError(msg)
    archs = _archs(args)
    entries = specs_from_records(specs_from_record(record, archs, device=args.device or "") for record in args.capture)
    if not entries:
        msg = f"build: {', '.join(args.capture)} holds no kernel tl_aot can build"
        raise TlAotError(msg)
    return LibrarySpec(name=args.name or "captured", entries=tuple(entries))
