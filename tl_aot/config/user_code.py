"""Find and import the user's kernel file, and the local modules it depends on.

Dependencies are found statically (``ast``), so cache keys and depfiles are computed without
importing TileLang: a no-op rebuild never pays for the compiler's import.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ..common.errors import LoweringError
from ..common.fileutil import StrPath, file_digest
from ..common.user_frames import format_user_error
from .import_guard import guarded_import
from .source_imports import from_source, import_from_source

__all__ = [
    "local_dependencies",
    "import_kernel_file",
    "display_path",
    "project_root",
    "SourceSnapshot",
    "snapshot_files",
    "snapshot_sources",
    "function_line",
    "touched_cuda",
]

#: Files that mark the root of a project (the folder a kernel path is recorded relative to).
_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def _package_root(path: Path) -> Path:
    """The directory that must be on sys.path to import ``path`` (above its outermost package)."""
    d = path.parent
    while (d / "__init__.py").exists() and d.parent != d:
        d = d.parent
    return d


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(name: str, level: int, current: Path, root: Path) -> list[Path]:
    """Files a (possibly relative) import may refer to, if they are local to ``root``."""
    if level:
        base = current.parent
        for _ in range(level - 1):
            base = base.parent
    else:
        base = root
    parts = name.split(".") if name else []
    out = []
    for i in range(len(parts), -1, -1) if parts else [0]:
        p = base.joinpath(*parts[:i]) if i else base
        for cand in (p.with_suffix(".py") if i else None, p / "__init__.py"):
            if cand is not None and cand.is_file():
                out.append(cand.resolve())
        if out:
            break
    return out


def _package_inits(path: Path, root: Path) -> list[Path]:
    """The ``__init__.py`` of every package above ``path`` (importing it as a module runs them)."""
    out = []
    d = path.parent
    while d != root and (d / "__init__.py").is_file():
        out.append((d / "__init__.py").resolve())
        d = d.parent
    return out


def module_file(name: str, root: Path) -> Path | None:
    """The local file of module ``name`` under ``root`` (``pkg/mod.py`` or ``pkg/mod/__init__.py``), if any."""
    base = root.joinpath(*name.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand.resolve()
    return None


def local_dependencies(path: str | Path, imports: Iterable[str] = ()) -> list[Path]:
    """Every local ``.py`` file ``path`` imports, transitively (not including ``path``), sorted.

    The packages' ``__init__.py`` files above it count (importing the module runs them), and so
    do the local modules named in ``imports`` (a spec's modules imported first) and theirs.
    """
    path = Path(path).resolve()
    root = _package_root(path)
    seen: set[Path] = {path}
    todo = [path, *_package_inits(path, root)]
    for name in imports:
        f = module_file(name, root)
        if f is not None:
            todo += [f, *_package_inits(f, root)]
    seen.update(todo)
    while todo:
        cur = todo.pop()
        try:
            tree = ast.parse(cur.read_bytes(), filename=str(cur))
        except (SyntaxError, OSError, ValueError):
            continue  # reported when the file is imported for real
        for node in ast.walk(tree):
            targets: list[Path] = []
            if isinstance(node, ast.Import):
                for alias in node.names:
                    targets += _resolve(alias.name, 0, cur, root)
            elif isinstance(node, ast.ImportFrom):
                targets += _resolve(node.module or "", node.level, cur, root)
                for alias in node.names:  # from pkg import submodule
                    targets += _resolve(f"{node.module}.{alias.name}" if node.module else alias.name, node.level, cur, root)
            for t in targets:
                if t not in seen and root in t.parents:
                    seen.add(t)
                    todo.append(t)
    seen.discard(path)
    return sorted(seen)


def project_root(path: str | Path) -> Path:
    """The project ``path`` belongs to: the nearest folder above it with a project marker.

    A marker is ``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git``; without one, the
    project is the folder above the outermost package.
    """
    p = Path(path).resolve()
    for d in p.parents:
        if any((d / m).exists() for m in _PROJECT_MARKERS):
            return d
    return _package_root(p)


def display_path(path: str | Path) -> str:
    """``path`` as the library records it: relative to its project root, never to the working dir.

    The result depends only on the source tree, so builds from any working or output folder embed
    the same text (reproducible libraries) and no build-machine path reaches the library.
    """
    p = Path(path).resolve()
    return p.relative_to(project_root(p)).as_posix()


def function_line(path: str | Path, name: str) -> int | None:
    """Line of the top-level ``def name`` (or assignment to ``name``) in ``path``, found without importing it.

    A dotted ``name`` (``Ops.gemm``) is looked for in the bodies of the classes it names.
    """
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (SyntaxError, OSError, ValueError):
        return None
    body: list[ast.stmt] = tree.body
    *outer, last = name.split(".")
    for part in outer:
        cls = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if cls is None:
            return None
        body = cls.body
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == last:
            return node.lineno
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == last for t in node.targets):
            return node.lineno
    return None


@contextlib.contextmanager
def _on_sys_path(d: Path) -> Iterator[None]:
    entry = str(d)
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    try:
        yield
    finally:
        if added and entry in sys.path:
            sys.path.remove(entry)


#: Kernel file → (fingerprint of it and its local modules, the module imported from them).
_imported: dict[str, tuple[str, ModuleType]] = {}


#: One file of a snapshot: ``(path, mtime_ns, size, sha256 or "missing")``.
FileStat = tuple[str, int, int, str]


@dataclass(frozen=True)
class SourceSnapshot:
    """A kernel file and the local modules it imports, as read once: path, mtime, size and SHA-256 of each.

    The one fingerprint of a kernel's Python sources: cache keys, tuning records and re-imports
    all use it, and a build compares it after lowering to know the kernel it lowered is the one it
    keyed (:meth:`changed`).
    """

    files: tuple[FileStat, ...]  # the kernel file first
    project: Path | None = None  # the kernel file's project (:func:`project_root`), when it was there: what its paths are relative to

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(Path(f[0]) for f in self.files)

    def digest(self) -> str:
        """16 hex digits over each file's name and contents (not its folder: copies of a project agree)."""
        h = hashlib.sha256()
        for path, _, _, digest in self.files:
            h.update(Path(path).name.encode())
            h.update(digest.encode() if digest != "missing" else b"missing")
        return h.hexdigest()[:16]

    def changed(self) -> tuple[str, ...]:
        """The files that differ now from when the snapshot was taken (contents, size or mtime)."""
        now = snapshot_files(self.paths)
        return tuple(a[0] for a, b in zip(self.files, now.files) if a != b)


def snapshot_files(paths: Iterable[StrPath]) -> SourceSnapshot:
    """Read each file once: its stat and its digest (the stat is taken first, so an edit during the read shows).

    A file that is not there is ``missing``; one that cannot be read (an I/O error, no permission)
    is a :class:`~tl_aot.common.errors.FilesystemError` naming it, never taken for an edit.
    """
    from ..common.fs_errors import fs_error

    out: list[FileStat] = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((str(p), st.st_mtime_ns, st.st_size, file_digest(p)))
        except (FileNotFoundError, NotADirectoryError):
            out.append((str(p), 0, 0, "missing"))
        except OSError as e:
            raise fs_error(e, "read", p) from None
    return SourceSnapshot(tuple(out))


def snapshot_sources(path: str | Path, imports: Iterable[str] = ()) -> SourceSnapshot:
    """The snapshot of kernel file ``path`` and the local modules it (and ``imports``) import, with its project root."""
    path = Path(path).resolve()
    project = project_root(path) if path.is_file() else None
    local = local_dependencies(path, imports)
    return SourceSnapshot(snapshot_files([path, *local]).files, project)


def _fingerprint(files: set[str]) -> str:
    """Digest of the contents of ``files``: what an imported kernel module was made from."""
    return "\n".join(f"{f}={d}" for f, _, _, d in snapshot_files(sorted(files)).files)


def _forget(files: set[str], root: Path, names: list[str]) -> None:
    """Drop the modules imported from ``files`` (by ``names`` or their module path) so they are read again.

    A package of the same name imported from another folder (a copy of the project, another
    checkout) is dropped too, with its submodules: the kernel file must be imported from its own.
    """
    candidates = set(names)
    for f in files:
        with contextlib.suppress(ValueError):
            candidates.add(_module_name(Path(f), root))
    ours = set()
    for f in files:
        with contextlib.suppress(ValueError):
            ours.add(_module_name(Path(f), root))
    for name in candidates:
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None)
        # ours, to be read again; or a module of the same name from another folder, which would shadow ours
        if module is not None and file and (str(Path(file).resolve()) in files or name in ours):
            del sys.modules[name]
    tops = {c.split(".")[0] for c in candidates if "." in c or (root / c).is_dir()}
    for top in tops:
        module = sys.modules.get(top)
        file = getattr(module, "__file__", None)
        if module is not None and file and root not in Path(file).resolve().parents:
            for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
                del sys.modules[name]


