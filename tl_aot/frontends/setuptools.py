"""setuptools front end: ship TileLang kernels, compiled ahead of time, inside a package's wheel.

In ``setup.py``::

    from setuptools import setup
    from tl_aot.frontends.setuptools import TileLangExtension, bdist_wheel, build_ext

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

``build_ext`` hands each :class:`TileLangExtension` to :func:`tl_aot.pipeline.library.build_library`, the one
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
PyPI: :mod:`tl_aot.cuda.cuda_toolkit`) and ``CXX`` (host compiler).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from sysconfig import get_platform
from typing import Any

from setuptools.command.build_ext import build_ext as _build_ext
from setuptools.errors import OptionError

from ..codegen.render import TORCH_GLUE_MODULE, render_loader
from ..common.errors import TlAotError
from ..common.fileutil import write_if_different
from ..config.arch_choice import Given, parse_given
from ..pipeline.image_packs import ImagePacks
from ..pipeline.library import build_library
from ..tune.tuning_record import TuningRecord, apply_record
from ..wheel.wheel_check import WheelCheckError, check_claim, check_folder
from .setuptools_extension import TileLangDeclarationError, TileLangExtension, TileLangExtensionError
from .setuptools_files import (
    GLUE,
    companion_of,
    copy_if_different,
    packs_of,
    place_companion,
    place_together,
    remove_stale_glue,
    remove_stale_packs,
)

try:
    from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
except ImportError:  # setuptools < 70.1 keeps it in the wheel package
    from wheel.bdist_wheel import bdist_wheel as _bdist_wheel

__all__ = ["TileLangExtension", "TileLangExtensionError", "TileLangDeclarationError", "build_ext", "bdist_wheel"]

#: Progress lines and warnings go through setuptools' logging (shown by default, hidden by -q).
log = logging.getLogger("tl_aot.frontends.setuptools")


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

    extensions: list[Any]  # setuptools' own attribute, typed here (setuptools is not type-checked)

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
                self.archs = parse_given(Given("--archs", self.archs))
            except TlAotError as e:
                raise OptionError(str(e)) from None

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
                    "cmdclass={'build_ext': build_ext, 'bdist_wheel': bdist_wheel} from tl_aot.frontends.setuptools "
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
        """Build ``ext`` with :func:`tl_aot.pipeline.library.build_library` in build_temp, then place library and loader."""
        fullname = self.get_ext_fullname(ext.name)
        library = Path(self.get_ext_fullpath(ext.name))
        loader = library.with_name(ext.loader_filename)
        if self.dry_run:
            log.info(f"would build TileLang extension {fullname} into {library}")
            return
        out_dir = Path(self.build_temp) / "tl_aot" / fullname
        jobs = self.parallel if type(self.parallel) is int and self.parallel > 0 else None  # else MAX_JOBS / CPUs
        try:
            spec = ext.library_spec(archs=self.archs, log=log.info)
            if ext.tune_file:
                spec = apply_record(spec, TuningRecord.load(ext.tune_file), where=ext.tune_file)
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
                image_packs=self._image_packs(ext),
                cluster=self.cluster,  # None: TL_AOT_CLUSTER
                cache_url=self.cache_url,  # None: TL_AOT_CACHE_URL
            )
        except TlAotError as e:
            msg = f"building TileLang extension {fullname!r} failed:\n{e}"
            raise TileLangExtensionError(msg) from e
        glue = loader.with_name(TORCH_GLUE_MODULE)
        loader_text = render_loader(result.manifest, module=fullname, library_file=library.name, torch_ops=ext.torch_ops)
        files = [(library, result.library, "library"), (loader, loader_text.encode(), "loader")]
        files += [(glue / name, source, "torch glue") for name, source in GLUE.items()]
        packs = packs_of(result.library)
        files += [(library.with_name(p.name), p, "image pack") for p in packs]
        try:
            remove_stale_packs(library, {p.name for p in packs})
            place_together(files, result.torch_companion)
            remove_stale_glue(loader.parent)
        except TlAotError as e:
            msg = f"building TileLang extension {fullname!r} failed:\n{e}"
            raise TileLangExtensionError(msg) from e

    def _image_packs(self, ext: TileLangExtension) -> ImagePacks | None:
        """With ``image_packs=True``: packs whose missing-pack message names this distribution's arch wheels.

        ``python -m tl_aot split-wheel`` makes those wheels, named ``<dist>-<tag>`` (``tl-demo-sm90a``), same version.
        """
        if not ext.image_packs:
            return None
        dist = re.sub(r"[-_.]+", "-", self.distribution.get_name()).lower()
        return ImagePacks(hint=f"pip install '{dist}-{{tag}}=={self.distribution.get_version()}'")

    def get_ext_filename(self, fullname: str) -> str:
        """``pkg/lib_kernels.so`` for a TileLang extension (no Python ABI suffix: it is not a CPython module)."""
        ext = self.ext_map.get(fullname)
        if _is_tilelang(ext):
            return os.path.join(*fullname.split(".")[:-1], ext.library_filename)
        return super().get_ext_filename(fullname)

    def _loader_files(self):
        """(in build_lib, in the source package) paths of each TileLang extension's loader and torch glue."""
        build_py = self.get_finalized_command("build_py")
        seen = set()
        for ext in self._tilelang_extensions():
            inplace_lib, regular_lib = self._get_inplace_equivalent(build_py, ext)
            for name in (ext.loader_filename, *(os.path.join(TORCH_GLUE_MODULE, glue) for glue in GLUE)):
                pair = (os.path.join(os.path.dirname(regular_lib), name), os.path.join(os.path.dirname(inplace_lib), name))
                if pair not in seen:  # extensions of one package share the glue module
                    seen.add(pair)
                    yield pair

    def get_outputs(self) -> list[str]:
        outputs = super().get_outputs()
        if self.inplace:
            return outputs  # the output mapping already lists the loaders
        companions = [str(c) for c in (companion_of(Path(o)) for o in outputs if o.endswith(".so")) if c is not None]
        packs = [str(p) for o in outputs if o.endswith(".so") for p in packs_of(Path(o))]
        return sorted({*outputs, *companions, *packs, *(regular for regular, _ in self._loader_files())})

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
            copy_if_different(Path(regular_lib), Path(inplace_lib))
            place_companion(companion_of(Path(regular_lib)), Path(inplace_lib))
            packs = packs_of(Path(regular_lib))
            remove_stale_packs(Path(inplace_lib), {p.name for p in packs})
            for pack in packs:
                copy_if_different(pack, Path(inplace_lib).with_name(pack.name))
        for regular, inplace in self._loader_files():
            if os.path.exists(regular):
                write_if_different(inplace, Path(regular).read_text())
                remove_stale_glue(Path(inplace).parent)


class bdist_wheel(_bdist_wheel):
    """``bdist_wheel`` that tags a wheel whose only compiled parts are tl_aot libraries ``py3-none-manylinux_X_Y_<arch>``.

    The libraries link no libpython and hold no CPython module, so one wheel serves every Python 3
    on the platform; the platform tag is the oldest manylinux tag their symbol versions fit
    (:mod:`tl_aot.wheel.wheel_check`), so PyPI takes the wheel with no repair step. A ``--plat-name`` the
    libraries exceed is refused, naming the symbol; a vendored libtvm_ffi.so is refused. A project
    that also has ordinary C extensions keeps setuptools' own tag.
    """

    _tl_aot_platform = None

    def get_tag(self) -> tuple[str, str, str]:
        impl, abi, plat = super().get_tag()
        if not _only_tilelang(self.distribution):
            return impl, abi, plat
        if self._tl_aot_platform is None and self.bdist_dir and os.path.isdir(self.bdist_dir):
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
