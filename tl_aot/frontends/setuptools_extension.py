"""``TileLangExtension``: a setup.py's declaration of a library of TileLang kernels, checked once where it is written.

Each entry is made by :func:`tl_aot.config.kernel_spec.entry_specs` (a dict) or given as a
:class:`~tl_aot.config.kernel_spec.KernelSpec`, arch-free unless it names its own archs; the build binds
the archs :func:`tl_aot.config.arch_choice.resolve_archs` chooses (``build_ext --archs`` >
``TL_AOT_ARCHS`` > the entry's > the extension's > the default archs).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from setuptools import Extension
from setuptools.errors import CompileError, SetupError

from ..capture.record_specs import specs_from_record, specs_from_records
from ..common.errors import SpecError, TlAotError
from ..common.keycheck import expect_str_list
from ..config.arch_choice import Given, env_archs, parse_given, resolve_archs
from ..config.kernel_spec import KernelSpec, LibrarySpec, entry_specs
from ..config.spec_names import check_library_name
from ..config.user_code import local_dependencies
from ..cuda.toolchain import default_archs

__all__ = ["TileLangExtension", "TileLangExtensionError", "TileLangDeclarationError"]


class TileLangExtensionError(TlAotError, CompileError):
    """A TileLang extension failed to build; setuptools prints it as ``error: ...`` without a traceback."""


class TileLangDeclarationError(SpecError, SetupError, SystemExit):
    """A ``TileLangExtension(...)`` declared wrongly in setup.py: ``error: ...`` and exit status 1, no traceback.

    It is raised while setup.py builds the arguments of ``setup()``, before setuptools can catch
    anything; as a :class:`SystemExit` whose code is ``error: <message>`` it ends setup.py the way
    setuptools ends it for its own bad arguments, and code that catches :class:`SpecError` (or
    setuptools' :class:`~setuptools.errors.SetupError`) still catches it.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.code = f"error: {message}"


class TileLangExtension(Extension):
    """A library of TileLang kernels that ``build_ext`` compiles ahead of time into a package.

    Parameters
    ----------
    name : str
        Dotted module name of the generated loader, e.g. ``"tl_gemm._kernels"``: the package gets
        ``tl_gemm/_kernels.py`` (import it) and ``tl_gemm/lib_kernels.so`` (the library).
    entries : list of dict or KernelSpec
        One dict per exported function, with the keys of a spec file's ``[[entry]]``
        (:data:`tl_aot.config.entry_keys.ENTRY_KEYS`): ``name``, ``source`` (kernel file, relative to
        setup.py), ``function``, and optional ``args`` (specialisation arguments), ``factory_args``,
        ``jit_args``, ``select``, ``imports``, ``archs``, ``pass_configs``, ``compile_flags``,
        ``device``, ``out_idx``, ``tune`` and ``specialisations``; or a :class:`~tl_aot.spec.KernelSpec`.
    archs : list of str, optional
        Target archs of entries without their own (``"90a"``, ``"sm_80"``, ``"80+PTX"``).
        ``TL_AOT_ARCHS`` and ``build_ext --archs`` override every arch; with none given, every
        default arch from sm_80 up that this nvcc supports (:func:`tl_aot.cuda.toolchain.default_archs`).
    optional : bool
        As for any ``Extension``: a failed build warns instead of stopping ``setup()``.
    tune_file : str, optional
        A tuning record (``python -m tl_aot tune``), relative to setup.py: entries it has a config
        for, on the archs it has, are built with that config (no GPU needed here).
    capture : list of str, optional
        Capture records (``python -m tl_aot capture``), relative to setup.py: every kernel they hold
        becomes an entry too (failed variants are left out and listed), for ``tl_aot.serve``.
    torch_ops : bool or str
        Register the entries as torch operators (``torch.ops.<namespace>.<entry>``) when the
        loader is imported and torch is installed; a string names the namespace (default: the
        package's name). Without it, ``register_torch_ops()`` on the loader does the same on request.
        With it, the build also ships ``lib<name>_torch.so`` beside the library: native C++ kernels
        for the ops over the LibTorch Stable ABI (built against the build environment's torch
        headers, loaded by any torch >= 2.10; older torch falls back to the Python registration).

    Kernel files and the local modules they import are recorded as ``depends``, so an sdist
    carries them without a MANIFEST.in.

    """

    def __init__(
        self,
        name: str,
        entries=(),
        *,
        archs=None,
        optional: bool = False,
        torch_ops: bool | str = False,
        tune_file=None,
        capture=(),
        image_packs: bool = False,
        **kwargs,
    ) -> None:
        try:
            if not isinstance(image_packs, bool):
                msg = f"TileLangExtension({name!r}): image_packs must be True or False, got {image_packs!r}"
                raise SpecError(msg)  # noqa: TRY301 (one conversion to the declaration error below)
            self.image_packs = image_packs
            options = {"archs": archs, "optional": optional, "torch_ops": torch_ops, "tune_file": tune_file, "capture": capture}
            self._declare(name, entries, **options, **kwargs)
        except SpecError as e:
            raise TileLangDeclarationError(str(e)) from None

    def _declare(self, name, entries, *, archs, optional, torch_ops, tune_file, capture, **kwargs) -> None:
        """Check the declaration and set the extension up (``__init__``'s work; its errors become ``error: ...``)."""
        where = f"TileLangExtension({name!r})"
        if kwargs:
            msg = (
                f"{where}: unsupported argument(s) {', '.join(sorted(kwargs))}; "
                "a TileLang extension takes entries=, capture=, archs=, optional=, torch_ops=, tune_file= and image_packs= "
                "(kernels are built by tl_aot, not the C compiler)"
            )
            raise SpecError(msg)
        parts = str(name).split(".")
        if not all(p.isidentifier() for p in parts):
            msg = f"{where}: expected a dotted module name such as 'mypkg._kernels'"
            raise SpecError(msg)
        check_library_name(parts[-1], f"{where}: library name")
        specs = tuple(s for e in (entries or ()) for s in _declared(e, where))
        if isinstance(capture, (str, os.PathLike)):
            capture = [capture]
        if not isinstance(capture, (list, tuple)) or not all(isinstance(c, (str, os.PathLike)) for c in capture):
            expect_str_list(capture, "capture", where, '["ops.capture.json"]')
        self.capture = tuple(os.fspath(c) for c in capture or ())
        if not specs and not self.capture:
            msg = f"{where}: no entries (and no capture records)"
            raise SpecError(msg)
        if specs:
            try:  # names reserved by the loaders, or listed twice: refused here, not at build time
                LibrarySpec(name=parts[-1], entries=specs)
            except SpecError as e:
                msg = f"{where}: {e}"
                raise SpecError(msg) from None
        if not isinstance(torch_ops, (bool, str)) or (isinstance(torch_ops, str) and not torch_ops.isidentifier()):
            msg = f"{where}: torch_ops must be True/False or a namespace identifier, got {torch_ops!r}"
            raise SpecError(msg)
        self.entries = specs
        self.torch_ops = torch_ops
        self.tune_file = os.fspath(tune_file) if tune_file else None
        self.archs = parse_given(Given(where, archs)) if archs else ()
        super().__init__(name, sources=[], depends=[*_kernel_files(specs), *self.capture], optional=optional)

    @property
    def library_name(self) -> str:
        """``_kernels``: the last part of the module name, also the library's name in its manifest."""
        return self.name.rpartition(".")[2]

    @property
    def library_filename(self) -> str:
        """``lib_kernels.so``."""
        return f"lib{self.library_name}.so"

    @property
    def loader_filename(self) -> str:
        """``_kernels.py``."""
        return f"{self.library_name}.py"

    def library_spec(self, *, archs=None, log=None) -> LibrarySpec:
        """The :class:`LibrarySpec` to build, each entry bound to its archs.

        ``archs`` (``build_ext --archs``) beats ``TL_AOT_ARCHS`` (``log`` is told when it decides),
        which beats the entry's archs, then the extension's, then the default archs.
        """
        override = resolve_archs(Given("build_ext --archs", archs), env_archs(), log=log)
        first = Given(override.origin, override.archs)
        declared = Given(f"TileLangExtension({self.name!r})", self.archs)
        default = functools.cache(default_archs)  # asks nvcc: once, and only when an entry needs it
        entries = []
        for spec in self.entries:
            if not spec.capture and not Path(spec.source).is_file():
                msg = (
                    f"entry {spec.name!r}: kernel source {spec.source} does not exist "
                    f"(relative paths are taken from the folder of setup.py: {Path.cwd()})"
                )
                raise SpecError(msg)
            own = Given(f"entry {spec.name!r}", spec.archs)
            entries.append(spec.for_archs(resolve_archs(first, declared=(own, declared), default=default).archs))
        archs = resolve_archs(first, declared=declared, default=default).archs if self.capture else ()
        entries.extend(specs_from_records(specs_from_record(record, archs) for record in self.capture))
        return LibrarySpec(name=self.library_name, entries=tuple(entries))


def _declared(raw, where: str) -> tuple[KernelSpec, ...]:
    """The KernelSpec(s) of one ``entries=[...]`` item: a dict with the keys of a spec file's ``[[entry]]``, or a KernelSpec."""
    if isinstance(raw, KernelSpec):
        if raw.export or raw.capture or raw.when or raw.fallback:
            msg = (
                f"{where}: KernelSpec {raw.name!r} is one specialisation or a captured kernel; give its entry as a dict "
                "(specialisations=[...]) or the extension's capture=[...]"
            )
            raise SpecError(msg)
        return (raw,)
    if not isinstance(raw, dict):
        msg = f"{where}: each entry must be a dict with name, source, function (and optional args, archs), got {type(raw).__name__}"
        raise SpecError(msg)
    return entry_specs(raw, where)


def _kernel_files(specs) -> list[str]:
    """Kernel sources and the local modules they import, relative to the project when inside it (for sdists)."""
    root = Path.cwd().resolve()
    files: dict[str, None] = {}
    for src, imports in dict.fromkeys((Path(s.source), s.imports) for s in specs):  # specialisations share one
        paths = [src]
        if src.is_file():
            paths += local_dependencies(src, imports)
        for p in paths:
            try:
                files[Path(p).resolve().relative_to(root).as_posix()] = None
            except ValueError:
                files[os.fspath(p)] = None
    return list(files)
