"""Load a tl_aot library: ``tl_aot.load(path)`` → an object whose attributes are the entries.

Needs only ``apache-tvm-ffi``: no TileLang, torch, nvcc or GPU (a call on a machine without a
GPU fails with a clear message; loading and ``inspect`` work anywhere). Entry attributes are the
library's TVM FFI functions themselves, so a call costs exactly one tvm-ffi call (an entry returning
several outputs is wrapped to return a tuple rather than a ``tvm_ffi.Array``; one taking no input
tensor is wrapped to allocate its outputs with torch, when torch is imported, on its current device).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..common.errors import LibraryError
from ..common.gc_pause import gc_paused
from ..common.manifest_index import ManifestIndex
from .elf import ElfInfo, check_library_file
from .manifest_check import checked_index, checked_manifest, without_index

if TYPE_CHECKING:
    from ..common.metadata import LoweredEntry, Manifest, Tuning

# What loading imports is what every process that loads a library pays before its first call: the
# metadata's dataclasses (:mod:`tl_aot.common.metadata`), the torch ops and the file helpers are
# imported where an entry's record is first parsed, an entry wrapped, or a library copied.

__all__ = ["load", "Library", "read_index", "read_manifest"]


#: A file's identity: (device, inode, size, mtime_ns), as os.stat gives them.
_FileId = tuple[int, int, int, int]

#: Library file -> (its identity when loaded, the path the loader was given): see :func:`_load_module`.
_loaded: dict[str, tuple[_FileId, Path]] = {}


def _load_module(path: Path):
    """Load the library at ``path``; a file rebuilt since this process loaded it is loaded anew.

    The dynamic loader hands back the library it already loaded from a path, whatever is there
    now, so a rebuilt file is loaded through a private copy named by its contents.
    """
    if not path.is_file():
        msg = f"no such library: {path}"
        raise LibraryError(msg)
    _checked(path)  # before dlopen: a truncated file would SIGBUS, a libtvm_ffi copy would abort
    try:  # after the file's checks: importing tvm_ffi imports torch, over a second a file refused need not pay
        import tvm_ffi
    except ImportError as e:  # missing, or installed but broken: say which
        msg = f"tl_aot.load needs apache-tvm-ffi: pip install apache-tvm-ffi (import tvm_ffi: {e})"
        raise LibraryError(msg) from None
    real = path.resolve()
    st = real.stat()
    identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    seen = _loaded.get(str(real))
    target = real if seen is None else seen[1] if seen[0] == identity else _private_copy(real)
    try:
        module = tvm_ffi.load_module(str(target))  # an absolute path: dlopen searches the loader path for a bare name
    except Exception as e:  # tvm_ffi raises its own error kinds
        msg = f"cannot load {path}: {e}"
        raise LibraryError(msg) from e
    _loaded[str(real)] = (identity, target)
    return module


#: Library file -> (its identity when checked, its ElfInfo): a file is read and checked once, not per step of a load.
_checked_files: dict[str, tuple[_FileId, ElfInfo]] = {}


def _checked(path: Path):
    """:func:`check_library_file` of ``path``, reused while the file is the one checked (same inode, size, mtime)."""
    try:
        st = path.stat()
        identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        identity = None
    have = _checked_files.get(str(path))
    if identity is not None and have is not None and have[0] == identity:
        return have[1]
    info = check_library_file(path)
    if identity is not None:
        _checked_files[str(path)] = (identity, info)
    return info


def _private_copy(path: Path) -> Path:
    """``path`` copied to ``$TMPDIR/tl_aot-<uid>/<digest>/<name>`` (once per content), for loading a rebuilt library."""
    import shutil
    import tempfile

    from ..common.fileutil import write_file

    data = path.read_bytes()
    folder = Path(tempfile.gettempdir()) / f"tl_aot-{os.getuid()}" / hashlib.sha256(data).hexdigest()[:16]
    copy = folder / path.name
    if not copy.is_file() or copy.stat().st_size != len(data):
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{path.name}.{os.getpid()}"
        write_file(tmp, data)
        os.replace(tmp, copy)
        shutil.copymode(path, copy)
    return copy


def read_index(module, path: Path) -> ManifestIndex:
    """The manifest's index a library carries (:mod:`tl_aot.common.manifest_index`), checked against its digest and this runtime's ABI.

    What loading reads of the manifest: each entry's record stays unparsed in the library until
    asked for (:meth:`Library.signature`), checked then against the digest the index holds.
    """
    try:
        fn = module["tl_aot_manifest_index"]
    except Exception:  # noqa: BLE001 (tvm_ffi's own error kinds)
        raise without_index(module, path) from None
    return checked_index(str(fn()), _checked(path).manifest_sha256, path)


def read_manifest(module, path: Path) -> Manifest:
    """The whole manifest a library carries, checked against its index (itself checked: :func:`read_index`).

    For tools that read every entry of a loaded library; loading and serving read the index alone,
    and ``inspect`` reads the file without loading it (:func:`tl_aot.runtime.manifest_file.manifest_of_file`).
    """
    return checked_manifest(str(module["tl_aot_manifest"]()), read_index(module, path), path)


class Library:
    """A loaded library: one attribute per entry (a ``tvm_ffi.Function``), plus cleanup and metadata.

    Made from the manifest's index alone: an entry's function is looked up, and its record parsed,
    the first time it is used (an attribute, ``lib[name]``, :meth:`signature`), so a library of
    thousands of entries loads in milliseconds and never touches what a program does not call.
    """

    def __init__(self, path: Path, module, index: ManifestIndex) -> None:
        self._path = path
        self._module = module
        self._index = index
        self._exports = index.exports()  # exported name -> its IndexEntry rows
        self._rows = {e.name: e for e in index.entries}
        self._entries: dict[str, Callable[..., Any]] = {}  # exported name -> callable, resolved on first use
        self._records: dict[str, LoweredEntry] = {}  # entry name -> LoweredEntry, parsed on first use
        self._manifest: Manifest | None = None
        self._tunings: tuple[Tuning, ...] | None = None
        self._part: Any = None  # the library's tl_aot_manifest_part, looked up on first use
        self._cleanup = module["cleanup_module"]
        self._prepare = module["tl_aot_prepare"]

    @property
    def path(self) -> Path:
        return self._path

    @property
    def index(self) -> ManifestIndex:
        """The manifest's index: entries, their variants' request keys and archs, versions (what loading read)."""
        return self._index

    @property
    def manifest(self) -> Manifest:
        """The whole manifest, parsed on first use (for a library of many entries, what loading avoids)."""
        if self._manifest is None:
            self._manifest = checked_manifest(str(self._module["tl_aot_manifest"]()), self._index, self._path)
        return self._manifest

    @property
    def records_parsed(self) -> int:
        """How many entries' records this object has parsed: those used, never the rest."""
        return len(self._records)

    @property
    def entries(self) -> dict[str, Callable[..., Any]]:
        """Entry name → callable (resolving every entry: for a few, use attributes or ``lib[name]``)."""
        return {name: self._function(name) for name in self._exports}

    @property
    def tunings(self) -> tuple[Tuning, ...]:
        """The autotuner's recorded choices (:class:`Tuning`), parsed on first use."""
        if self._tunings is None:
            from ..common.metadata import Tuning
            from ..common.metadata_json import from_json

            span = self._index.tunings
            self._tunings = () if span is None else tuple(from_json(Tuning, t) for t in json.loads(self._text(span)))
        return self._tunings

    def signature(self, name: str) -> LoweredEntry:
        """The entry ``name`` (its first specialisation, if it has several: see :meth:`specialisations`)."""
        row = self._rows.get(name)
        if row is None:
            members = self._exports.get(name)
            if not members:
                raise KeyError(name)
            row = members[0]
        return self._record(row)

    def specialisations(self, name: str) -> tuple[LoweredEntry, ...]:
        """Every specialisation of entry ``name``, in the order they are tried (one for a plain entry)."""
        return tuple(self._record(row) for row in self._exports[name])

    def _record(self, row) -> LoweredEntry:
        """The manifest's record of the entry ``row`` names, sliced out of the manifest and parsed once."""
        have = self._records.get(row.name)
        if have is None:
            from ..common.metadata import LoweredEntry
            from ..common.metadata_json import from_json

            try:
                have = from_json(LoweredEntry, self._text(row.span))
            except LibraryError:
                raise
            except Exception as e:  # noqa: BLE001 (a record of another shape)
                why = f"{type(e).__name__}: {e}"
                msg = f"{self._path}: its manifest's record of {row.name!r} does not describe an entry ({why}); rebuild the library"
                raise LibraryError(msg) from None
            self._records[row.name] = have
        return have

    def _text(self, span) -> str:
        """The manifest's text at ``span``, checked against the digest the index holds for it."""
        if self._part is None:
            self._part = self._module["tl_aot_manifest_part"]
        text = str(self._part(span.offset, span.length))
        if hashlib.sha256(text.encode()).hexdigest() != span.sha256:
            msg = f"{self._path}: its manifest was altered after the build (a part's SHA-256 differs from its index's); rebuild the library"
            raise LibraryError(msg)
        return text

    def _function(self, name: str):
        """The callable of exported entry ``name``, looked up in the library on first use."""
        fn = self._entries.get(name)
        if fn is not None:
            return fn
        if name not in self._exports:
            raise KeyError(name)
        try:
            fn = self._module[name]
        except Exception:  # noqa: BLE001 (tvm_ffi's own error kinds)
            msg = f"{self._path}: its manifest names entry {name!r}, which the library does not export; rebuild the library"
            raise LibraryError(msg) from None
        first = self.specialisations(name)[0]  # one function per entry, however many specialisations
        if len(first.outputs) > 1:
            fn = _returning_tuple(fn, name)
        if first.outputs and not any(p.is_tensor for p in first.inputs):  # torch_ops.takes_no_tensor, without the JSON
            from ..common.metadata_json import to_json
            from . import torch_ops

            fn = torch_ops.allocating_call(fn, json.loads(to_json(first)))  # no input says where: torch's device, as the JIT
        self._entries[name] = fn
        return fn

    def __getattr__(self, name: str):
        """An entry, as an attribute (found on first use, then kept on the object)."""
        exports = self.__dict__.get("_exports")
        if exports is None or name not in exports:
            msg = f"{type(self).__name__!r} object has no attribute or entry {name!r}"
            raise AttributeError(msg)
        fn = self._function(name)
        object.__setattr__(self, name, fn)
        return fn

    def __getitem__(self, name: str):
        return self._function(name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._exports))

    def register_torch_ops(self, namespace: str | None = None, *, backend: str = "auto"):
        """Register the entries as ``torch.ops.<namespace>.<entry>`` (default namespace: the library's name).

        The ops have fake implementations derived from the manifest, so ``torch.compile(fullgraph=True)``
        traces through them; returns ``torch.ops.<namespace>``. Imports torch (only here). A library
        built with torch ops has a native companion beside it (``lib<name>_torch.so``): its C++ kernels
        serve the ops when torch can load it, else the Python registration does (``backend``: see
        :func:`tl_aot.runtime.torch_ops.register`; the namespace's ``backend`` attribute says which).
        """
        from . import torch_ops

        functions = {name: self._module[name] for name in self._exports}  # torch_ops wraps them itself
        companion = self.torch_companion
        manifest = json.loads(str(self._module["tl_aot_manifest"]()))
        return torch_ops.register(functions, manifest, namespace, companion=companion, backend=backend)

    @property
    def torch_companion(self) -> Path | None:
        """The library's native torch companion (``lib<name>_torch.so`` beside it), or None when it was built without."""
        p = self._path.with_name(self._path.name.removesuffix(".so") + "_torch.so")
        return p if p.is_file() else None

    def check_images(self, arch: str) -> str:
        """Whether the images of ``arch`` (``"sm_90a"``, ``"sm_80_ptx"``) are at hand: "" if so, else what to install.

        A library built with image packs keeps each arch's images in ``lib<name>.<arch>.tlpack``
        beside it; this reads and checks them as an entry's first call would (no GPU needed): a
        missing pack names what to install, a pack of another build is refused.
        """
        return str(self._module["tl_aot_check_images"](str(arch)))

    def prepare(self, device: int = 0) -> None:
        """Load every entry's kernels on ``device`` now (do this before CUDA graph capture)."""
        self._prepare(int(device))

    def cleanup(self) -> int:
        """Unload modules and release primary contexts (``cleanup_module``); returns the last CUresult."""
        return int(self._cleanup())

    cleanup_module = cleanup

    def __repr__(self) -> str:
        names = ", ".join(self._exports)
        return f"<tl_aot.Library {self._index.library} ({names}) from {self._path}>"


