"""``python -m tl_aot tune``: pick each entry's config on this machine's GPU and write a tuning record.

For every entry with candidates (an ``@autotune`` decorator's configs, or a spec's ``tune`` table
for a plain factory) the candidates are built as one library through tl_aot's own pipeline (in
parallel, sharing the ``-j`` slots and the variant cache), run on random inputs, checked against
the first candidate's outputs and timed with CUDA events. The fastest correct one is recorded
(:mod:`tl_aot.tune.tuning_record`) per entry × arguments × arch × GPU, with every candidate's time. Needs
torch with CUDA, TileLang and a CUDA compiler (tl_aot[build] brings one); ``build`` then uses the record anywhere.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import math
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..common.arch import parse_arch
from ..common.errors import SpecError, TlAotError
from ..config.kernel_spec import KernelSpec, LibrarySpec
from ..runtime.torch_fakes import TORCH_DTYPES
from .tuning_record import Candidate, Item, TuningRecord, source_digest

if TYPE_CHECKING:
    from ..runtime.loader import Library

__all__ = ["candidates_of", "candidate_plans", "tune_library", "local_arch", "write_record"]

_log = logging.getLogger("tl_aot")


def local_arch(torch) -> str:
    """The arch of this machine's GPU 0 as tl_aot names it (sm_90a for an H100: the arch-specific one)."""
    major, minor = torch.cuda.get_device_capability(0)
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


def candidates_of(spec: KernelSpec) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The candidate configs of ``spec`` and the decorator's timing settings (warmup, rep), if any."""
    if spec.tune:
        return [dict(c) for c in spec.tune], {}
    from ..config.function_path import lookup_function
    from ..config.user_code import import_kernel_file
    from .config_choice import candidate_configs, is_autotuned

    module = import_kernel_file(spec.source, entry=spec.name, arch="tune")
    obj = lookup_function(module, spec.function)
    if not is_autotuned(obj):
        return [], {}
    settings = {k: getattr(obj, k) for k in ("warmup", "rep") if isinstance(getattr(obj, k, None), int)}
    return [{k: v for k, v in c.items() if k != "pass_configs"} for c in candidate_configs(obj, spec.kwargs)], settings


def candidate_plans(lib: LibrarySpec, arch: str, log=None) -> list:
    """Per entry with candidates: (spec, configs, one KernelSpec per config built for ``arch``, timing settings)."""
    plans, n = [], 0
    for spec in lib.entries:
        configs, settings = candidates_of(spec)
        if not configs:
            if log:
                log(f"{spec.name}: no candidates (neither @autotune nor a `tune` table); skipped")
            continue
        archs = tuple(a for a in spec.archs if a.sm == arch) or (parse_arch(arch),)
        cands = [
            dataclasses.replace(
                spec,
                name=f"{spec.exported}__c{n + i}",
                export="",
                when=(),
                fallback=False,
                tune=(),
                tuned=(),
                args=tuple({**spec.kwargs, **c}.items()),
                archs=archs,
            )  # fmt: skip
            for i, c in enumerate(configs)
        ]
        n += len(cands)
        plans.append((spec, configs, cands, settings))
    return plans


