"""Digests of the device code TileLang generates: the proof that a kernel built from a record is the one the JIT ran.

A capture stores, per recorded kernel and arch, the SHA-256 of the CUDA source TileLang generated
for it (the JIT kernel's source on a GPU run; TileLang's lowering of the *original* prim_func on
a ``--device`` run). A build from the record lowers the stored IR and compares the digest of
TileLang's source, before tl_aot's own edits (:mod:`tl_aot.lower.cuda_source`), for that arch; a
difference is refused, naming the kernel, unless the recorded digest is that of the same source
with the uses of its same-named shared-memory aliases permuted (:mod:`tl_aot.capture.alias_order`:
which offset each gets, and their order at one offset, are TileLang's process's), which is then the
source shipped. ``verify`` compares the digests
a library carries.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..common.errors import LoweringError
from ..common.json_types import JsonMapping
from .alias_order import alias_orders, order_count

if TYPE_CHECKING:
    from ..jit.seam import CompileRequest

__all__ = [
    "digest",
    "jit_kernel_code",
    "jit_target",
    "spell_target",
    "recorded",
    "check_against_record",
    "ProvenSource",
    "lower",
    "lowered_code",
    "arch_of_cc",
]


def digest(source: str) -> str:
    """The digest of a device source (SHA-256 of its text, 24 hex digits)."""
    return hashlib.sha256(source.encode()).hexdigest()[:24]


def jit_kernel_code(kernel: Any) -> tuple[str, str] | None:
    """(arch, digest) of a kernel TileLang's JIT compiled (``sm_90a``, ...); None when it is not one."""
    try:
        source = getattr(kernel, "kernel_source", None)
        if not isinstance(source, str) or not source:
            source = kernel.get_kernel_source()
        target = kernel.target
        arch = str(target.attrs["arch"]) if "arch" in target.attrs else ""
    except Exception:  # noqa: BLE001 (not a JIT kernel, or one without a CUDA source)
        return None
    if not arch or not isinstance(source, str) or not source:
        return None
    return arch, digest(source)


def jit_target(kernel: Any) -> str:
    """The target a JIT kernel was lowered for, spelled with every attribute ('' when unknown).

    Recorded beside the digest: a GPU's JIT may carry attributes a build's target lacks, and a
    digest mismatch names both targets.
    """
    try:
        return spell_target(kernel.target)
    except Exception:  # noqa: BLE001 (not a JIT kernel)
        return ""


def spell_target(target: Any) -> str:
    """A target's attributes as sorted JSON, its host left out (the device code does not depend on it)."""
    import json

    exported = target.export() if hasattr(target, "export") else {}

    def plain(v: Any) -> Any:
        if isinstance(v, (str, int, float, bool)) or v is None:
            return v
        return [plain(x) for x in v] if hasattr(v, "__iter__") and not hasattr(v, "items") else str(v)

    return json.dumps({str(k): plain(v) for k, v in dict(exported).items() if k != "host"}, sort_keys=True)


def lower(func: Any, target: Any, pass_configs: Mapping[Any, Any]) -> Any:
    """TileLang's lowering of ``func`` for ``target`` under ``pass_configs``: the one call the build and the capture share."""
    import tilelang
    from tilelang import tvm

    with tvm.transform.PassContext(opt_level=3, config=pass_configs):
        return tilelang.lower(func, target=target)


def arch_of_cc(cc: str) -> str:
    """``90`` -> ``sm_90a``: the arch a capture names for a compute capability (architecture-specific from sm_90)."""
    return f"sm_{cc}{'a' if int(cc) >= 90 else ''}"


def lowered_code(req: CompileRequest, arch: str) -> tuple[str, str] | None:
    """(arch, digest) of the CUDA source TileLang generates for a compile request, lowered here (no GPU needed).

    What a ``--device`` capture stores, where nothing is compiled: the build then proves that its
    lowering of the *stored* IR gives the device code of the prim_func the JIT was given. None when
    TileLang cannot lower it (the build says why).
    """
    from tilelang import tvm

    from ..config.options import jit_pass_configs

    try:
        target = tvm.target.Target({"kind": "cuda", "arch": arch})
        with target:
            art = lower(req.func, target, jit_pass_configs(req.pass_configs, req.compile_flags))
        return arch, digest(art.kernel_source)
    except Exception:  # noqa: BLE001 (a capture never fails the workload; the build reports the error)
        return None


def recorded(item: JsonMapping, arch: str) -> JsonMapping:
    """The recorded device code of a captured kernel for ``arch``: ``{"sha256": ..., "tilelang": ..., "from": ...}`` or {}."""
    got = (item.get("device_code") or {}).get(arch)
    return got if isinstance(got, dict) and got.get("sha256") else {}


@dataclass(frozen=True)
class ProvenSource:
    """The device source a build ships for a kernel and its digest: TileLang's, or the JIT's spelling of it.

    ``reordered``: the captured digest is that of TileLang's source with its same-named shared-memory
    aliases placed or declared in another order (:mod:`tl_aot.capture.alias_order`): the same code,
    spelled as the JIT's process wrote it, and shipped as such.
    """

    source: str
    sha256: str
    reordered: bool = False


def check_against_record(item: JsonMapping, arch: str, source: str, where: str, *, tilelang_version: str, target: str = "") -> ProvenSource:
    """The source to ship for ``source`` (TileLang's, for ``arch``); raises when the record holds another kernel's digest.

    The record's digest is accepted for ``source`` as TileLang wrote it or as it writes it with the
    uses of its same-named aliases permuted (the lowering process's choice: :mod:`~tl_aot.capture.alias_order`);
    the text whose digest was recorded is the one returned. ``target``: the build's target, spelled;
    named beside the JIT's (when the record has it) if they differ.
    """
    mine = digest(source)
    want = recorded(item, arch)
    if not want or want["sha256"] == mine:
        return ProvenSource(source, mine)
    tried = 0
    for spelled in alias_orders(source):
        tried += 1
        if digest(spelled) == want["sha256"]:
            return ProvenSource(spelled, want["sha256"], reordered=spelled != source)
    then = want.get("tilelang", "?")
    versions = f" (captured with TileLang {then}, built with {tilelang_version})" if then != tilelang_version else ""
    theirs = str(want.get("target", ""))
    if theirs and target and theirs != target:
        versions += f"; the JIT's target was {theirs}, the build's {target}"
    total = order_count(source)
    orders = f", in each of the {tried} spellings of its same-named shared-memory aliases" if tried > 1 else ""
    if total > tried:
        orders = f", in the first {tried} of the {total} spellings of its same-named shared-memory aliases (no more are tried)"
    msg = (
        f"{where}: the device code TileLang generates from the record is not the code the JIT generated for this kernel "
        f"when the workload ran ({want.get('from', 'JIT')}): digest {mine} built{orders}, {want['sha256']} captured{versions}; "
        "refusing to ship a different kernel (capture again with this TileLang, or build with the one that captured)"
    )
    raise LoweringError(msg)
