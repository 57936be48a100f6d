"""Sub-byte tensor dtypes (``int4``, ``uint4``, ``float4_e2m1fn``, ``float6_*``): how a caller passes them.

No framework has a 4-bit tensor, so TileLang's JIT takes such a parameter packed. TileLang 0.1.15's
host code (``MakePackedAPI``'s binder, read from ``tilelang.lower(...).host_mod``) checks a
sub-byte tensor ``int4[M, N]`` this way, and tl_aot's launcher checks it the same way:

- the DLPack dtype's code is not checked, only its size: ``bits * lanes`` times the element count
  must equal the logical tensor's bits (``4 * M * N``);
- every dim but the last equals the logical one; the last holds ``pack`` logical elements per
  storage element (``8 // bits``: 2 for 4-bit types, so ``int8[M, N / 2]``); a dynamic last dim
  binds as ``n = shape[-1] * pack``;
- the last stride is the logical one (1), every other stride times ``pack`` is the logical one;
- the kernel receives the storage's data pointer.

With 4-bit types that means any 8-bit storage: ``torch.int8``, ``torch.uint8`` or
``torch.float4_e2m1fn_x2`` (whose DLPack dtype is 4 bits x 2 lanes). 6-bit floats (``8 // 6 == 1``)
take the logical shape in a 6-bit DLPack dtype, which torch does not have. An output TileLang's
JIT allocates is ``storage`` with the last dim divided by ``pack`` (``int4`` -> ``torch.int8``);
one without a storage dtype is refused while lowering, as TileLang refuses it.

Nothing here imports TileLang or torch: the runtime's loader reads it with the metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

__all__ = ["Packing", "SUBBYTE_DTYPES", "packing_of", "storage_dim", "storage_spelled"]


@dataclass(frozen=True)
class Packing:
    """How one sub-byte dtype is passed: the storage it is packed in, as TileLang's host code binds it."""

    dtype: str  # the TileLang dtype: int4
    bits: int  # bits of one logical element: 4
    pack: int  # logical elements per storage element along the last dim: 2 (8 // bits)
    storage_bits: int  # bits x lanes of the caller's DLPack dtype: 8
    storage: str  # the dtype TileLang's JIT allocates an output as (a torch dtype name); "" when it cannot
    storage_dlpack: tuple[int, int, int] = (0, 0, 0)  # that dtype's DLPack (code, bits, lanes)

    @property
    def storage_text(self) -> str:
        """``int8``, or ``6-bit`` for a storage no torch dtype names: what errors and ``inspect`` call it."""
        return self.storage or f"{self.storage_bits}-bit"


def _packing(dtype: str, bits: int, storage: str = "", storage_dlpack: tuple[int, int, int] = (0, 0, 0)) -> Packing:
    pack = max(1, 8 // bits)
    return Packing(dtype, bits, pack, bits * pack, storage, storage_dlpack)


#: The sub-byte dtypes TileLang 0.1.15 lowers tensor parameters of for CUDA, and their storage.
#: (int2/uint2/int1/uint1 fail in TileLang's own codegen: "Need to load/store by multiple of bytes".)
SUBBYTE_DTYPES: dict[str, Packing] = {
    p.dtype: p
    for p in (
        _packing("int4", 4, "int8", (0, 8, 1)),
        _packing("uint4", 4, "uint8", (1, 8, 1)),
        _packing("float4_e2m1fn", 4, "float4_e2m1fn_x2", (17, 4, 2)),
        _packing("float6_e2m3fn", 6),
        _packing("float6_e3m2fn", 6),
    )
}


def packing_of(dtype: str) -> Packing | None:
    """The packing of a sub-byte tensor dtype; None for a dtype of whole bytes."""
    return SUBBYTE_DTYPES.get(dtype)


def storage_dim(dim: Union[int, str], pack: int) -> Union[int, str]:
    """The storage's last dim for a logical last dim: ``256`` -> ``128``, ``n`` -> ``n / 2``, ``n * 2`` -> ``n`` (pack 2)."""
    if pack == 1:
        return dim
    if isinstance(dim, int):
        return dim // pack
    text = str(dim)
    if text.endswith(f" * {pack}") and text[: -len(f" * {pack}")].isidentifier():  # n * 2 -> n
        return text[: -len(f" * {pack}")]
    return f"{text} / {pack}" if text.isidentifier() else f"({text}) / {pack}"


def storage_spelled(p: Packing, shape: tuple[Union[int, str], ...]) -> str:
    """``int8[64, 64]``: the tensor a caller passes for a ``p.dtype`` tensor of ``shape``."""
    dims = list(shape[:-1]) + [storage_dim(shape[-1], p.pack)] if shape else []
    return f"{p.storage_text}[{', '.join(str(d) for d in dims)}]"
