"""Content-addressed cache of lowered + compiled variants (one per entry and arch), and the keys a build makes.

A key covers everything that can change an image: the kernel file and the local modules it
imports, function, arguments, arch, pass configs and flags, backend, the TileLang, nvcc,
CuTeDSL and tl_aot versions, and nvcc's host compiler (by name and version); not tl_aot's own
code, so what a variant shows of how it was reached (its "built from" label) is made again when
that code changed (:mod:`tl_aot.pipeline.relabel`); the library's key
(:func:`library_key`) covers every variant key and what the launcher and link are made from. Entries are
written to a temporary folder and renamed into place, so a killed build never leaves a half
entry, and entries of kernels that failed stay valid.

Entries are relocatable: paths inside the kernel's project (the headers its ``-include`` / ``-I``
flags name, its local modules) are stored relative to the project root and re-anchored on load,
so two checkouts sharing one cache each check, and report, their own headers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..common.arch import Arch
from ..common.destinations import ensure_folder
from ..common.errors import CompileError, ToolchainNotFound
from ..common.fileutil import write_file
from ..common.fs_errors import filesystem_errors, fs_error
from ..common.metadata import ABI_VERSION, LoweredVariant
from ..common.metadata_json import from_json, to_json
from ..common.versions import __version__, package_version
from ..config.kernel_spec import KernelSpec, SpelledValues
from ..config.options import inputs_unchanged
from ..config.user_code import SourceSnapshot
from ..cuda.cuda_toolkit import find_toolkit
from ..cuda.host_identity import host_compiler, nvcc_host_compiler
from ..cuda.image_check import variant_image_problem
from .image_packs import ImagePacks
from .inputs import generator_files

__all__ = ["VariantCache", "variant_key", "library_key", "KeyTools", "default_cache_dir", "relocate"]

#: Bumped whenever what tl_aot stores for a variant changes (metadata fields, how images are made),
#: so that entries written by an older tl_aot of the same version are never reused.
#: 11: request keys taken before lowering (TileLang renamed variables in place);
#: 12: images made from each variant's own part of the PTX (tl_aot.cuda.ptx_split);
#: 13: under a compiler launcher too (only CUDA → PTX goes through it): the same bytes as without one;
#: 14: a tensor parameter's ``storage`` (sub-byte tensors, taken packed: tl_aot.common.subbyte).
CACHE_SCHEMA = 14

#: Stands for the project root in stored paths (see :func:`relocate`).
ROOT_TOKEN = "${TL_AOT_PROJECT_ROOT}"


def default_cache_dir(out_dir: Path) -> Path:
    """``$TL_AOT_CACHE_DIR`` if set, else ``<out_dir>/.tl_aot/cache``."""
    env = os.environ.get("TL_AOT_CACHE_DIR")
    return (Path(env) if env else Path(out_dir) / ".tl_aot" / "cache").resolve()


@dataclass(frozen=True)
class KeyTools:
    """What every variant key of a build names about the installed tools, read once per plan (:meth:`here`).

    Reading a distribution's version parses its metadata (a few ms): once per variant, thousands of
    times in a library's build, all in the build's one driver process.
    """

    tilelang: str
    cutedsl: str
    nvcc_host_compiler: str

    @classmethod
    def here(cls) -> KeyTools:
        """The tools installed on this machine, read now."""
        return cls(package_version("tilelang"), package_version("nvidia-cutlass-dsl"), nvcc_host_compiler())


def variant_key(
    spec: KernelSpec, arch: Arch, sources: SourceSnapshot, values: SpelledValues, *, nvcc_version: str, tools: KeyTools | None = None
) -> str:
    """The cache key of ``spec`` built for ``arch`` from ``sources``, its Python sources as read once per entry.

    ``sources``: the entry's kernel file and local modules as the plan read them; the build checks them again after lowering.
    ``values``: ``spec.spelled_values()`` (:meth:`~tl_aot.config.kernel_spec.KernelSpec.spelled_values`), spelled once per entry.
    ``tools``: :meth:`KeyTools.here` when not given (a plan reads it once for all its variants).
    """
    tools = tools or KeyTools.here()
    deps = sources.files[1:]
    payload = {
        "schema": CACHE_SCHEMA,
        "tl_aot": __version__,
        "tilelang": tools.tilelang,
        "nvcc": nvcc_version,
        # nvcc preprocesses with it and tells cicc its version (--gnu_version): machines sharing a cache must agree
        "nvcc_host_compiler": tools.nvcc_host_compiler,
        "function": spec.function,
        "args": values["args"],
        "factory_args": values["factory_args"],
        "jit_args": values["jit_args"],
        "select": spec.select,
        "imports": list(spec.imports),
        "capture": spec.capture.cache_key(arch) if spec.capture else [],
        "arch": str(arch),
        "pass_configs": values["pass_configs"],
        "compile_flags": list(spec.compile_flags),
        "entry": spec.name,
        "device": spec.device,
        "out_idx": None if spec.out_idx is None else list(spec.out_idx),
        "backend": spec.backend,
        # an entry that may be built by CuTeDSL (asked for, or left to its kernel file) is keyed by its version
        "cutedsl": "" if spec.backend == "cuda" else tools.cutedsl,
        "tuned": [list(c) for a, c, _ in spec.tuned if a == str(arch).split("+")[0]],
        "source": f"capture:{spec.capture.key}" if spec.capture else sources.files[0][3],
        "deps": [[Path(p).name, d] for p, _, _, d in deps],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


def _digest(*parts: str) -> str:
    """The SHA-256 of ``parts``, each ended by a NUL (no two lists of parts spell the same bytes)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()


