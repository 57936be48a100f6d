"""Sharded builds for CI matrices: ``build --shard K/N -o PART`` on N machines, ``link PART... -o OUT`` on one.

A shard plans the whole library (every variant's key, from the sources read once) and builds the
K-th of N deterministic shares (variant ``i`` of the plan's order goes to shard ``i % N + 1``), each
with its own cache. Its part folder holds ``part.json`` (library, shard, the library key, the
toolset, every entry's manifest head and every variant's key) and ``variants/<key>.tlv`` (the
metadata and image, in the shared cache's verified format).

``link`` checks that the parts are one library's: the same toolset (naming the difference: versions,
the host compilers by name and version), the same library key (same sources and specs:
"different sources" otherwise), every shard
1..N exactly once (a missing or duplicate one named); then it makes the manifest, renders and
compiles the launcher and links, as a one-machine build does: the same bytes.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from ..codegen.render import render_header, render_launcher
from ..common.arch import parse_arch
from ..common.destinations import ensure_folder
from ..common.errors import PartError, SpecError
from ..common.fileutil import atomic_write, write_if_different
from ..common.metadata import Call, LeftOut, LoweredEntry, LoweredVariant, Tuning, from_json, to_json
from ..cuda.host_objects import generated_object, runtime_object
from ..cuda.image_check import variant_image_problem
from ..jit.captured import recorded_calls
from ..jit.tuning import recorded_tunings
from .cache import VariantCache, default_cache_dir
from .link import Outputs, link, publish
from .manifest import compiler_or_none, entry_head, image_files_by_symbol, manifest_from
from .plan import check_toolchain, plan_build
from .run import all_failed, build_variants, left_out_of
from .scheduler import default_jobs
from .shared_cache import SharedCache, pack_entry, unpack_entry
from .stages import objects_key
from .toolset import differences, local_toolset

__all__ = ["parse_shard", "shard_of", "build_shard", "check_parts", "link_parts", "PartError"]

PART_FORMAT = "tl_aot-part/1"


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> (2, 4); an error names what is wrong."""
    try:
        k, n = (int(x) for x in str(text).split("/"))
    except ValueError:
        msg = f"--shard {text!r}: expected K/N, e.g. 1/4 (shard K of N, counted from 1)"
        raise SpecError(msg) from None
    if n < 1 or not 1 <= k <= n:
        msg = f"--shard {text!r}: K must be between 1 and N (N at least 1)"
        raise SpecError(msg)
    return k, n


def shard_of(tasks, k: int, n: int) -> list:
    """The K-th of N shares of ``tasks`` (plan order): round robin, so every shard gets a mix of entries and archs."""
    return [t for i, t in enumerate(tasks) if i % n == k - 1]


def build_shard(
    lib,
    shard: str,
    *,
    out_dir,
    jobs=None,
    cache_dir=None,
    cache_url="",
    cluster="",
    log=print,
    force=False,
    keep_going=False,
    report_all=False,
):
    """Build shard ``K/N`` of ``lib`` into the part folder ``out_dir``; returns the part's path."""
    k, n = parse_shard(shard)
    t0 = time.perf_counter()
    part = ensure_folder(Path(out_dir).resolve(), "part folder")
    work = ensure_folder(part / ".tl_aot" / lib.name, "work folder")
    cache = VariantCache(Path(cache_dir).resolve() if cache_dir else default_cache_dir(part))
    if cache_url:
        cache = SharedCache(cache, cache_url, log=log)
    plan = plan_build(lib, cache, check_toolchain(lib), force=force)
    mine = shard_of(plan.tasks, k, n)
    sub = replace(plan, tasks=tuple(mine))
    if log:
        log(f"shard {k}/{n} of {lib.name}: {len(mine)} of {len(plan.tasks)} variants ({len(sub.todo)} to build)")
    if sub.todo:
        cache.check_writable()
    tolerant = keep_going or report_all or any(e.capture for e in lib.entries)
    run = build_variants(sub, work, cache, jobs or default_jobs(), log, force=force, keep_going=tolerant, cluster=cluster, launcher=False)
    if run.failures and not keep_going:
        raise all_failed(sub, run)
    variants = part / "variants"
    variants.mkdir(exist_ok=True)
    for old in variants.glob("*.tlv"):
        old.unlink()
    held = {}
    for t in mine:
        if t.key in run.images:
            atomic_write(variants / f"{t.key}.tlv", pack_entry(t.key, to_json(run.lowered[t.key], indent=1), run.images[t.key]))
            held[t.key] = f"variants/{t.key}.tlv"
    data = {
        "format": PART_FORMAT,
        "library": lib.name,
        "shard": [k, n],
        "lib_key": plan.lib_key,
        "toolset": local_toolset().as_dict(),
        "nvcc_version": plan.nvcc_version,
        "tvm_ffi_version": plan.tvm_ffi_version,
        "tilelang_version": local_toolset(nvcc=False).tilelang,
        "compiler": compiler_or_none(),
        "entries": [json.loads(to_json(entry_head(spec))) for spec in lib.entries],
        "tasks": [[t.spec.name, str(t.arch), t.key] for t in plan.tasks],
        "variants": held,
        "left_out": [json.loads(to_json(x)) for x in left_out_of(sub, run)],
        "tunings": [json.loads(to_json(t)) for t in _recorded(lib, "tunings")],
        "calls": [json.loads(to_json(c)) for c in _recorded(lib, "calls")],
    }
    atomic_write(part / "part.json", json.dumps(data, indent=1, sort_keys=True) + "\n")
    if log:
        log(f"shard {k}/{n}: wrote {len(held)} variant(s) to {part} in {time.perf_counter() - t0:.1f} s")
    return part


