"""setuptools front end: ship TileLang kernels, compiled ahead of time, inside a package's wheel.

In ``setup.py``::

    from setuptools import setup
    from tl_aot.setuptools import TileLangExtension, bdist_wheel, build_ext

    setup(
        ext_modules=[
            TileLangExtension(
                "tl_gemm._kernels",
                entries=[{"name": "gemm_fp16", "source": "kernels/gemm.py", "function": "matmul",
                          "args": {"M": 4096, "N": 4096, "K": 4096}}],
                archs=["90a", "80"],
            )
        ],
        cmdclass={"build_ext": build_ext, "bdist_wheel": bdist_wheel},
    )

``build_ext`` hands each :class:`TileLangExtension` to :func:`tl_aot.build.build_library`, the one
pipeline every front end calls (lowering, nvcc, launcher, cache, progress lines and summary all
live there), and places two files in the package (``build_ext --inplace``, ``pip wheel``,
``pip install``, ``python -m build`` alike):

* ``lib_kernels.so``: the library. It is deliberately not ``_kernels.so``, which Python's import
  system would take for a CPython extension module and fail to import.
* ``_kernels.py``: a generated loader needing only ``tvm_ffi``, so the package's ``__init__.py``
  loads its kernels with ``from ._kernels import *`` and the installed package depends on
  apache-tvm-ffi alone (not on tl_aot, TileLang or torch).

Ordinary ``Extension`` objects in the same ``setup()`` build as usual. :class:`bdist_wheel` tags a
wheel whose only compiled parts are tl_aot libraries ``py3-none-manylinux_X_Y_<arch>`` (they are not
CPython extensions, so one wheel serves every Python 3; the manylinux tag is the oldest their
symbol versions fit, so PyPI takes the wheel as built).

Environment variables: ``TL_AOT_ARCHS`` (``"90a;80"``: overrides ``archs=``), ``MAX_JOBS``
(concurrent build jobs when ``-j`` is not given), ``TL_AOT_CACHE_DIR`` (variant cache shared between
builds), ``TL_AOT_CLUSTER`` (a Dask scheduler whose workers lower and compile the variants),
``TL_AOT_CACHE_URL`` (a variant cache shared between machines, an fsspec URL), ``TL_AOT_NVCC`` /
``CUDA_HOME`` (the CUDA compiler; else nvcc on PATH, else the one ``tl_aot[build]`` installed from
PyPI: :mod:`tl_aot.cuda_toolkit`) and ``CXX`` (host compiler).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from setuptools import Extension
from setuptools.command.build_ext import build_ext as _build_ext
from setuptools.errors import CompileError, OptionError, SetupError

from .arch import parse_arch_list
from .entry_keys import ENTRY_KEYS, create_keywords
from .errors import SpecError, TlAotError
from .fileutil import atomic_write
from .keycheck import check_keys, expect_str, expect_str_list, expect_table
from .spec import (
    RESERVED_ENTRY_NAMES,
    KernelSpec,
    LibrarySpec,
    archs_at,
    archs_from_env,
    check_identifier,
    check_library_name,
    check_out_idx,
)

try:
    from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
except ImportError:  # setuptools < 70.1 keeps it in the wheel package
    from wheel.bdist_wheel import bdist_wheel as _bdist_wheel

__all__ = ["TileLangExtension", "TileLangExtensionError", "TileLangDeclarationError", "build_ext", "bdist_wheel"]

#: Progress lines and warnings go through setuptools' logging (shown by default, hidden by -q).
log = logging.getLogger("tl_aot.setuptools")

#: Names the generated loader module (and tl_aot.load's Library) define besides the entries.
_LOADER_NAMES = RESERVED_ENTRY_NAMES


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


@dataclass(frozen=True)
class EntryDecl:
    """One entry as declared in setup.py: a dict with the keys of a spec file's ``[[entry]]``, or a KernelSpec.

    Every key but the name, source and archs is kept as the :meth:`KernelSpec.create` keyword it
    gives (:mod:`tl_aot.entry_keys`), so a key an entry accepts is never dropped here. Archs are
    resolved at build time (env, ``--archs``, the extension's, defaults).
    """

    name: str
    source: str
    archs: tuple = ()  # Arch; empty: the extension's archs
    keywords: tuple = ()  # (KernelSpec.create keyword, value) of every other key declared

    @property
    def imports(self) -> tuple:
        """Modules imported before the kernel file (their local files ship in the sdist too)."""
        return tuple(dict(self.keywords).get("imports") or ())

    def spec(self, source: Path, archs: tuple):
        """The KernelSpec (a tuple of them for specialisations) of this entry, built from ``source`` for ``archs``."""
        return KernelSpec.create(**{**dict(self.keywords), "name": self.name, "source": source, "archs": archs})


def _entry_decl(raw, ext_name: str) -> EntryDecl:
    """Validate one ``entries=[...]`` item (a dict with the keys of a spec file's ``[[entry]]``, or a KernelSpec)."""
    where = f"TileLangExtension({ext_name!r})"
    if isinstance(raw, KernelSpec):
        return _decl_of_spec(raw, where)
    if not isinstance(raw, dict):
        msg = f"{where}: each entry must be a dict with name, source, function (and optional args, archs), got {type(raw).__name__}"
        raise SpecError(msg)
    missing = [k for k in ("name", "source", "function") if k not in raw]
    if missing:
        msg = f"{where}: entry {raw.get('name', '?')!r} misses key(s) {', '.join(missing)}"
        raise SpecError(msg)
    check_keys(raw, ENTRY_KEYS, f"{where}: entry {raw['name']!r}")
    name = check_identifier(raw["name"], f"{where}: entry name")
    if not isinstance(raw["source"], (str, os.PathLike)):
        expect_str(raw["source"], "source", f"{where}: entry {name!r}", '"kernels/gemm.py"')
    if name in _LOADER_NAMES:
        hint = name.strip("_") + "_kernel"
        msg = f"{where}: entry name {name!r} is reserved by tl_aot (the loaders define it); rename the entry, e.g. {hint!r}"
        raise SpecError(msg)
    args = raw.get("args") or {}
    if not isinstance(args, dict):
        msg = f"{where}: entry {name!r}: args must be a dict of specialisation arguments, got {type(args).__name__}"
        raise SpecError(msg)
    for key in ("factory_args", "jit_args"):
        _pairs(raw.get(key), name, key, where)
    _specialisations(raw, name, where)
    check_out_idx(raw.get("out_idx"), name)
    given = create_keywords(raw)
    flags = expect_str_list(given.get("compile_flags") or (), "compile_flags", f"{where}: entry {name!r}", '["-lineinfo"]')
    expect_table(given.get("pass_configs") or {}, "pass_configs", f"{where}: entry {name!r}", '{"tl.disable_tma_lower": True}')
    given.update(function=str(raw["function"]), args=args, compile_flags=flags)
    return EntryDecl(
        name=name,
        source=os.fspath(raw["source"]),
        archs=archs_at(raw["archs"], f"{where}: entry {name!r}") if raw.get("archs") else (),
        keywords=tuple((k, v) for k, v in given.items() if k not in ("name", "source", "archs")),
    )


def _decl_of_spec(spec: KernelSpec, where: str) -> EntryDecl:
    """A KernelSpec given in setup.py, with every key an entry declares (none dropped)."""
    if spec.export or spec.capture or spec.when or spec.fallback:
        msg = (
            f"{where}: KernelSpec {spec.name!r} is one specialisation or a captured kernel; give its entry as a dict "
            "(specialisations=[...]) or the extension's capture=[...]"
        )
        raise SpecError(msg)
    given = spec.keywords()
    keywords = tuple((k, v) for k, v in given.items() if k not in ("name", "source", "archs"))
    return EntryDecl(name=spec.name, source=str(spec.source), archs=spec.archs, keywords=keywords)


def _pairs(value, name: str, key: str, where: str) -> tuple:
    """An arguments dict (``factory_args``, ``jit_args``) as pairs, refused when it is not a dict."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        msg = f"{where}: entry {name!r}: {key} must be a dict of arguments, got {type(value).__name__}"
        raise SpecError(msg)
    return tuple(value.items())


def _specialisations(raw: dict, name: str, where: str) -> tuple | None:
    """The entry's specialisations (either spelling), checked to be a list of dicts."""
    items = raw.get("specialisations", raw.get("specializations"))
    if items is None:
        return None
    if not isinstance(items, (list, tuple)) or not all(isinstance(i, dict) for i in items):
        msg = f"{where}: entry {name!r}: specialisations must be a list of dicts with args, when, fallback"
        raise SpecError(msg)
    return tuple(items)


class TileLangExtension(Extension):
    """A library of TileLang kernels that ``build_ext`` compiles ahead of time into a package.

    Parameters
    ----------
    name : str
        Dotted module name of the generated loader, e.g. ``"tl_gemm._kernels"``: the package gets
        ``tl_gemm/_kernels.py`` (import it) and ``tl_gemm/lib_kernels.so`` (the library).
    entries : list of dict or KernelSpec
        One dict per exported function, with the keys of a spec file's ``[[entry]]``
        (:data:`tl_aot.entry_keys.ENTRY_KEYS`): ``name``, ``source`` (kernel file, relative to
        setup.py), ``function``, and optional ``args`` (specialisation arguments), ``factory_args``,
        ``jit_args``, ``select``, ``imports``, ``archs``, ``pass_configs``, ``compile_flags``,
        ``device``, ``out_idx``, ``tune`` and ``specialisations``; or a :class:`~tl_aot.spec.KernelSpec`.
    archs : list of str, optional
        Target archs of entries without their own (``"90a"``, ``"sm_80"``, ``"80+PTX"``).
        ``TL_AOT_ARCHS`` and ``build_ext --archs`` override every arch; with none given, every
        default arch from sm_80 up that this nvcc supports (:func:`tl_aot.toolchain.default_archs`).
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
        **kwargs,
    ) -> None:
        try:
            options = {"archs": archs, "optional": optional, "torch_ops": torch_ops, "tune_file": tune_file, "capture": capture}
            self._declare(name, entries, **options, **kwargs)
        except SpecError as e:
            raise TileLangDeclarationError(str(e)) from None

    def _declare(self, name, entries, *, archs, optional, torch_ops, tune_file, capture, **kwargs) -> None:
        """Check the declaration and set the extension up (``__init__``'s work; its errors become ``error: ...``)."""
        if kwargs:
            msg = (
                f"TileLangExtension({name!r}): unsupported argument(s) {', '.join(sorted(kwargs))}; "
                "a TileLang extension takes entries=, capture=, archs=, optional=, torch_ops= and tune_file= "
                "(kernels are built by tl_aot, not the C compiler)"
            )
            raise SpecError(msg)
        parts = str(name).split(".")
        if not all(p.isidentifier() for p in parts):
            msg = f"TileLangExtension({name!r}): expected a dotted module name such as 'mypkg._kernels'"
            raise SpecError(msg)
        check_library_name(parts[-1], f"TileLangExtension({name!r}): library name")
        decls = tuple(_entry_decl(e, name) for e in (entries or ()))
        if isinstance(capture, (str, os.PathLike)):
            capture = [capture]
        if not isinstance(capture, (list, tuple)) or not all(isinstance(c, (str, os.PathLike)) for c in capture):
            expect_str_list(capture, "capture", f"TileLangExtension({name!r})", '["ops.capture.json"]')
        self.capture = tuple(os.fspath(c) for c in capture or ())
        if not decls and not self.capture:
            msg = f"TileLangExtension({name!r}): no entries (and no capture records)"
            raise SpecError(msg)
        seen = set()
        for d in decls:
            if d.name in seen:
                msg = f"TileLangExtension({name!r}): entry {d.name!r} is listed twice"
                raise SpecError(msg)
            seen.add(d.name)
        if not isinstance(torch_ops, (bool, str)) or (isinstance(torch_ops, str) and not torch_ops.isidentifier()):
            msg = f"TileLangExtension({name!r}): torch_ops must be True/False or a namespace identifier, got {torch_ops!r}"
            raise SpecError(msg)
        self.entries = decls
        self.torch_ops = torch_ops
        self.tune_file = os.fspath(tune_file) if tune_file else None
        self.archs = archs_at(archs, f"TileLangExtension({name!r})") if archs else ()
        super().__init__(name, sources=[], depends=[*_kernel_files(decls), *self.capture], optional=optional)

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

    def library_spec(self, *, archs=None) -> LibrarySpec:
        """The :class:`LibrarySpec` to build: ``archs`` (an override) beats the entry's, then the extension's, then the defaults."""
        default = None
        entries = []
        for d in self.entries:
            use = archs or d.archs or self.archs
            if not use:
                if default is None:
                    from .toolchain import default_archs

                    default = default_archs()
                use = default
            source = Path(d.source)
            if not source.is_file():
                msg = (
                    f"entry {d.name!r}: kernel source {d.source} does not exist "
                    f"(relative paths are taken from the folder of setup.py: {Path.cwd()})"
                )
                raise SpecError(msg)
            made = d.spec(source, tuple(use))
            entries.extend(made if isinstance(made, tuple) else (made,))
        for record in self.capture:
            from .captured import specs_from_record

            use = archs or self.archs
            if not use:
                from .toolchain import default_archs

                use = default or default_archs()
            entries.extend(specs_from_record(record, tuple(use)))
        return LibrarySpec(name=self.library_name, entries=tuple(entries))


def _kernel_files(decls) -> list[str]:
    """Kernel sources and the local modules they import, relative to the project when inside it (for sdists)."""
    from .source import local_dependencies

    root = Path.cwd().resolve()
    files: dict[str, None] = {}
    for d in decls:
        src = Path(d.source)
        paths = [src]
        if src.is_file():
            paths += local_dependencies(src, d.imports)
        for p in paths:
            try:
                files[Path(p).resolve().relative_to(root).as_posix()] = None
            except ValueError:
                files[os.fspath(p)] = None
    return list(files)


def _is_tilelang(ext) -> bool:
    return isinstance(ext, TileLangExtension)


def _only_tilelang(dist) -> bool:
    """True when every compiled part of ``dist`` is a tl_aot library (no CPython extension or C library)."""
    exts = list(dist.ext_modules or [])
    return bool(exts) and all(_is_tilelang(e) for e in exts) and not dist.has_c_libraries()


_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _requires(dist, project: str) -> bool:
    """Whether ``dist`` declares a run-time dependency on ``project`` (names compared normalised)."""
    want = re.sub(r"[-_.]+", "-", project).lower()
    for req in dist.install_requires or []:
        m = _REQ_NAME.match(str(req))
        if m and re.sub(r"[-_.]+", "-", m.group(1)).lower() == want:
            return True
    return False


def _copy_if_different(src: Path, dst: Path) -> bool:
    """Put ``src`` at ``dst`` in one atomic step (a process using the old library never sees half a file).

    Unchanged content is left alone so its timestamp stays; returns True when ``dst`` was written.
    """
    data = src.read_bytes()
    try:
        if dst.read_bytes() == data:
            return False
    except OSError:
        pass
    atomic_write(dst, data, mode=0o755)
    return True


class build_ext(_build_ext):
    """setuptools' ``build_ext`` that also builds :class:`TileLangExtension` through tl_aot's pipeline.

    Options it adds or gives a meaning to for TileLang extensions:

    * ``-j N`` / ``--parallel N`` (build_ext's own option): concurrent jobs (lowering, the launcher
      and nvcc compiles share them); without it, ``MAX_JOBS`` or the CPU count (at most 8).
    * ``--archs "90a;80"``: target archs of every TileLang entry (beats ``TL_AOT_ARCHS`` and setup.py).
    * ``-f`` / ``--force``: rebuild every kernel, ignoring the variant cache.
    * ``--cluster ADDRESS``: lower and compile each variant on a Dask cluster's workers (beats
      ``TL_AOT_CLUSTER``); ``--cache-url URL``: a shared variant cache (beats ``TL_AOT_CACHE_URL``).

    TileLang extensions are built one after another (TileLang lowering is not thread safe; the
    launcher and nvcc compile in parallel inside each), before the ordinary extensions.
    """

    user_options = [
        *_build_ext.user_options,
        ("archs=", None, "CUDA archs of TileLang kernels, e.g. '90a;80' (overrides TL_AOT_ARCHS and setup.py)"),
        ("cluster=", None, "Dask scheduler whose workers lower and compile TileLang variants (overrides TL_AOT_CLUSTER)"),
        ("cache-url=", None, "variant cache shared between machines, an fsspec URL (overrides TL_AOT_CACHE_URL)"),
    ]

    def initialize_options(self) -> None:
        super().initialize_options()
        self.archs = None
        self.cluster = None
        self.cache_url = None

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is not None and self.parallel is not True and int(self.parallel) < 0:
            msg = f"--parallel must be a positive number of jobs, got {self.parallel}"
            raise OptionError(msg)
        if self.archs:
            try:
                self.archs = parse_arch_list(self.archs)
            except SpecError as e:
                msg = f"--archs: {e}"
                raise OptionError(msg) from None

    def _tilelang_extensions(self) -> list:
        return [e for e in self.extensions if _is_tilelang(e)]

    def run(self) -> None:
        if self._tilelang_extensions():
            self._check_supported()
            self._warn_about_packaging()
        super().run()

    def _check_supported(self) -> None:
        """Refuse builds tl_aot cannot do, before anything is compiled."""
        if not sys.platform.startswith("linux"):
            msg = f"TileLang extensions build on Linux only (this is {sys.platform})"
            raise OptionError(msg)
        from sysconfig import get_platform

        if self.plat_name and self.plat_name != get_platform():
            msg = f"TileLang extensions cannot be cross-compiled: --plat-name {self.plat_name} differs from this machine's {get_platform()}"
            raise OptionError(msg)

    def _warn_about_packaging(self) -> None:
        dist = self.distribution
        if not _requires(dist, "apache-tvm-ffi"):
            log.warning(
                "warning: TileLang extensions need apache-tvm-ffi at run time, but the project does not "
                "depend on it: add 'apache-tvm-ffi' to its dependencies (install_requires)"
            )
        if "bdist_wheel" in (dist.commands or []) and _only_tilelang(dist):
            cls = dist.cmdclass.get("bdist_wheel")
            if not (isinstance(cls, type) and issubclass(cls, bdist_wheel)):
                log.warning(
                    "warning: the wheel will be tagged for this Python only; pass "
                    "cmdclass={'build_ext': build_ext, 'bdist_wheel': bdist_wheel} from tl_aot.setuptools "
                    "for one py3-none-<platform> wheel"
                )

    def build_extensions(self) -> None:
        self.check_extensions_list(self.extensions)
        tilelang = self._tilelang_extensions()
        for ext in tilelang:
            with self._filter_build_errors(ext):
                self._build_tilelang(ext)
        others = [e for e in self.extensions if not _is_tilelang(e)]
        if others:
            everything, self.extensions = self.extensions, others
            try:
                super().build_extensions()
            finally:
                self.extensions = everything

    def build_extension(self, ext) -> None:
        if _is_tilelang(ext):
            self._build_tilelang(ext)
        else:
            super().build_extension(ext)

    def _build_tilelang(self, ext: TileLangExtension) -> None:
        """Build ``ext`` with :func:`tl_aot.build.build_library` in build_temp, then place library and loader."""
        from .build import build_library
        from .codegen import TORCH_GLUE_MODULE, render_loader

        fullname = self.get_ext_fullname(ext.name)
        library = Path(self.get_ext_fullpath(ext.name))
        loader = library.with_name(ext.loader_filename)
        if self.dry_run:
            log.info(f"would build TileLang extension {fullname} into {library}")
            return
        out_dir = Path(self.build_temp) / "tl_aot" / fullname
        jobs = self.parallel if type(self.parallel) is int and self.parallel > 0 else None  # else MAX_JOBS / CPUs
        try:
            env_archs = None if self.archs else archs_from_env(None)
            if env_archs:
                log.info(f"archs {', '.join(str(a) for a in env_archs)} from TL_AOT_ARCHS (no build_ext --archs given)")
            spec = ext.library_spec(archs=self.archs or env_archs)
            if ext.tune_file:
                from .record import Record, apply_record

                spec = apply_record(spec, Record.load(ext.tune_file), where=ext.tune_file)
            log.info(f"building TileLang extension {fullname} ({len(spec.entries)} entries)")
            keep_going = any(e.capture for e in spec.entries)  # a record's kernels that fail are left out, listed
            result = build_library(
                spec,
                out_dir=out_dir,
                jobs=jobs,
                log=log.info,
                force=bool(self.force),
                keep_going=keep_going,
                torch_ops=bool(ext.torch_ops),
                cluster=self.cluster,  # None: TL_AOT_CLUSTER
                cache_url=self.cache_url,  # None: TL_AOT_CACHE_URL
            )
        except TlAotError as e:
            msg = f"building TileLang extension {fullname!r} failed:\n{e}"
            raise TileLangExtensionError(msg) from e
        glue = loader.with_name(TORCH_GLUE_MODULE + ".py")
        loader_text = render_loader(result.manifest, module=fullname, library_file=library.name, torch_ops=ext.torch_ops)
        try:
            _place_together(
                [(library, result.library, "library"), (loader, loader_text.encode(), "loader"), (glue, _GLUE.read_bytes(), "torch glue")],
                result.torch_companion,
            )
        except TlAotError as e:
            msg = f"building TileLang extension {fullname!r} failed:\n{e}"
            raise TileLangExtensionError(msg) from e

    def get_ext_filename(self, fullname: str) -> str:
        """``pkg/lib_kernels.so`` for a TileLang extension (no Python ABI suffix: it is not a CPython module)."""
        ext = self.ext_map.get(fullname)
        if _is_tilelang(ext):
            return os.path.join(*fullname.split(".")[:-1], ext.library_filename)
        return super().get_ext_filename(fullname)

    def _loader_files(self):
        """(in build_lib, in the source package) paths of each TileLang extension's loader and torch glue."""
        from .codegen import TORCH_GLUE_MODULE

        build_py = self.get_finalized_command("build_py")
        seen = set()
        for ext in self._tilelang_extensions():
            inplace_lib, regular_lib = self._get_inplace_equivalent(build_py, ext)
            for name in (ext.loader_filename, TORCH_GLUE_MODULE + ".py"):
                pair = (os.path.join(os.path.dirname(regular_lib), name), os.path.join(os.path.dirname(inplace_lib), name))
                if pair not in seen:  # extensions of one package share the glue module
                    seen.add(pair)
                    yield pair

    def get_outputs(self) -> list[str]:
        outputs = super().get_outputs()
        if self.inplace:
            return outputs  # the output mapping already lists the loaders
        companions = [str(c) for c in (_companion_of(Path(o)) for o in outputs if o.endswith(".so")) if c is not None]
        return sorted({*outputs, *companions, *(regular for regular, _ in self._loader_files())})

    def _get_output_mapping(self):
        yield from super()._get_output_mapping()
        if self.inplace:
            yield from self._loader_files()

    def copy_extensions_to_source(self) -> None:
        """``--inplace``: ordinary extensions as setuptools does; tl_aot libraries and loaders atomically."""
        everything = self.extensions
        self.extensions = [e for e in everything if not _is_tilelang(e)]
        try:
            if self.extensions:
                super().copy_extensions_to_source()
        finally:
            self.extensions = everything
        build_py = self.get_finalized_command("build_py")
        for ext in self._tilelang_extensions():
            inplace_lib, regular_lib = self._get_inplace_equivalent(build_py, ext)
            if not os.path.exists(regular_lib) and ext.optional:
                continue
            _copy_if_different(Path(regular_lib), Path(inplace_lib))
            _place_companion(_companion_of(Path(regular_lib)), Path(inplace_lib))
        for regular, inplace in self._loader_files():
            if os.path.exists(regular):
                from .fileutil import write_if_different

                write_if_different(inplace, Path(regular).read_text())


def _companion_of(library: Path) -> Path | None:
    """The native torch companion beside ``library`` (``lib<name>_torch.so``), if one was built."""
    p = library.with_name(library.name.removesuffix(".so") + "_torch.so")
    return p if p.is_file() else None


#: The torch glue module shipped beside every loader.
_GLUE = Path(__file__).parent / "torch_ops.py"


def _place_together(files: list, companion: Path | None) -> None:
    """Put each ``(destination, bytes or a file to copy, role)`` in place, all or none (the first is the library).

    Files that already hold the content are left alone (their timestamps stay); the rest are
    written beside their destinations and swapped in together, so a fault (a full disk, a read-only
    build folder) leaves the library and its loader as they were: never a new library with an old
    loader. A stale torch companion goes first when the library has none.
    """
    from .destinations import StagedFiles, filesystem_errors

    library = files[0][0]
    dest = library.with_name(library.name.removesuffix(".so") + "_torch.so")
    if companion is None and os.path.lexists(dest):
        with filesystem_errors("remove the stale torch companion", dest):
            dest.unlink()
    if companion is not None:
        files = [*files, (dest, companion, "torch companion")]
    staged = StagedFiles()
    for path, content, role in files:
        data = content.read_bytes() if isinstance(content, Path) else content
        try:
            same = path.read_bytes() == data
        except OSError:
            same = False
        if not same:
            with filesystem_errors(f"create the folder of the {role}", path.parent):
                path.parent.mkdir(parents=True, exist_ok=True)
            staged.stage(path, data=data, role=role, mode=0o755 if path.suffix == ".so" else 0o644)
            log.info(f"writing {path}")
    staged.publish()


def _place_companion(companion: Path | None, library: Path) -> None:
    """Ship ``companion`` beside ``library``, where the loader looks for it (none: remove a stale one)."""
    dest = library.with_name(library.name.removesuffix(".so") + "_torch.so")
    if companion is None:
        if os.path.lexists(dest):
            dest.unlink()
    elif _copy_if_different(companion, dest):
        log.info(f"copying {companion} -> {dest.parent}")


class bdist_wheel(_bdist_wheel):
    """``bdist_wheel`` that tags a wheel whose only compiled parts are tl_aot libraries ``py3-none-manylinux_X_Y_<arch>``.

    The libraries link no libpython and hold no CPython module, so one wheel serves every Python 3
    on the platform; the platform tag is the oldest manylinux tag their symbol versions fit
    (:mod:`tl_aot.wheel_check`), so PyPI takes the wheel with no repair step. A ``--plat-name`` the
    libraries exceed is refused, naming the symbol; a vendored libtvm_ffi.so is refused. A project
    that also has ordinary C extensions keeps setuptools' own tag.
    """

    _tl_aot_platform = None

    def get_tag(self) -> tuple[str, str, str]:
        impl, abi, plat = super().get_tag()
        if not _only_tilelang(self.distribution):
            return impl, abi, plat
        if self._tl_aot_platform is None and self.bdist_dir and os.path.isdir(self.bdist_dir):
            from .wheel_check import WheelCheckError, check_claim, check_folder

            try:
                report = check_folder(self.bdist_dir)
                if self.plat_name_supplied:
                    check_claim(report, plat)
            except WheelCheckError as e:
                raise TileLangExtensionError(str(e)) from None
            if report.libraries:  # staged: decide once (get_tag is asked again for the WHEEL file)
                keep = self.plat_name_supplied or not plat.startswith("linux_") or report.platform is None
                self._tl_aot_platform = plat if keep else report.platform
                log.info("tl_aot: wheel platform tag %s (%s)", self._tl_aot_platform, report.summary().splitlines()[0])
        return "py3", "none", self._tl_aot_platform or plat
