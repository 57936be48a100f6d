"""Names a library or an entry may take: identifiers that stay valid as Python attributes, C++ and file names."""

from __future__ import annotations

import keyword
import re

from ..common.cpp_spelling import CPP_RESERVED, cpp_macros, cpp_name, cpp_reserved
from ..common.errors import SpecError

__all__ = [
    "CPP_RESERVED",
    "DEPENDENCY_LIBRARIES",
    "RESERVED_ENTRY_NAMES",
    "RESERVED_EXPORTS",
    "check_entry_name",
    "check_identifier",
    "check_library_name",
    "cpp_name",
]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Names the library exports itself; an entry may not take them.
RESERVED_EXPORTS = frozenset(
    {
        "cleanup_module",
        "tl_aot_manifest",
        "tl_aot_manifest_index",
        "tl_aot_manifest_part",
        "tl_aot_prepare",
        "tl_aot_driver_check",
        "tl_aot_check_images",
    }
)
#: Names an entry may not take: the exports above, what :func:`tl_aot.load`'s Library defines
#: (``lib.cleanup``), what a wheel's generated loader module defines, and its torch helper module.
RESERVED_ENTRY_NAMES = RESERVED_EXPORTS | frozenset(
    """cleanup prepare path manifest index entries signature specialisations tunings register_torch_ops torch_companion
    check_images records_parsed
    LIBRARY_PATH
    _tl_aot_torch""".split()
)
#: Libraries a tl_aot library loads by file name (``lib<name>.so``): a library named after one would shadow it.
DEPENDENCY_LIBRARIES = frozenset("tvm_ffi tvm_ffi_testing cuda cudart nvrtc c m dl pthread rt gcc_s stdc util resolv".split())


def check_identifier(name: str, what: str) -> str:
    """Return ``name`` if it can name an entry or a parameter, else raise a clear :class:`SpecError`.

    Any Python identifier TileLang accepts is allowed, C++ keywords included (``new``, ``this``):
    generated C++ never spells a user name bare. Python keywords and ``__`` names are refused for
    entries, which become attributes of the generated Python loader.
    """
    if not isinstance(name, str) or not _IDENT.match(name):
        msg = f"{what} {name!r} is not a valid identifier: use letters, digits and '_' (not starting with a digit)"
        suggestion = _identifier_like(name)
        if suggestion:  # my.copy, my-copy, 2d: names a TOML key or a file name takes, respelled
            msg += f", e.g. {suggestion!r}"
        raise SpecError(msg)
    if name.startswith("__") or keyword.iskeyword(name):
        msg = f"{what} {name!r} is reserved in Python; choose another name"
        raise SpecError(msg)
    if len(name) > 120:
        msg = f"{what} {name!r} is {len(name)} characters long, more than the 120 a name may have (it names files and symbols)"
        raise SpecError(msg)
    return name


def _identifier_like(name: object) -> str:
    """``name`` with each character an identifier cannot hold replaced by ``_`` (``my-copy`` -> ``my_copy``), or ``""``."""
    if not isinstance(name, str) or not name.isascii() or not name.strip():
        return ""
    spelled = re.sub(r"[^A-Za-z0-9_]", "_", name.strip())
    if spelled[0].isdigit():
        spelled = "k" + spelled
    return spelled if _IDENT.match(spelled) and not spelled.startswith("__") and not keyword.iskeyword(spelled) else ""


def check_library_name(name: str, what: str = "library name") -> str:
    """A library name is also a C++ namespace (``tl_aot::<name>``) and a file name (``lib<name>.so``).

    C++ keywords and macros (it would not compile) and the file names of the libraries it loads
    (``tvm_ffi``: the dynamic loader would find it instead of theirs) are refused.
    """
    check_identifier(name, what)
    if cpp_reserved(name):
        kind = "a C/C++ macro of the headers the generated code includes" if name in cpp_macros() else "reserved in C++"
        msg = f"{what} {name!r} is {kind} (it names the C++ API's namespace); choose another name, e.g. {name.lower() + '_kernels'!r}"
        raise SpecError(msg)
    if name in DEPENDENCY_LIBRARIES or re.fullmatch(r"python\d*", name):
        msg = (
            f"{what} {name!r} would make lib{name}.so, the file name of a library tl_aot's libraries load: "
            f"the loader would find one in place of the other; choose another name, e.g. {name + '_kernels'!r}"
        )
        raise SpecError(msg)
    return name


def check_entry_name(name: str, library: str) -> str:
    """An entry's (exported) name must not be one tl_aot's loaders define for themselves."""
    if name in RESERVED_ENTRY_NAMES:
        msg = (
            f"library {library!r}: entry name {name!r} is reserved by tl_aot (the loaders define it: lib.{name}, "
            f"or the library exports it); rename the entry, e.g. {name.strip('_') + '_kernel'!r}"
        )
        raise SpecError(msg)
    return name