def _recorded(lib, what: str) -> tuple:
    """The autotuner's choices (``tunings``) or the call keys (``calls``) recorded with the library's captured kernels.

    Link keeps those whose kernel it holds.
    """
    records = {spec.capture[0] for spec in lib.entries if spec.capture}
    if not records:
        return ()
    held = {spec.capture[1] for spec in lib.entries if spec.capture}
    return (recorded_tunings if what == "tunings" else recorded_calls)(records, held)


def _host_objects(name: str, work: Path, cache_root: Path, key: str, header_text: str, launcher_text: str) -> tuple:
    """The launcher's and the runtime's objects, from the cache a one-machine build uses, keyed the same way."""
    write_if_different(work / f"{name}.h", header_text)
    write_if_different(work / f"{name}.cc", launcher_text)
    sources = {f"{name}.cc": launcher_text, f"{name}.h": header_text}
    what = f"compiling the launcher of {name} ({work / (name + '.cc')})"
    launcher, _ = generated_object(cache_root, sources, f"{name}.cc", f"{name}.launcher.o", extra_key=key, what=what)
    runtime, _ = runtime_object(cache_root, extra_key=key)
    return launcher, runtime


def _read_part(folder: Path) -> dict:
    try:
        data = json.loads((folder / "part.json").read_text())
    except FileNotFoundError:
        msg = f"{folder} is not a build part: no part.json (make one with `python -m tl_aot build ... --shard K/N -o {folder}`)"
        raise PartError(msg) from None
    except (OSError, ValueError) as e:
        msg = f"{folder}/part.json cannot be read: {e}"
        raise PartError(msg) from None
    if not isinstance(data, dict) or data.get("format") != PART_FORMAT:
        msg = f"{folder}/part.json is not a tl_aot build part of this tl_aot ({PART_FORMAT})"
        raise PartError(msg)
    return data


def check_parts(parts: list) -> tuple[int, dict]:
    """N and {K: (folder, part.json)} of parts of one library; a mismatch, missing or duplicate shard is an error naming it."""
    first_folder, first = parts[0]
    by_k: dict = {}
    for folder, data in parts:
        if data["library"] != first["library"]:
            msg = f"{folder} is a part of library {data['library']!r}, {first_folder} of {first['library']!r}"
            raise PartError(msg)
        # tools first: other tools (nvcc) make other keys too, and the tools are what differs
        diff = differences(first["toolset"], data["toolset"], here_name=f"in {first_folder}", there_name=f"in {folder}")
        if diff:
            msg = f"{folder} and {first_folder} were built with different tools: {'; '.join(diff)}"
            raise PartError(msg)
        if data["lib_key"] != first["lib_key"] or data["tasks"] != first["tasks"]:
            msg = (
                f"{folder} and {first_folder} were built from different sources or specs of library {data['library']!r} "
                "(their variant keys differ): build every shard from the same commit"
            )
            raise PartError(msg)
        k, n = data["shard"]
        if n != first["shard"][1]:
            msg = f"{folder} is shard {k}/{n}, {first_folder} shard {first['shard'][0]}/{first['shard'][1]}: one N for every shard"
            raise PartError(msg)
        if k in by_k:
            msg = f"shard {k}/{n} given twice: {by_k[k][0]} and {folder}"
            raise PartError(msg)
        by_k[k] = (folder, data)
    n = first["shard"][1]
    missing = [f"{k}/{n}" for k in range(1, n + 1) if k not in by_k]
    if missing:
        msg = f"library {first['library']!r}: shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing (given: " + (
            ", ".join(f"{k}/{n} in {f}" for k, (f, _) in sorted(by_k.items())) + ")"
        )
        raise PartError(msg)
    return n, by_k


def _left_out(first: dict, by_k: dict) -> tuple:
    """The variants the shards left out (``--keep-going``), in the library's order."""
    found = {(x["entry"], x["arch"]): x for _, data in by_k.values() for x in data.get("left_out", [])}
    return tuple(from_json(LeftOut, json.dumps(found[(e, a)])) for e, a, _ in first["tasks"] if (e, a) in found)