def _inputs(torch, entry, values: Mapping[str, Any], seed: int, name: str):
    """Random arguments for ``entry`` (every parameter; outputs zeroed), sized from ``values`` for dynamic dims."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    args = []
    for p in entry.params:
        if not p.is_tensor:
            args.append(values.get(p.name, 1.0 if p.dtype.startswith("float") else 1))
            continue
        shape = []
        for d in p.shape:
            if isinstance(d, int):
                shape.append(d)
            elif d in values:
                shape.append(int(values[d]))
            else:
                msg = f"entry {name!r}: tune needs a size for dynamic dim {d!r} of {p.name!r}: --dim {d}=SIZE"
                raise SpecError(msg)
        k = p.packing
        if k is not None:  # a sub-byte tensor: random bytes of its packed storage, as TileLang's JIT takes it
            if not k.storage:
                msg = f"entry {name!r}: tune cannot make {p.name!r} ({p.dtype}): no torch dtype holds its packed storage"
                raise SpecError(msg)
            shape[-1] //= k.pack
            t = torch.randint(0, 256, shape, generator=gen, device="cuda", dtype=torch.uint8)
            args.append((torch.zeros_like(t) if p.output else t).view(getattr(torch, k.storage)))
            continue
        dtype = getattr(torch, TORCH_DTYPES[p.dtype])
        if p.output:
            t = torch.zeros(shape, dtype=dtype, device="cuda")
        elif dtype.is_floating_point:
            t = (torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32) / math.sqrt(max(1, shape[-1] if shape else 1))).to(
                dtype
            )
        else:
            t = torch.randint(0, 4, shape, generator=gen, device="cuda").to(dtype)
        args.append(t)
    return args


def _time_ms(torch, fn, args, warmup: int, rep: int) -> float:
    for _ in range(warmup):
        fn(*args)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(rep):
        fn(*args)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / rep


def _close(torch, got, want) -> str:
    """'' when ``got`` matches ``want`` (every tensor), else what differs."""
    for i, (g, w) in enumerate(zip(got, want)):
        if not isinstance(g, torch.Tensor):
            continue
        if g.dtype == getattr(torch, "float4_e2m1fn_x2", None):  # packed fp4 has no arithmetic: compare its bytes
            g, w = g.view(torch.uint8), w.view(torch.uint8)
        tol = 1e-2 if g.dtype in (torch.float16, torch.bfloat16) or g.element_size() == 1 else 1e-4
        if not torch.allclose(g.float(), w.float(), rtol=tol * 4, atol=tol * 4):
            err = (g.float() - w.float()).abs().max().item()
            return f"argument {i} differs from the first candidate's (max abs error {err:.3g})"
    return ""


def tune_library(lib: LibrarySpec, *, build, values: dict[str, Any], jobs: int | None, cache_dir, warmup: int | None,
                 rep: int | None, log=print) -> list[Item]:  # fmt: skip
    """Tune every entry of ``lib`` with candidates on GPU 0; the record items (one per entry and arch).

    ``build`` is the pipeline's ``build_library``, handed in by the command: the tuner makes the candidates'
    specs and times them, the pipeline (a layer above this wing) builds them.
    """
    import torch

    if not torch.cuda.is_available():
        msg = "python -m tl_aot tune runs the candidates: it needs a CUDA GPU and torch with CUDA (build needs neither)"
        raise TlAotError(msg)
    from ..common.tilelang_compat import tilelang_version
    from ..common.versions import __version__
    from ..runtime.loader import load

    arch = local_arch(torch)
    gpu = torch.cuda.get_device_name(0)
    plans = candidate_plans(lib, arch, log)
    cand_specs = tuple(c for _, _, cands, _ in plans for c in cands)
    if not plans:
        return []
    with tempfile.TemporaryDirectory(prefix="tl_aot_tune-") as tmp:
        if log:
            log(f"building {len(cand_specs)} candidates of {len(plans)} entries for {arch} ({gpu})")
        # A candidate that does not build is dropped, as TileLang's autotuner drops it: the build names it.
        lib_spec = LibrarySpec(name="tl_aot_tune", entries=cand_specs)
        result = build(lib_spec, out_dir=tmp, jobs=jobs, cache_dir=cache_dir, log=log, keep_going=True)
        failed = {entry: message.splitlines()[0][:300] for entry, _, message in result.failures}
        library = load(result.library)
        versions = (("nvcc", result.manifest.nvcc_version), ("tilelang", tilelang_version()), ("tl_aot", __version__),
                    ("torch", torch.__version__))  # fmt: skip
        run = _Timing(torch, library, values, warmup, rep, failed, log)
        items = [_item(spec, arch, gpu, versions, run.entry(spec, configs, cands, settings)) for spec, configs, cands, settings in plans]
        library.cleanup()
    return items


@dataclasses.dataclass
class _Timing:
    """Times the candidates of each entry in one loaded library of candidates."""

    torch: Any  # the torch module, imported by the tune command
    library: Library
    values: dict[str, Any]
    warmup: int | None
    rep: int | None
    failed: dict[str, str]  # candidate entry -> why it did not build
    log: Callable[[str], None] | None

    def entry(
        self, spec: KernelSpec, configs: list[dict[str, Any]], cands: list[KernelSpec], settings: Mapping[str, Any]
    ) -> tuple[set[str], list[Candidate], Candidate]:
        """Every candidate of ``spec`` run, checked against the first and timed; (configs measured, best)."""
        torch, failed = self.torch, self.failed
        alive = [c.name for c in cands if c.name not in failed]
        if not alive:
            msg = f"entry {spec.name!r}: no candidate builds; the first error: {failed[cands[0].name]}"
            raise TlAotError(msg)
        base = _inputs(torch, self.library.signature(alive[0]), self.values, seed=0, name=spec.name)
        w, r = self.warmup or settings.get("warmup", 25), self.rep or settings.get("rep", 100)
        reference, measured = None, []
        for cfg, c in zip(configs, cands):
            config = tuple((k, repr(v)) for k, v in cfg.items())
            if c.name in failed:
                measured.append(Candidate(config, None, f"build failed: {failed[c.name]}"))
                continue
            ms, why, reference = self._run(self.library[c.name], base, reference, w, r)
            measured.append(Candidate(config, None if ms is None else round(ms, 5), why))
            if self.log:
                self.log(f"  {spec.name} {cfg}: " + (f"{ms:.4f} ms" if ms is not None else f"dropped ({why})"))
        ok = [m for m in measured if m.ms is not None]
        if not ok:
            msg = f"entry {spec.name!r}: every candidate failed on {torch.cuda.get_device_name(0)}; see the lines above"
            raise TlAotError(msg)
        best = min(ok, key=lambda m: m.ms if m.ms is not None else math.inf)
        if self.log:
            gpu = torch.cuda.get_device_name(0)
            self.log(f"{spec.name} on {gpu}: {dict(best.config)} ({best.ms:.4f} ms, {len(ok)}/{len(measured)} candidates ran)")
        return set(configs[0]), measured, best

    def _run(self, fn, base: list, reference, warmup: int, rep: int):
        """(ms or None, why dropped, the reference outputs): the first candidate that runs is the reference."""
        torch = self.torch
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in base]
        try:
            fn(*args)
            torch.cuda.synchronize()
            if reference is None:
                reference, why = args, ""
            else:
                why = _close(torch, args, reference)
            return (None if why else _time_ms(torch, fn, args, warmup, rep)), why, reference
        except Exception as e:  # noqa: BLE001 (a candidate that fails is dropped, named in the record)
            return None, f"{type(e).__name__}: {e}", reference


def _item(
    spec: KernelSpec, arch: str, gpu: str, versions: tuple[tuple[str, str], ...], timed: tuple[set[str], list[Candidate], Candidate]
) -> Item:
    """The record item of one tuned entry."""
    keys, measured, best = timed
    assert best.ms is not None  # the best of the candidates that ran
    return Item(
        entry=spec.name,
        function=spec.function,
        source=Path(spec.source).name,
        args=tuple(sorted((k, repr(v)) for k, v in spec.args if k not in keys)),
        arch=arch,
        gpu=gpu,
        chosen=best.config,
        ms=best.ms,
        candidates=tuple(measured),
        source_digest=source_digest(spec),
        versions=versions,
        tuned_at=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    )


def write_record(path: str | Path, items: list[Item]) -> TuningRecord:
    """Merge ``items`` into the record at ``path`` (created if missing) and save it."""
    path = Path(path)
    record = TuningRecord.load(path) if path.is_file() else TuningRecord()
    record = record.merged(items)
    record.save(path)
    return record