def library_key(name: str, keys: Iterable[str], *, tvm_ffi_version: str, packs: ImagePacks | None, labels: Iterable[str] = ()) -> str:
    """The key of library ``name`` made of the variants ``keys``: what the stamp records (:mod:`tl_aot.pipeline.stamp`).

    It changes with any variant key, the generator files, the versions, the compilers, the choice
    of image packs and the ``labels`` spelled at link time (captured variants' "built from", which
    their keys do not cover): another of any of them links the library again, from cached images.
    """
    templates = "".join(sorted(_digest(f.name, f.read_text()) for f in generator_files()))
    try:  # which compiler (and from where) is recorded in the manifest: another one relinks, from cached images
        compiler = find_toolkit().describe
    except ToolchainNotFound:
        compiler = ""
    # the launcher's and runtime's compiler: another one (CXX changed) relinks, its objects keyed by it
    key = _digest(__version__, str(ABI_VERSION), name, tvm_ffi_version, templates, compiler, host_compiler(), *keys)
    labels = list(labels)
    if labels:  # a library of no captured entry keeps the key it had
        key = _digest(key, *labels)
    # the choice of image packs (and their hint) is embedded in the library
    return key if packs is None else hashlib.sha256(f"{key}\0{packs!r}".encode()).hexdigest()


def relocate(variant: LoweredVariant, old: str, new: str) -> LoweredVariant:
    """``variant`` with every path under ``old`` (in its flags, header inputs and deps) moved under ``new``."""
    pattern = re.compile(re.escape(old.rstrip("/")) + r"(?=/|$)")

    def move(s: str) -> str:
        return pattern.sub(lambda _: new.rstrip("/"), s)

    return dataclasses.replace(
        variant,
        nvcc_options=tuple(move(o) for o in variant.nvcc_options),
        compile_flags=tuple(move(o) for o in variant.compile_flags),
        inputs=tuple((move(p), d) for p, d in variant.inputs),
        deps=tuple(move(p) for p in variant.deps),
    )


