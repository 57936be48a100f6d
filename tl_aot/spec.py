"""The spec wing's public names: entries (:class:`KernelSpec`), libraries (:class:`LibrarySpec`) and spec files.

Specs come from the CLI (``kernels.py:matmul --arg M=4096``), a TOML/JSON spec file listing
several entries, ``TileLangExtension`` in setup.py, or CMake's ``add_tilelang_kernel``. The model
lives in :mod:`tl_aot.config.kernel_spec`, names in :mod:`tl_aot.config.spec_names`, spec files in
:mod:`tl_aot.config.spec_file`, command-line spellings in :mod:`tl_aot.config.arg_text`; this module gathers them
under the one import path users know (``from tl_aot.spec import KernelSpec, load_spec_file``).
"""

from __future__ import annotations

from .config.arg_text import parse_arg, parse_pass_config, parse_target
from .config.kernel_spec import BACKENDS, CaptureSource, KernelSpec, LibrarySpec, check_backend, check_out_idx, entry_specs
from .config.spec_file import LIBRARY_KEYS, TOP_KEYS, archs_at, archs_from_env, load_spec_file
from .config.spec_names import (
    CPP_RESERVED,
    DEPENDENCY_LIBRARIES,
    RESERVED_ENTRY_NAMES,
    RESERVED_EXPORTS,
    check_entry_name,
    check_identifier,
    check_library_name,
    cpp_name,
)

__all__ = [
    "BACKENDS",
    "CPP_RESERVED",
    "DEPENDENCY_LIBRARIES",
    "LIBRARY_KEYS",
    "RESERVED_ENTRY_NAMES",
    "RESERVED_EXPORTS",
    "TOP_KEYS",
    "CaptureSource",
    "KernelSpec",
    "LibrarySpec",
    "archs_at",
    "archs_from_env",
    "check_backend",
    "check_entry_name",
    "check_identifier",
    "check_library_name",
    "check_out_idx",
    "cpp_name",
    "entry_specs",
    "load_spec_file",
    "parse_arg",
    "parse_pass_config",
    "parse_target",
]
