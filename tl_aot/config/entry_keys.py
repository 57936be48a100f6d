"""The one table of an entry's keys: how a spec file, setup.py, the CLI and CMake each spell them.

A spec file's ``[[entry]]`` and a ``TileLangExtension`` entry dict take the same keys, mapped the
same way onto :meth:`tl_aot.spec.KernelSpec.create`; the CLI and ``add_tilelang_kernel()`` spell the
keys a command line can carry (tests check the CMake module and the CLI against this table).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["EntryKey", "ENTRY_TABLE", "ENTRY_KEYS", "create_keywords", "entry_options"]


@dataclass(frozen=True)
class EntryKey:
    """One key of an entry and its spelling in each front end."""

    key: str  # in a spec file's [[entry]] and a TileLangExtension entry dict
    keyword: str  # the KernelSpec.create keyword it gives
    cli: str = ""  # the `python -m tl_aot build` spelling for FILE.py:FUNCTION ("": spec files and setup.py only)
    cmake: str = ""  # the add_tilelang_kernel() keyword ("": give it in a SPEC file)
    library_wide: bool = False  # also a [library] default, and the CLI / CMake value overrides a spec file's entries
    doc: str = ""  # what it is, for people (docs/reference/entry-keys.md is generated from this table)


ENTRY_TABLE = (
    EntryKey(
        "name",
        "name",
        "--entry",
        "ENTRY",
        doc="The exported function's name (a C identifier); with FILE.py:FUNCTION, `--name` names the library and the entry.",
    ),
    EntryKey(
        "source", "source", "FILE.py:FUNCTION", "SOURCE", doc="The kernel file: relative to the spec file, setup.py or CMakeLists.txt."
    ),
    EntryKey(
        "function",
        "function",
        "FILE.py:FUNCTION",
        "FUNCTION",
        doc=(
            "The function in it: a factory returning a `T.prim_func`, a `@tilelang.jit` function, or a `T.prim_func`; "
            "`Class.method` for a `@staticmethod` or `@classmethod` of a class in the file (the entry named `method` by default)."
        ),
    ),
    EntryKey(
        "args",
        "args",
        "--arg",
        "ARGS",
        doc=(
            "Arguments of the call, each given to whichever level takes that name: literals, bare words (strings) or expressions "
            "(`torch.float16`)."
        ),
    ),
    EntryKey(
        "factory_args",
        "factory_args",
        "--factory-arg",
        "FACTORY_ARGS",
        doc="Arguments for the named function only (a name both levels of a two-level factory take).",
    ),
    EntryKey("jit_args", "jit_args", "--jit-arg", "JIT_ARGS", doc="Arguments for the `@tilelang.jit` function it returns only."),
    EntryKey(
        "select",
        "select",
        "--select",
        "SELECT",
        doc="The kernel to build when the function gives several (a tuple, list or dict): a key or index.",
    ),
    EntryKey(
        "imports", "imports", "--import", "IMPORTS", doc="Modules imported before the kernel file (a registry filled by importing them)."
    ),
    EntryKey(
        "archs",
        "archs",
        "--arch",
        "ARCHS",
        library_wide=True,
        doc="Target archs: `sm_90a`, `90a`, `9.0a`, `80+PTX`. Default: `TL_AOT_ARCHS`, else every arch from sm_80 this compiler supports.",
    ),
    EntryKey(
        "pass_configs",
        "pass_configs",
        "--pass-config",
        "PASS_CONFIGS",
        doc="TileLang pass configs, overriding the kernel's own key by key.",
    ),
    EntryKey(
        "compile_flags",
        "compile_flags",
        "--nvcc-flag",
        "NVCC_FLAGS",
        doc=(
            "Extra nvcc flags for the images, appended to the kernel's own; relative `-I` / `-include` paths are from the "
            "build's working folder."
        ),
    ),
    EntryKey(
        "device",
        "device",
        "--device",
        "DEVICE",
        library_wide=True,
        doc="The GPU device queries made while lowering describe (`H100-PCIe`); default per arch (H100-SXM for sm_90a).",
    ),
    EntryKey(
        "out_idx",
        "out_idx",
        "--out-idx",
        "OUT_IDX",
        doc=(
            "Parameters the entry allocates and returns (index, negative from the end, or name), like "
            "`@tilelang.jit(out_idx=...)`; `none` for none."
        ),
    ),
    EntryKey(
        "backend",
        "backend",
        "--backend",
        "BACKEND",
        doc="`cuda` (CUDA C++ through nvcc) or `cutedsl` (TileLang's CuTeDSL backend; needs `tl_aot[cutedsl]`).",
    ),
    # Lists of tables: a command line has no spelling for them.
    EntryKey("tune", "tune", doc="Candidate configs for `python -m tl_aot tune` (a list of argument tables), for a plain factory."),
    EntryKey(
        "specialisations",
        "specialisations",
        doc=(
            "Argument sets of one function, each with optional `when` ranges of dynamic dims and `fallback`: one exported "
            "function picks among them."
        ),
    ),
    EntryKey("specializations", "specialisations"),
)

#: Keys of a spec file's ``[[entry]]`` and of a ``TileLangExtension`` entry dict.
ENTRY_KEYS = tuple(k.key for k in ENTRY_TABLE)


def create_keywords(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The :meth:`~tl_aot.spec.KernelSpec.create` keywords an entry table gives (of two spellings, the first in the table wins)."""
    out: dict[str, Any] = {}
    for k in ENTRY_TABLE:
        if k.key in entry:
            out.setdefault(k.keyword, entry[k.key])
    return out


def entry_options() -> tuple[str, ...]:
    """The CLI options that set one entry's key (``--arg``, ...): with ``--spec`` the file sets them per entry."""
    return tuple(k.cli for k in ENTRY_TABLE if k.cli.startswith("--") and not k.library_wide)
