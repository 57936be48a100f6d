"""The assembly source that embeds a library's images: one ``.incbin`` per image, assembled once.

Each image (a cubin, a fatbin, or with image packs its reference) becomes the bytes between two
symbols in ``.rodata``, laid out as tvm-ffi's ``embed_cubin`` lays one out (``ld -r -b binary``,
its section renamed to ``.rodata``): ``__tvm_ffi__cubin_<name>`` at the first byte and
``__tvm_ffi__cubin_<name>_end`` just past the last, no alignment, no type, size 0. The generated
launcher declares ``extern "C" const char __tvm_ffi__cubin_<name>[]`` for each. The symbols are
global in the object (the launcher is another object) and hidden, so the library keeps them local:
nothing is exported, as with ``embed_cubin``'s localized symbols.

Why one file: embedding the images one at a time (``ld -r`` and ``objcopy`` per image, each
copying the object built so far) costs the square of their number; one assembler run reads each
image once.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from typing import Union

from ..common.escaping import asm_string, c_comment

__all__ = ["IMAGE_PREFIX", "ImageSource", "image_assembly"]

#: What every embedded image's symbol starts with (the launcher's ``extern`` declarations).
IMAGE_PREFIX = "__tvm_ffi__cubin_"

_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


#: Where an image's bytes are: the file the assembler reads and the image's bytes (the whole file), or also
#: the offset of the image in that file (one file holding many small images: image packs' references).
ImageSource = Union[tuple[Union[str, "os.PathLike[str]"], bytes], tuple[Union[str, "os.PathLike[str]"], bytes, int]]


def image_assembly(images: Mapping[str, ImageSource], *, header: str) -> str:
    """GNU assembler source embedding ``images`` (image symbol -> (file the assembler reads, its bytes[, its offset there])).

    The file is named as the assembler will open it (relative to where it runs, or absolute; any
    characters); the bytes only label it, by size and SHA-256 in a comment, so the source changes
    whenever an image does. With an offset, the image is the ``len(bytes)`` bytes of the file from
    there (``.incbin file, offset, size``): thousands of references read from one file, not one file each.
    Images are laid out sorted by symbol: the same images give the same
    source, whatever order they came in. ``header``: the first comment line (what generated it).
    """
    lines = [f"# {c_comment(header)}", "\t.section .rodata"]
    for name in sorted(images):
        if not _SYMBOL.match(name):
            msg = f"image symbol {name!r} is not a C identifier"
            raise ValueError(msg)
        path, data, *at = images[name]
        where = f"{asm_string(path)}, {at[0]}, {len(data)}" if at else asm_string(path)
        start = IMAGE_PREFIX + name
        end = start + "_end"
        lines += [
            f"# {name}: {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}",
            f"\t.globl {start}",
            f"\t.hidden {start}",
            f"\t.globl {end}",
            f"\t.hidden {end}",
            f"{start}:",
            f"\t.incbin {where}",
            f"{end}:",
        ]
    lines.append('\t.section .note.GNU-stack,"",%progbits')  # no executable stack
    return "\n".join(lines) + "\n"