def _returning_tuple(fn, name: str):
    """``fn`` returning a tuple where the library returns a ``tvm_ffi.Array`` of outputs (None stays None)."""

    def call(*args):
        out = fn(*args)
        return None if out is None else tuple(out)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"{name}: returns its outputs as a tuple (a call passing every parameter returns None)."
    return call


def load(path: str | os.PathLike) -> Library:
    """Load ``lib<name>.so`` built by tl_aot and check that this runtime can drive it.

    Raises :class:`tl_aot.common.errors.LibraryError` for a missing file, a non-tl_aot library, a
    library built with an incompatible launcher ABI, or one that needs a newer NVIDIA driver than
    this machine's (the message names the CUDA version it needs and the two ways out). Loading a path again after the library there
    was rebuilt (in this process or another) returns the new library; objects loaded before keep
    the old one.
    """
    path = Path(path)
    with gc_paused():  # the index's ~50 objects per entry hold no cycles: no collector pass over the process's objects
        module = _load_module(path)
        index = read_index(module, path)
        _check_driver(module, path)
        return Library(path, module, index)


def _check_driver(module, path: Path) -> None:
    """Refuse a library this machine's NVIDIA driver cannot load, with the library's own message.

    The launcher runtime makes the check (``tl_aot_driver_check``: the driver's CUDA version against
    the floor recorded at build time, read without initialising CUDA); a machine without a driver
    passes (the library still loads and describes itself there).
    """
    try:
        check = module["tl_aot_driver_check"]
    except Exception:  # noqa: BLE001 (a library built before the check existed)
        return
    why = str(check())
    if why:
        raise LibraryError(f"{path}: {why}")
