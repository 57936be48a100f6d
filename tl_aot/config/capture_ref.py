"""What an entry built from a capture record carries: the recorded kernel, typed, and the record's choices.

A capture record (:mod:`tl_aot.capture.record`) is read once per build, where its kernels become
entries (:func:`tl_aot.capture.record_specs.specs_from_record`); each entry's
:attr:`~tl_aot.config.kernel_spec.KernelSpec.capture` is a :class:`CaptureRef` holding its
:class:`CapturedKernel` and the record's :class:`RecordChoices`. Everything after (the cache key,
lowering in a worker process, a cluster task, the manifest's tunings and call keys) reads these
values, never the file again: a record edited mid-build cannot make one library of two records.

The spec layer defines these values and never reads a record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..common.arch import Arch
from ..common.json_types import JsonMapping
from ..common.metadata import Tuning

__all__ = ["CapturedKernel", "RecordChoices", "CaptureRef"]


def _objects(value: object) -> tuple[JsonMapping, ...]:
    return tuple(x for x in value if isinstance(x, Mapping)) if isinstance(value, (list, tuple)) else ()


def _mapping(value: object) -> JsonMapping:
    return value if isinstance(value, Mapping) else {}


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def _seconds_or_none(value: object) -> float | None:
    """A recorded duration in seconds; None when absent or not a non-negative number (an older or hand-edited record)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        return None
    return float(value)


@dataclass(frozen=True, eq=False)
class CapturedKernel:
    """One kernel of a capture record, typed: its IR, the options the JIT compiled it with, and what the capture saw.

    ``item`` is the record's JSON object as stored, for the readers of the record format
    (:func:`tl_aot.capture.device_code.check_against_record`, :func:`tl_aot.jit.request_origin.origin_text`).
    """

    key: str  # the request key it is recorded under
    name: str  # the prim_func's name
    ir: str  # the prim_func, as tl_aot.jit.ir_record stored it
    compile_flags: tuple[str, ...]
    pass_configs: JsonMapping
    out_idx: Any  # as the JIT was given it: None, an index or a list of them
    backend: str | None  # as the JIT was given them (None: TileLang's default)
    target: str | None
    headers: JsonMapping  # header path -> its bytes in base64, for the flags naming them
    origins: tuple[JsonMapping, ...]  # where its requests came from
    devices: tuple[JsonMapping, ...]  # the GPUs it was captured on
    calls: tuple[str, ...]  # the call keys that led to it
    device_code: Mapping[str, JsonMapping]  # arch -> the digest of the CUDA source TileLang generated, and from what
    unfaithful: str  # why its IR does not rebuild into what the JIT compiled ('' when it does)
    item: JsonMapping = field(repr=False)
    #: seconds the JIT took to compile it in the capture (the longest seen; None in records older than the field):
    #: a build lowers the longest first (:func:`tl_aot.pipeline.scheduler.longest_first`)
    compile_s: float | None = None

    @classmethod
    def from_item(cls, key: str, item: JsonMapping) -> CapturedKernel:
        """The typed view of a record's item (missing keys as empty: a kernel recorded without IR has ``ir == ''``)."""
        options = _mapping(item.get("options"))
        code = _mapping(item.get("device_code"))
        return cls(
            key=key,
            name=str(item.get("name") or "main"),
            ir=item.get("ir", ""),
            compile_flags=tuple(str(f) for f in options.get("compile_flags", ())),
            pass_configs=dict(options.get("pass_configs", {})),
            out_idx=options.get("out_idx"),
            backend=_text_or_none(options.get("backend")),
            target=_text_or_none(options.get("target")),
            headers=dict(item.get("headers") or {}),
            origins=_objects(item.get("origins")),
            devices=_objects(item.get("devices")),
            calls=tuple(str(c) for c in item.get("calls", ())),
            device_code={str(a): c for a, c in code.items() if isinstance(c, Mapping)},
            unfaithful=str(item.get("unfaithful") or ""),
            item=item,
            compile_s=_seconds_or_none(item.get("compile_s")),
        )

    @property
    def jit(self) -> str:
        """The ``@tilelang.jit`` function its first origin through one was made by ('' when none was)."""
        return next((str(o["jit"]) for o in self.origins if o.get("jit")), "")

    @property
    def built_from(self) -> str:
        """The manifest's "built from" label of its variants: ``capture <the jit or function of its first origin> -> <name>``.

        Spelled from the record at each build (:func:`tl_aot.pipeline.plan.plan_build`), never taken
        from the variant cache, whose key does not cover this code: a library relinked from cached
        variants shows the label this tl_aot spells.
        """
        origin = self.origins[0] if self.origins else {}
        return f"capture {origin.get('jit') or origin.get('function', '?')} -> {self.item.get('name', 'main')}"

    @property
    def device_names(self) -> tuple[str, ...]:
        """The GPUs it was captured on, named as the driver reported them."""
        return tuple(sorted({str(d["name"]) for d in self.devices if d.get("name")}))

    @property
    def jit_args(self) -> tuple[tuple[str, str], ...]:
        """The arguments of that call, sorted by name and spelled as recorded."""
        origin = next((o for o in self.origins if o.get("jit")), {})
        args = origin.get("args", {})
        return tuple(sorted((str(k), str(v)) for k, v in args.items())) if isinstance(args, Mapping) else ()

    def proof(self, arch_sm: str) -> tuple[str, str]:
        """What a variant built for ``arch_sm`` must match: the recorded device code digest ('' when none) and the verdict."""
        return str(self.device_code.get(arch_sm, {}).get("sha256", "")), self.unfaithful


@dataclass(frozen=True, eq=False)
class RecordChoices:
    """What a capture record ships with the kernels a library holds: the autotuner's choices and the call keys.

    Shared (by reference) by every entry made from one record.
    """

    record: str  # the record's path
    tunings: tuple[Tuning, ...]  # sorted by tuning key
    calls: tuple[tuple[str, str], ...]  # (call key, request key) of every kernel of the record, sorted


@dataclass(frozen=True)
class CaptureRef:
    """An entry's recorded kernel: the record it is in, its key, and the kernel and record choices read from it.

    Compared and hashed by record and key; ``kernel`` and ``choices`` are what was read.
    """

    record: str  # the record's path, resolved
    key: str  # the kernel's request key
    kernel: CapturedKernel = field(compare=False, repr=False)
    choices: RecordChoices = field(compare=False, repr=False)
    #: the choices of the other records that hold this kernel too (:func:`tl_aot.capture.record_specs.specs_from_records`)
    also: tuple[RecordChoices, ...] = field(default=(), compare=False, repr=False)

    @property
    def jit(self) -> str:
        """See :attr:`CapturedKernel.jit`."""
        return self.kernel.jit

    @property
    def args(self) -> tuple[tuple[str, str], ...]:
        """See :attr:`CapturedKernel.jit_args`."""
        return self.kernel.jit_args

    def cache_key(self, arch: Arch) -> list[object]:
        """What keys its variant for ``arch``: its request key, the jit call it came from, and what the variant must match.

        The recorded device code digest for ``arch`` and the capture's verdict: a record whose digest or
        verdict changed is lowered (and checked) again.
        """
        return [self.key, self.jit, [list(a) for a in self.args], list(self.kernel.proof(arch.sm))]
