"""The one table of an entry's keys: how a spec file, setup.py, the CLI and CMake each spell them.

A spec file's ``[[entry]]`` and a ``TileLangExtension`` entry dict take the same keys, mapped the
same way onto :meth:`tl_aot.spec.KernelSpec.create`; the CLI and ``add_tilelang_kernel()`` spell the
keys a command line can carry (tests check the CMake module and the CLI against this table).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EntryKey", "ENTRY_TABLE", "ENTRY_KEYS", "create_keywords", "entry_options"]


@dataclass(frozen=True)
class EntryKey:
    """One key of an entry and its spelling in each front end."""

    key: str  # in a spec file's [[entry]] and a TileLangExtension entry dict
    keyword: str  # the KernelSpec.create keyword it gives
    cli: str = ""  # the `python -m tl_aot build` spelling for FILE.py:FUNCTION ("": spec files and setup.py only)
    cmake: str = ""  # the add_tilelang_kernel() keyword ("": give it in a SPEC file)
    library_wide: bool = False  # also a [library] default, and the CLI / CMake value overrides a spec file's entries


ENTRY_TABLE = (
    EntryKey("name", "name", "--entry", "ENTRY"),
    EntryKey("source", "source", "FILE.py:FUNCTION", "SOURCE"),
    EntryKey("function", "function", "FILE.py:FUNCTION", "FUNCTION"),
    EntryKey("args", "args", "--arg", "ARGS"),
    EntryKey("factory_args", "factory_args", "--factory-arg", "FACTORY_ARGS"),
    EntryKey("jit_args", "jit_args", "--jit-arg", "JIT_ARGS"),
    EntryKey("select", "select", "--select", "SELECT"),
    EntryKey("imports", "imports", "--import", "IMPORTS"),
    EntryKey("archs", "archs", "--arch", "ARCHS", library_wide=True),
    EntryKey("pass_configs", "pass_configs", "--pass-config", "PASS_CONFIGS"),
    EntryKey("compile_flags", "compile_flags", "--nvcc-flag", "NVCC_FLAGS"),
    EntryKey("device", "device", "--device", "DEVICE", library_wide=True),
    EntryKey("out_idx", "out_idx", "--out-idx", "OUT_IDX"),
    EntryKey("backend", "backend", "--backend", "BACKEND"),
    # Lists of tables: a command line has no spelling for them.
    EntryKey("tune", "tune"),
    EntryKey("specialisations", "specialisations"),
    EntryKey("specializations", "specialisations"),
)

#: Keys of a spec file's ``[[entry]]`` and of a ``TileLangExtension`` entry dict.
ENTRY_KEYS = tuple(k.key for k in ENTRY_TABLE)


def create_keywords(entry: dict) -> dict:
    """The :meth:`~tl_aot.spec.KernelSpec.create` keywords an entry table gives (of two spellings, the first in the table wins)."""
    out: dict = {}
    for k in ENTRY_TABLE:
        if k.key in entry:
            out.setdefault(k.keyword, entry[k.key])
    return out


def entry_options() -> tuple:
    """The CLI options that set one entry's key (``--arg``, ...): with ``--spec`` the file sets them per entry."""
    return tuple(k.cli for k in ENTRY_TABLE if k.cli.startswith("--") and not k.library_wide)
