"""Fault injection for builds, the way SQLite tests every I/O call: fail the N-th file-system operation.

:class:`FaultFS` patches the file-system primitives of this process (``open``, ``os.open``,
writes to files opened so, ``os.replace`` / ``rename`` / ``link`` / ``mkdir`` / ``unlink`` /
``rmdir``, ``shutil.copyfile``) for operations on paths under one folder. Without a
target it records the trace of a build; with one it makes that operation fail with a chosen
``errno`` (a write fails after writing half its bytes: a short write on a full disk).

Faults look as the OS makes them: an ``open`` or ``rename`` names its path, but a ``write`` to a
file object or its ``close`` (where a full disk refuses a small file: the data sat in Python's
buffer) raises an :class:`OSError` with no file name, so tl_aot must say which file itself.

Which operations exist is found, not listed: a hook on CPython's audit events (:func:`sys.addaudithook`:
every ``os`` and ``shutil`` call that touches a path raises one) sees every file-system call of the
build. The kinds the patches above count are skipped there, those in :data:`AUDITED` are counted
and failed from the hook itself, and any other event naming a path under the folder is put in
:attr:`FaultFS.unknown`: the fault matrix fails while a build does something FaultFS cannot fail.

An operation is named by its kind, its path with pids and temporary-name suffixes masked, and
its occurrence among operations of that name: the same operation in two runs of one build even
when threads interleave differently.

:class:`ToolMemo` replays the build's tools (lowering, nvcc, host compiles, links, image
embedding) from the first run, with the fault injection paused, so a build costs tenths of a
second and every operation of it can be failed in turn.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import hashlib
import io
import os
import pickle
import re
import shutil
import sys
import threading
from pathlib import Path

__all__ = ["FaultFS", "ToolMemo", "FAULTS", "AUDITED", "Op"]

#: What each kind of operation can be failed with.
FAULTS = {
    "open-write": (errno.ENOSPC, errno.EROFS, errno.EIO, errno.ENAMETOOLONG),
    "open-read": (errno.EIO,),
    "write": ("short", errno.EIO),
    "replace": (errno.EROFS, errno.EIO, errno.ENOSPC),
    "link": (errno.EROFS, errno.EIO),
    "mkdir": (errno.ENOSPC, errno.EROFS, errno.ENAMETOOLONG),
    "unlink": (errno.EROFS, errno.EIO),
    "copy": ("short", errno.EIO),
    "close": (errno.ENOSPC,),  # the buffered data reaches the disk only now; the file is left cut short
    "chmod": (errno.EROFS, errno.EPERM),
    "utime": (errno.EROFS,),
    "truncate": (errno.EIO,),
}

#: Audit events FaultFS's patches count (the hook leaves them to the patches).
PATCHED = frozenset({"open", "os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.link", "shutil.copyfile"})

#: Audit events the hook counts and fails itself: event -> (kind, index of the path argument).
AUDITED = {
    "os.chmod": ("chmod", 0),
    "os.chown": ("chmod", 0),
    "os.utime": ("utime", 0),
    "os.truncate": ("truncate", 0),
    "os.symlink": ("link", 1),
}

#: Audit events that name a path but change nothing on their own (reads of folders, and calls made of
#: the counted ones: ``shutil.rmtree`` is its unlinks, ``tempfile.mkstemp`` its ``os.open``).
NOT_CHANGES = frozenset(
    {
        "os.listdir",
        "os.scandir",
        "os.chdir",
        "os.walk",
        "os.fwalk",
        "glob.glob",
        "glob.glob/2",
        "pathlib.Path.glob",
        "pathlib.Path.rglob",
        "os.getxattr",
        "os.listxattr",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "subprocess.Popen",
        "shutil.rmtree",
        "shutil.copytree",
        "shutil.copymode",
        "shutil.copystat",
        "shutil.move",
        "tempfile.mkstemp",
        "tempfile.mkdtemp",
        "import",
        "exec",
        "compile",
        "ctypes.dlopen",
        "fcntl.flock",
        "fcntl.fcntl",
    }
)

_ACTIVE: list = []  # the FaultFS whose context is entered (the audit hook, installed once, serves it)
_HOOKED = False


def _audit(event: str, args: tuple) -> None:
    if not _ACTIVE or event in PATCHED or event in NOT_CHANGES:
        return
    fs = _ACTIVE[-1]
    if event in AUDITED:
        kind, at = AUDITED[event]
        if len(args) > at and isinstance(args[at], (str, os.PathLike)):
            fs.hit(kind, args[at])
        return
    for a in args:
        if isinstance(a, (str, os.PathLike)) and fs._mask(a) is not None and not getattr(fs._paused, "on", False):
            fs.unknown.add(event)


Op = tuple  # (kind, masked path, occurrence)

_TID_NAME = re.compile(r"\.<pid>\.\d{6,}")
_TMP_NAME = re.compile(r"\.[a-z0-9_]{8}(?=(\.tmp)?$|/)")


class _Writer:
    """A file object whose writes are operations (the rest delegates to the real file)."""

    def __init__(self, fs: FaultFS, f, path: str) -> None:
        self._fs, self._f, self._path = fs, f, path

    def write(self, data):
        self._fs.hit("write", self._path, partial=lambda: self._f.write(data[: len(data) // 2]), named=False)
        return self._f.write(data)

    def close(self):
        if self._f.closed:
            return
        try:
            self._fs.hit("close", self._path, partial=self._lose_buffer, named=False)
        finally:
            self._f.close()

    def _lose_buffer(self):
        """What a close on a full disk leaves: the file cut short of what was written (here, to half)."""
        self._f.flush()
        with self._fs.paused():
            size = os.path.getsize(self._path)
            os.truncate(self._path, size // 2)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __iter__(self):
        return iter(self._f)

    def __getattr__(self, name):
        return getattr(self._f, name)


class _Patching:
    """Module attributes replaced while the context is entered, put back on exit (latest first)."""

    def __init__(self) -> None:
        self._saved: list = []

    def _patch(self, patches) -> None:
        for mod, name, fn in patches:
            self._saved.append((mod, name, getattr(mod, name)))
            setattr(mod, name, fn)

    def __exit__(self, *exc) -> None:
        for mod, name, fn in reversed(self._saved):
            setattr(mod, name, fn)
        self._saved.clear()
        if self in _ACTIVE:
            _ACTIVE.remove(self)


class FaultFS(_Patching):
    """Record, or fail, the file-system operations of this process on paths under ``root``."""

    def __init__(self, root: Path, *, target: Op | None = None, fault=None) -> None:
        self.root = str(Path(root).resolve())
        self.target, self.fault = target, fault
        self.trace: list[Op] = []
        self.unknown: set[str] = set()  # audit events on paths under root that FaultFS cannot fail
        self.fired: tuple | None = None  # (op, path, fault) once the target was hit
        self._seen: dict = {}
        self._lock = threading.Lock()
        self._paused = threading.local()
        super().__init__()

    # --- counting ---------------------------------------------------------------------------
    def _mask(self, path: str) -> str | None:
        try:
            p = os.path.abspath(os.fspath(path))
        except TypeError:
            return None
        if not p.startswith(self.root + "/") and p != self.root:
            return None
        rel = p[len(self.root) :]
        rel = rel.replace(f".{os.getpid()}.", ".<pid>.")
        rel = _TID_NAME.sub(".<pid>.<tid>", rel)  # a private folder named by thread: which thread compiles varies
        return _TMP_NAME.sub(".<tmp>", rel)

    def hit(self, kind: str, path, *, partial=None, named: bool = True) -> None:
        """Count one operation; raise the fault if it is the target (after ``partial`` for a short write).

        ``named``: the error names the path, as the OS's does for a call given one; a write to a
        file object, or its close, raises an error that names none.
        """
        if getattr(self._paused, "on", False):
            return
        masked = self._mask(path) if isinstance(path, (str, os.PathLike)) else None
        if masked is None:
            return
        with self._lock:
            n = self._seen.get((kind, masked), 0)
            self._seen[(kind, masked)] = n + 1
            op = (kind, masked, n)
            self.trace.append(op)
            fire = self.fired is None and op == self.target
            if fire:
                self.fired = (op, os.fspath(path), self.fault)
        if fire:
            code = self.fault
            if code == "short" or kind == "close":
                if partial is not None:
                    partial()
                code = errno.ENOSPC if code == "short" else code
            if not named:
                raise OSError(code, os.strerror(code))
            raise OSError(code, os.strerror(code), os.fspath(path))

    @contextlib.contextmanager
    def paused(self):
        """No operation counts or fails inside (a tool's own work, replayed)."""
        before = getattr(self._paused, "on", False)
        self._paused.on = True
        try:
            yield
        finally:
            self._paused.on = before

    # --- patching ---------------------------------------------------------------------------
    def __enter__(self) -> FaultFS:
        global _HOOKED
        if not _HOOKED:
            sys.addaudithook(_audit)  # for good: a hook cannot be removed, and does nothing while no FaultFS is entered
            _HOOKED = True
        _ACTIVE.append(self)
        real_open, real_os_open, real_fdopen = builtins.open, os.open, os.fdopen
        fs = self
        fds: dict = {}  # fd -> the path os.open opened it for writing (os.fdopen's writes name it)

        def fopen(file, mode="r", *a, **k):
            path = file if isinstance(file, (str, os.PathLike)) else None
            writing = any(c in mode for c in "wax+")
            if path is not None:
                fs.hit("open-write" if writing else "open-read", path)
            f = real_open(file, mode, *a, **k)
            return _Writer(fs, f, os.fspath(path)) if writing and path is not None and not getattr(fs._paused, "on", False) else f

        def osopen(path, flags, *a, **k):
            writing = flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
            fs.hit("open-write" if writing else "open-read", path)
            fd = real_os_open(path, flags, *a, **k)
            if writing:
                fds[fd] = os.fspath(path)
            return fd

        def fdopen(fd, mode="r", *a, **k):
            f = real_fdopen(fd, mode, *a, **k)
            path = fds.pop(fd, None)
            return _Writer(fs, f, path) if path is not None and any(c in mode for c in "wax+") else f

        def wrap(kind, fn, arg=0):
            def patched(*a, **k):
                fs.hit(kind, a[arg] if len(a) > arg else next(iter(k.values()), None))
                with fs.paused():
                    return fn(*a, **k)

            return patched

        def copy(src, dst, *a, **k):
            fs.hit("open-read", src)
            fs.hit("copy", dst, partial=lambda: Path(dst).write_bytes(Path(src).read_bytes()[:4096]))
            with fs.paused():
                return real_copy(src, dst, *a, **k)

        real_copy = shutil.copyfile
        patches = [
            (builtins, "open", fopen),
            (io, "open", fopen),
            (os, "open", osopen),
            (os, "fdopen", fdopen),
            (os, "replace", wrap("replace", os.replace, 1)),
            (os, "rename", wrap("replace", os.rename, 1)),
            (os, "link", wrap("link", os.link, 1)),
            (os, "mkdir", wrap("mkdir", os.mkdir)),
            (os, "unlink", wrap("unlink", os.unlink)),
            (os, "remove", wrap("unlink", os.remove)),
            (os, "rmdir", wrap("unlink", os.rmdir)),
            (shutil, "copyfile", copy),
        ]
        self._patch(patches)
        return self


class ToolMemo(_Patching):
    """Replay lowering, nvcc, host compiles, image embedding and links from their first run.

    Keys hold every input that differs between the builds of one test (sources, commands, the
    bytes of the files a command names); a replay writes the tool's output file as the tool would
    have, with the fault injection of ``fs`` paused (it is the tool's write, not tl_aot's).
    """

    def __init__(self) -> None:
        self.fs: FaultFS | None = None
        self._store: dict = {}
        super().__init__()

    def _pause(self):
        return self.fs.paused() if self.fs is not None else contextlib.nullcontext()

    def __enter__(self) -> ToolMemo:
        import tl_aot.common.errors
        import tl_aot.cuda.device_image
        import tl_aot.cuda.host_objects
        import tl_aot.cuda.toolchain
        import tl_aot.lower.lower
        import tl_aot.pipeline.images

        memo = self
        lower, compile_image, run = (
            tl_aot.lower.lower.lower_variant,
            tl_aot.cuda.device_image.compile_image,
            tl_aot.cuda.toolchain.run,
        )

        def lower_variant(spec, arch, *, native_log=None):
            key = ("lower", pickle.dumps((spec, str(arch))))
            if key not in memo._store:
                memo._store[key] = lower(spec, arch, native_log=native_log)
            return memo._store[key]

        def image(arch, workdir, stem, source_text, options=(), *, what, path_map=()):
            key = ("nvcc", str(arch), stem, source_text, tuple(options), tuple(map(tuple, path_map)))
            if key not in memo._store:
                with memo._pause():
                    memo._store[key] = compile_image(arch, workdir, stem, source_text, options, what=what, path_map=path_map)
            with memo._pause():
                Path(workdir).mkdir(parents=True, exist_ok=True)
                (Path(workdir) / f"{stem}.cu").write_text(source_text)
            return memo._store[key]

        def images(arch, workdir, units, options=(), *, path_map=(), on_done=None, on_batch=None):  # each unit's own: no batch
            out = {}
            for u in units:
                try:
                    out[u.stem] = image(arch, workdir, u.stem, u.source, options, what=u.what, path_map=path_map)
                except tl_aot.common.errors.TlAotError as e:
                    out[u.stem] = e
                if on_done is not None:
                    on_done(u.stem, out[u.stem])
            return out

        def tool(cmd, *, what, cwd=None, env=None):
            if "-o" not in cmd:
                return run(cmd, what=what, cwd=cwd, env=env)
            at = cmd.index("-o") + 1
            out = Path(cwd or ".") / cmd[at]
            named = [*cmd[:at], "<output>", *cmd[at + 1 :]]  # a temporary output's name holds a pid and thread id
            if cwd is not None:  # a host object compiles in a private folder named by pid and thread (its prefix map names it)
                named = [a.replace(str(cwd), "<cwd>") for a in named]
            with memo._pause():
                key = ("run", tuple(named), *(_digest(Path(cwd or ".") / a) for a in cmd if a != cmd[at]))
                if key not in memo._store:
                    run(cmd, what=what, cwd=cwd, env=env)
                    memo._store[key] = out.read_bytes()
                else:
                    out.write_bytes(memo._store[key])
            return ""

        self._patch(
            (
                (tl_aot.lower.lower, "lower_variant", lower_variant),
                (tl_aot.cuda.device_image, "compile_image", image),
                (tl_aot.cuda.device_image, "compile_images", images),
                (tl_aot.pipeline.images, "compile_image", image),
                (tl_aot.pipeline.images, "compile_images", images),
                # every kept compile and link too (the launcher, manifest and runtime objects, the images' object,
                # whose source names each image's digest, and the link): toolchain.run_making calls run here
                (tl_aot.cuda.toolchain, "run", tool),
                (tl_aot.cuda.host_objects, "run", tool),  # compile_apart (it imports run by name)
            )
        )
        return self


def _digest(path) -> str:
    """SHA-256 of a file a command names ('' for an argument that is no file)."""
    try:
        p = Path(path)
        return hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
    except (OSError, ValueError):
        return ""