class VariantCache:
    """A folder of ``<key>/variant.json`` + ``<key>/image.bin`` entries, each with its SHA-256 beside it.

    Every file is checked on read: a damaged, truncated or foreign entry is a miss (rebuilt and
    overwritten), never an error and never used. An image is checked for what it claims to be (a
    complete cubin or fatbin defining the variant's kernels) before it is stored and again when it
    is read; one that fails on read is noted in :attr:`notes` (the build logs them).
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()  # the linker and nvcc run in other folders: relative paths would break
        self.notes: list[str] = []

    def load(self, key: str, project: Path | None = None) -> tuple[LoweredVariant, bytes] | None:
        """The entry for ``key`` with its paths under ``project`` (the kernel's project root), if still valid."""
        d = self.root / key
        try:
            text = (d / "variant.json").read_bytes()
            image = (d / "image.bin").read_bytes()
            digests = ((d / "variant.sha256").read_text().strip(), (d / "image.sha256").read_text().strip())
            if digests != (hashlib.sha256(text).hexdigest(), hashlib.sha256(image).hexdigest()):
                return None  # damaged (a crash before the data reached the disk, an edit): rebuild it
            variant = from_json(LoweredVariant, text.decode())
            problem = variant_image_problem(variant, image)
            if problem:
                self.notes.append(f"cache entry {d} of {variant.entry} ({variant.arch}) holds a damaged image ({problem}): rebuilding it")
                return None
            if project is not None:
                variant = relocate(variant, ROOT_TOKEN, str(project))
            if not inputs_unchanged(variant.inputs):
                return None  # a header its nvcc flags name (-include, -I) changed since: rebuild it
        except Exception:  # noqa: BLE001 (unreadable, not JSON, JSON of another shape: a miss, never a crash)
            return None
        return variant, image

    def load_many(self, items: Iterable[tuple[str, Path | None]]) -> dict[str, tuple[LoweredVariant, bytes]]:
        """``{key: (variant, image)}`` of the ``(key, project)`` items this cache holds intact (the others are misses)."""
        found: dict[str, tuple[LoweredVariant, bytes]] = {}
        for key, project in items:
            hit = self.load(key, project)
            if hit is not None:
                found[key] = hit
        return found

    def check_writable(self) -> None:
        """Raise a :class:`~tl_aot.common.errors.FilesystemError` unless variants can be stored here (the folder made where missing).

        Probed once per build, with the other folders, when its workspace is made (:func:`tl_aot.pipeline.workspace.workspace`).
        """
        ensure_folder(self.root, "cache folder")
        with filesystem_errors("store variants in the cache folder", self.root, "pass a writable --cache-dir or TL_AOT_CACHE_DIR"):
            tempfile.TemporaryDirectory(prefix=".probe.", dir=self.root).cleanup()

    def store(self, key: str, variant: LoweredVariant, image: bytes, project: Path | None = None, *, replace: bool = False) -> None:
        """Write the entry under a temporary name and rename it into place (all or nothing).

        An entry already there is kept if valid (a concurrent build stored the same key), unless
        ``replace`` (a ``--force`` build: whatever is there is not trusted).
        """
        problem = variant_image_problem(variant, image)
        if problem:  # the compile stage checks first and says why; nothing unverified is ever stored
            msg = f"entry {variant.entry!r} ({variant.arch}): refusing to cache a damaged image ({problem})"
            raise CompileError(msg, entry=variant.entry, arch=variant.arch.sm)
        if project is not None:
            variant = relocate(variant, str(project), ROOT_TOKEN)

        ensure_folder(self.root, "cache folder")
        self._sweep(key)
        final = self.root / key
        with filesystem_errors("store a variant in the cache folder", self.root, "pass a writable --cache-dir or TL_AOT_CACHE_DIR"):
            tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=self.root))
        try:
            text = to_json(variant, indent=1).encode()
            write_file(tmp / "image.bin", image)
            write_file(tmp / "variant.json", text)
            write_file(tmp / "image.sha256", hashlib.sha256(image).hexdigest() + "\n")
            write_file(tmp / "variant.sha256", hashlib.sha256(text).hexdigest() + "\n")
            try:
                os.replace(tmp, final)
            except OSError:
                if not replace and self.load(key, project) is not None:
                    # A concurrent build stored the same key first: its entry is as good as ours.
                    shutil.rmtree(tmp, ignore_errors=True)
                else:  # a damaged (or distrusted) entry is in the way: move it aside and put ours in its place
                    aside = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=self.root)) / "damaged"
                    with contextlib.suppress(OSError):
                        os.replace(final, aside)
                    try:
                        os.replace(tmp, final)
                    except OSError:
                        shutil.rmtree(tmp, ignore_errors=True)
                    shutil.rmtree(aside.parent, ignore_errors=True)
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)

            raise fs_error(e, "store a variant in the cache folder", self.root) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _sweep(self, key: str, age_s: float = 3600.0) -> None:
        """Remove this key's temporary folders left by builds killed over an hour ago."""
        now = time.time()
        for p in self.root.glob(f".{key}.*"):
            try:
                if now - p.stat().st_mtime > age_s:
                    shutil.rmtree(p, ignore_errors=True)
            except OSError:
                pass