def _variants_of(first: dict, by_k: dict) -> tuple[dict, dict, list]:
    """Every variant the parts hold, read and verified: (key -> LoweredVariant, key -> image, [(entry, arch) not built])."""
    lowered, images, failed = {}, {}, []
    for key_index, (entry, arch, key) in enumerate(first["tasks"]):
        k = key_index % first["shard"][1] + 1
        folder, data = by_k[k]
        rel = data["variants"].get(key)
        if rel is None:
            failed.append((entry, arch))
            continue
        try:
            raw = (folder / rel).read_bytes()
        except OSError as e:
            msg = f"{folder}: variant {entry} {arch} ({rel}) cannot be read: {e}"
            raise PartError(msg) from None
        got = unpack_entry(raw, key)
        if got is None:
            msg = f"{folder}/{rel}: variant {entry} {arch} is damaged (its digest or size differs): build shard {k} again"
            raise PartError(msg)
        variant = from_json(LoweredVariant, got[0])
        problem = variant_image_problem(variant, got[1])
        if problem:
            msg = f"{folder}/{rel}: variant {entry} {arch} holds a damaged image ({problem}): build shard {k} again"
            raise PartError(msg)
        lowered[key], images[key] = variant, got[1]
    return lowered, images, failed


def link_parts(folders, *, out_dir, header_dir=None, cache_dir=None, log=print):
    """Join the parts into ``out_dir/lib<name>.so`` (+ header); returns the library's path."""
    t0 = time.perf_counter()
    if not folders:
        msg = "link: give the part folders (python -m tl_aot link PART... -o OUT)"
        raise PartError(msg)
    parts = [(Path(f).resolve(), _read_part(Path(f).resolve())) for f in folders]
    _, by_k = check_parts(parts)
    first = parts[0][1]
    here = local_toolset().as_dict()
    # what the link itself runs: tl_aot's generator, tvm-ffi's headers, and the host compiler of the launcher and runtime
    mine = {f: here[f] for f in ("tl_aot", "tvm_ffi", "python", "cache_schema", "host_compiler")}
    theirs = {f: first["toolset"].get(f, "") for f in mine}
    diff = differences(theirs, mine, here_name=f"in the parts ({parts[0][0]})", there_name="here")
    if diff:
        msg = f"link: this machine's tools differ from the parts' (the library would not be a one-machine build's): {'; '.join(diff)}"
        raise PartError(msg)
    name = first["library"]
    lowered, images, failed = _variants_of(first, by_k)
    heads = []
    for head_json in first["entries"]:
        head = from_json(LoweredEntry, json.dumps(head_json))
        arch_keys = [(parse_arch(a), key) for e, a, key in first["tasks"] if e == head.name and key in lowered]
        if arch_keys:
            heads.append((head, arch_keys))
    if not heads:
        msg = f"link: no variant of library {name!r} was built in the parts"
        raise PartError(msg)
    out_dir = ensure_folder(Path(out_dir).resolve(), "output folder")
    work = ensure_folder(out_dir / ".tl_aot" / name, "work folder")
    header_dir = ensure_folder(Path(header_dir).resolve(), "header folder") if header_dir else out_dir
    out = Outputs(out_dir / f"lib{name}.so", header_dir / f"{name}.h", work / "stamp.json", None)
    tilelang, nvcc, tvm_ffi = first["tilelang_version"], first["nvcc_version"], first["tvm_ffi_version"]
    compiler = first.get("compiler", "")
    signatures = manifest_from(name, heads, lowered, nvcc, tilelang, compiler=compiler)
    header_text = render_header(signatures)
    cache_root = Path(cache_dir).resolve() if cache_dir else default_cache_dir(out_dir)
    key = objects_key(nvcc, tvm_ffi)
    objects = _host_objects(name, work, cache_root, key, header_text, render_launcher(signatures, header_name=f"{name}.h"))
    sizes = {key: len(img) for key, img in images.items()}
    held = {head.capture_key for head, _ in heads}
    tunings = tuple(from_json(Tuning, json.dumps(t)) for t in first.get("tunings", []) if t.get("request_key") in held)
    calls = tuple(from_json(Call, json.dumps(c)) for c in first.get("calls", []) if c.get("request_key") in held)
    manifest = manifest_from(name, heads, lowered, nvcc, tilelang, sizes, compiler=compiler)
    manifest = replace(manifest, left_out=_left_out(first, by_k), tunings=tunings, calls=calls)
    built = link(name, work, manifest, image_files_by_symbol(heads, images), objects, cache=cache_root, key=key)
    publish(built, out, manifest, header_text, lib_key=first["lib_key"], inputs=[], deps=(), stamp=False)
    if log:
        if failed:
            log(f"left out {len(failed)} variant(s) the shards could not build: " + ", ".join(f"{e} {a}" for e, a in failed))
        log(f"linked {out.library} from {len(parts)} part(s) ({len(images)} variants) in {time.perf_counter() - t0:.1f} s")
    return out.library