_CUDA_WORDS = re.compile(
    r"CUDA|cuda|NVIDIA driver|nvidia-smi|libcuda|cudart|no GPU|device propert|cuInit|cudaGetDevice|torch\\.cuda", re.ASCII
)


def touched_cuda(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) reads like code that needed a GPU or the CUDA runtime."""
    seen = 0
    cur: BaseException | None = exc
    while cur is not None and seen < 8:
        if _CUDA_WORDS.search(f"{type(cur).__name__}: {cur}"):
            return True
        cur = cur.__cause__ or cur.__context__
        seen += 1
    return False


def import_kernel_file(
    path: str | Path, *, entry: str = "", arch: str = "", fresh: bool = False, imports: Sequence[str] = ()
) -> ModuleType:
    """Import the user's kernel file as a module (packages keep their relative imports).

    One import serves every arch of a build; if the file or a local module it imports changes,
    the next call imports them afresh (a long-lived process never lowers stale code under a new
    cache key). ``fresh`` imports them afresh regardless (module state a build must not reuse).
    ``imports`` are modules imported first, under the same import path (registries they fill).
    """
    path = Path(path).resolve()
    if not path.is_file():
        msg = f"entry {entry!r}: kernel source {path} does not exist"
        raise LoweringError(msg)
    root = _package_root(path)
    files = {str(path)} | {str(p) for p in local_dependencies(path, imports)}
    fingerprint = _fingerprint(files) + "\n" + ",".join(imports)
    hit = _imported.get(str(path))
    if hit is not None and hit[0] == fingerprint and not fresh:
        return hit[1]
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    private = f"_tl_aot_kernel_{path.stem}_{digest}"
    _forget(files, root, [private])
    import_from_source(files)  # their text, never their cached bytecode: a same-second edit of one length leaves it stale
    with _on_sys_path(root), guarded_import(path, files, entry=entry, arch=str(arch)):
        try:
            for name in imports:
                importlib.import_module(name)
            if root != path.parent:
                module = importlib.import_module(_module_name(path, root))
            else:
                spec = importlib.util.spec_from_file_location(private, path)
                if spec is None or spec.loader is None:
                    msg = f"Python has no loader for {path.name}"
                    raise ImportError(msg)
                from_source(spec)  # its text, never its cached bytecode
                module = importlib.util.module_from_spec(spec)
                sys.modules[private] = module
                try:
                    spec.loader.exec_module(module)
                except BaseException:
                    sys.modules.pop(private, None)
                    raise
            _imported[str(path)] = (fingerprint, module)
            return module
        except Exception as e:
            where = format_user_error(e, files) or str(path)
            msg = f"entry {entry!r} ({arch}): cannot import {path.name}\n  at {where}\n  {type(e).__name__}: {e}"
            if touched_cuda(e):
                msg += (
                    f"\n  {path.name} ran GPU code when it was imported; tl_aot imports kernel files on the build "
                    'machine, which may have no GPU. Move that code under `if __name__ == "__main__":` or into a '
                    "function (TileLang's own device queries, tilelang.carver.arch.driver, are answered from --device)"
                )
            raise LoweringError(msg) from e


def user_function(fn: Any) -> Any:
    """The user's Python function behind ``fn`` (a ``@tilelang.jit`` body, a tuner's ``fn``, or a plain factory)."""
    return getattr(fn, "orig_func", None) or fn


def source_digest(fn: Any) -> str:
    """16 hex digits of the SHA-256 of ``fn``'s source ('' when it has none)."""
    try:
        return hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()[:16]
    except (OSError, TypeError):
        return ""
