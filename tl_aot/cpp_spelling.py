"""Spelling values in generated C++: string literals, comments, DLPack dtypes, booleans, image symbols.

Names and text from the user's code reach the generated C++ only through these (text: :mod:`tl_aot.escaping`).
"""

from __future__ import annotations

from .escaping import c_comment, c_string_body

__all__ = ["DLPACK_DTYPES", "c_comment", "c_string_body", "cpp_bool", "image_symbol"]

#: TileLang dtype -> accepted DLPack (code, bits) pairs (lanes are always 1).
DLPACK_DTYPES = {
    "float16": [(2, 16)],
    "bfloat16": [(4, 16)],
    "float32": [(2, 32)],
    "float64": [(2, 64)],
    "int8": [(0, 8)],
    "int16": [(0, 16)],
    "int32": [(0, 32)],
    "int64": [(0, 64)],
    "uint8": [(1, 8)],
    "uint16": [(1, 16)],
    "uint32": [(1, 32)],
    "uint64": [(1, 64)],
    "bool": [(6, 8), (1, 8)],
    "float8_e4m3": [(10, 8), (8, 8)],
    "float8_e4m3fn": [(10, 8), (8, 8)],
    "float8_e5m2": [(12, 8)],
    "float8_e8m0fnu": [(14, 8)],
}


def image_symbol(entry: str, arch: str, ptx: bool) -> str:
    """Name of the embedded image of ``entry`` for ``arch`` (``__tvm_ffi__cubin_<this>``)."""
    return f"{entry}__{arch}{'_ptx' if ptx else ''}"


def cpp_bool(value: bool) -> str:
    """``true`` or ``false``."""
    return "true" if value else "false"
