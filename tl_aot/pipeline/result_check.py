"""The driver's side of the seam with a worker (:mod:`tl_aot.pipeline.variant_task`): a result verified, or its error raised.

Nothing a worker sends reaches the cache unchecked: the digests of its metadata and image, the
image's format for the arch, the image's own check, and the headers its flags named.
"""

from __future__ import annotations

import hashlib

from ..common.errors import CompileError, LoweringError, TlAotError, ToolsetMismatch
from ..cuda.image_check import variant_image_problem
from .variant_task import VariantResult

__all__ = ["accept_result", "raise_failure"]

#: Image formats a variant may have: an ELF cubin, or a fatbin (``+PTX``).
_ELF_MAGIC = b"\x7fELF"
_FATBIN_MAGIC = (0xBA55ED50).to_bytes(4, "little")


def raise_failure(result: VariantResult) -> None:
    """Raise a failed result's error as the worker raised it: its tl_aot class, message and fields."""
    from ..common import errors

    cls = ToolsetMismatch if result.error_class == "ToolsetMismatch" else getattr(errors, result.error_class, LoweringError)
    if not (isinstance(cls, type) and issubclass(cls, TlAotError)):
        cls = LoweringError
    fields = dict(result.error_fields)
    err = cls.__new__(cls)
    TlAotError.__init__(err, result.error, **{k: fields.get(k) for k in ("entry", "arch", "location")})
    err.__dict__.update(fields)
    raise err


def accept_result(task, result: VariantResult):
    """The (LoweredVariant, image) of a worker's result, once verified; raises its error, or one naming what is wrong.

    Checked: the digests of both parts, the image's format for the arch (cubin or fatbin), and that
    every header the variant's flags name has, here, the digest it had on the worker.
    """
    from ..common.metadata import LoweredVariant
    from ..common.metadata_json import from_json
    from ..config.options import inputs_unchanged

    if not result.ok:
        raise_failure(result)
    where = f"entry {task.spec.name!r} ({task.arch}) from worker {result.worker}"
    if hashlib.sha256(result.variant_json.encode()).hexdigest() != result.variant_sha256:
        msg = f"{where}: its metadata arrived damaged (digest mismatch); nothing was stored"
        raise CompileError(msg, entry=task.spec.name, arch=task.arch.sm)
    if hashlib.sha256(result.image).hexdigest() != result.image_sha256:
        msg = f"{where}: its image arrived damaged (digest mismatch); nothing was stored"
        raise CompileError(msg, entry=task.spec.name, arch=task.arch.sm)
    magic = _FATBIN_MAGIC if task.arch.ptx else _ELF_MAGIC
    if not result.image.startswith(magic):
        msg = f"{where}: its image is not a {'fatbin' if task.arch.ptx else 'cubin'}; nothing was stored"
        raise CompileError(msg, entry=task.spec.name, arch=task.arch.sm)
    variant = from_json(LoweredVariant, result.variant_json)
    if (variant.entry, variant.arch) != (task.spec.name, task.arch):
        msg = f"{where}: the worker answered for {variant.entry} {variant.arch}; nothing was stored"
        raise CompileError(msg, entry=task.spec.name, arch=task.arch.sm)
    problem = variant_image_problem(variant, result.image)  # the local cache's own check: a complete image, its kernels
    if problem:
        msg = f"{where}: its image is damaged ({problem}); nothing was stored"
        raise CompileError(msg, entry=task.spec.name, arch=task.arch.sm)
    if not inputs_unchanged(variant.inputs):
        changed = ", ".join(p for p, d in variant.inputs if not inputs_unchanged([(p, d)]))
        msg = f"{where}: headers its nvcc flags name differ between this machine and the worker ({changed}); nothing was stored"
        raise CompileError(msg, entry=task.spec.name, arch=task.arch.sm, location=changed)
    return variant, result.image
