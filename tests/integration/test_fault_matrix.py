"""Every file-system operation of a build, failed in turn: the SQLite way of testing I/O errors.

For each build kind (the CLI with ``FILE.py:FUNCTION``, a spec file with a header folder and a
depfile, ``setuptools build_ext``, ``build --capture`` of a JIT capture record), a previous build
of the project is in place (its library, header and cache: ``N=256``); the build under test changes the kernel (``N=512``), so success and
failure tell apart. Its trace of file-system operations is recorded once; then each operation is
failed with each fault of its kind (see :data:`faultfs.FAULTS`; ``TL_AOT_FAULT_MATRIX=quick``:
one fault per operation, the kinds taken in turn across the trace) and after each:

* the build ends with exit 0, or non-zero with one message that names the path (or a folder
  holding it) and the cause, and no traceback;
* on failure, the previous library and header are byte-identical; on success, they are the
  clean build's;
* every cache entry left is verified (digests, and the image a complete cubin of its kernels);
* the same build with the fault gone gives the clean build's library and header, byte for byte.

The operations are those the build does, found by tracing it (every ``os`` / ``shutil`` call on a
path is seen through CPython's audit hook, and one FaultFS cannot fail stops the test), so a new
module's writes are in the matrix without an edit here. A write's or close's fault carries no
file name, as a full disk's does: the message must still name the file.

Tools are replayed (:class:`faultfs.ToolMemo`), so one iteration costs tenths of a second.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import io
import os
import re
import shutil
import sys
from pathlib import Path
from unittest import mock

import pytest
from support.faultfs import FAULTS, FaultFS, ToolMemo
from support.helpers import ADD_KERNEL as KERNEL
from support.helpers import in_folder, tl_aot_cli
from support.snapshot import restore

pytest.importorskip("tilelang")


SPEC = """[library]
name = "fm"
archs = ["90a"]

[[entry]]
name = "add"
source = "k.py"
function = "add"
args = {{ N = {n} }}
"""


def _cli(root: Path, n: int) -> tuple[int, str]:
    from tl_aot.frontends import cli

    args = ["build", "k.py:add", "--arch", "90a", "--arg", f"N={n}", "-o", "out"]
    return _call(lambda: cli.main([*args, "--cache-dir", "cache", "-j", "1", "-q"]))


def _spec(root: Path, n: int) -> tuple[int, str]:
    from tl_aot.frontends import cli

    args = ["build", "--spec", "kernels.toml", "-o", "out", "--header-dir", "include", "--depfile", "out/fm.d"]
    return _call(lambda: cli.main([*args, "--cache-dir", "cache", "-j", "1", "-q"]))


#: A workload whose JIT compiles are captured (``tl_aot capture --device``: nothing compiled, no GPU).
WORKLOAD = """import sys
import tilelang
from k import add

tilelang.jit(add)(int(sys.argv[1]))
"""


def _capture(root: Path, n: int) -> tuple[int, str]:
    from tl_aot.frontends import cli

    args = ["build", "--capture", f"rec{n}.json", "--arch", "90a", "--name", "cap", "-o", "out"]
    return _call(lambda: cli.main([*args, "--cache-dir", "cache", "-j", "1", "-q"]))


def _record(work: Path, n: int) -> None:
    """``rec<n>.json``: the capture of the workload's JIT compile of ``add(N=n)`` (a subprocess, once per size)."""

    (work / "workload.py").write_text(WORKLOAD)
    workload = [sys.executable, "workload.py", str(n)]
    proc = tl_aot_cli("capture", "-o", f"rec{n}.json", "--device", "H100-SXM", "--", *workload, cwd=work, env=dict(os.environ))
    assert proc.returncode == 0 and "1 kernels" in proc.stdout, proc.stdout + proc.stderr


#: The installed distributions' entry points, by query: read once for the module (see :func:`_entry_points`).
_ENTRY_POINTS: dict = {}


def _entry_points(**params):
    """``importlib.metadata.entry_points``, each query answered from its first reading.

    setuptools reads every installed distribution's entry points several times per ``setup()``:
    half of a run of the matrix's setuptools kind, here, on files outside the build folder (never
    in its trace, never failed), which do not change while the module runs.
    """
    key = tuple(sorted(params.items()))
    if key not in _ENTRY_POINTS:
        _ENTRY_POINTS[key] = _read_entry_points(**params)
    return _ENTRY_POINTS[key]


_read_entry_points = importlib.metadata.entry_points


def _setuptools(root: Path, n: int) -> tuple[int, str]:
    import setuptools

    def build():
        from tl_aot.frontends.setuptools import TileLangExtension, build_ext

        ext = TileLangExtension("fmpkg._k", entries=[{"name": "add", "source": "k.py", "function": "add", "args": {"N": n}}], archs=["90a"])
        with mock.patch.object(importlib.metadata, "entry_points", _entry_points):
            setuptools.setup(
                name="fmpkg",
                version="0",
                packages=[],
                install_requires=["apache-tvm-ffi"],
                ext_modules=[ext],
                cmdclass={"build_ext": build_ext},
                script_args=["-q", "build_ext", "--build-lib", "blib", "--build-temp", "btmp"],
            )
        return 0

    return _call(build)


KINDS = {
    # build kind: (build, the library and header it publishes)
    "cli": (_cli, ("out/libadd.so", "out/add.h")),
    "spec": (_spec, ("out/libfm.so", "include/fm.h")),
    "setuptools": (_setuptools, ("blib/fmpkg/lib_k.so", "blib/fmpkg/_k.py")),
    "capture": (_capture, ("out/libcap.so", "out/cap.h")),
}


def _call(fn) -> tuple[int, str]:
    """Run a front end in this process: (exit status, what it printed on stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = fn()
        except SystemExit as e:  # setuptools: "error: ..." on failure
            code = e.code
            if isinstance(code, str):
                err.write(code + "\n")
                code = 1
        except BaseException:  # noqa: BLE001 (a traceback is what the matrix must never see)
            import traceback

            err.write(traceback.format_exc())
            code = 99
    return int(code or 0), err.getvalue()


def _outputs(root: Path, kind: str) -> dict:
    return {p: (root / p).read_bytes() if (root / p).is_file() else None for p in KINDS[kind][1]}


def _unverified(cache: Path) -> list:
    """Cache entries whose digests or image do not check out."""
    from tl_aot.common.metadata import LoweredVariant
    from tl_aot.common.metadata_json import from_json
    from tl_aot.cuda.image_check import variant_image_problem

    bad = []
    for d in cache.iterdir() if cache.is_dir() else ():
        if d.name.startswith("."):
            continue
        try:
            text, image = (d / "variant.json").read_bytes(), (d / "image.bin").read_bytes()
            ok = (d / "variant.sha256").read_text().strip() == hashlib.sha256(text).hexdigest()
            ok = ok and (d / "image.sha256").read_text().strip() == hashlib.sha256(image).hexdigest()
            ok = ok and variant_image_problem(from_json(LoweredVariant, text.decode()), image) is None
        except (OSError, ValueError):
            ok = False
        if not ok:
            bad.append(d.name)
    return bad


@pytest.fixture(scope="module")
def memo():
    with ToolMemo() as m:
        yield m


@pytest.fixture(scope="module")
def states(memo, tmp_path_factory):
    """Per build kind: its build folder, a copy of it built at N=256 (the previous build), and the clean N=512 outputs.

    Every run of a kind happens in the one build folder (a fresh copy of the previous build each
    time), so operations have the same paths in every run and the replayed tools the same inputs.
    """
    made = {}
    for kind, (build, _) in KINDS.items():
        base = tmp_path_factory.mktemp(f"faults-{kind}")
        work = base / "w"
        work.mkdir()
        (work / "k.py").write_text(KERNEL)
        (work / "tmp").mkdir()
        (work / "kernels.toml").write_text(SPEC.format(n=256))
        if kind == "capture":
            _record(work, 256)
            _record(work, 512)
        with in_folder(work):
            code, err = build(work, 256)
        assert code == 0, err
        before = _outputs(work, kind)
        shutil.copytree(work, base / "prev")
        (work / "kernels.toml").write_text(SPEC.format(n=512))
        with in_folder(work):
            code, err = build(work, 512)
        assert code == 0, err
        made[kind] = (work, base / "prev", before, _outputs(work, kind))
    return made


def _fresh(prev: Path, work: Path, n: int = 512) -> Path:
    """The build folder as the previous build left it, its spec file asking for ``N=n`` (written before any fault).

    Restored as a fresh copy would be, rewriting only what the last run changed (a fresh copy of the
    whole folder each run was half the matrix's time: :mod:`support.snapshot`).
    """
    restore(prev, work)
    (work / "kernels.toml").write_text(SPEC.format(n=n))
    return work


#: Operations of other tools that the matrix leaves out: scikit-build-core's setuptools plugin (when
#: installed) reads pyproject.toml while setuptools builds its Distribution, before any command runs
#: and outside setuptools' own error handling; a fault there is its traceback, not tl_aot's.
NOT_TL_AOT = {("open-read", "/pyproject.toml")}


def _schedule(trace: list, *, every_fault: bool = False) -> list:
    """(operation, fault) pairs: every operation once, its fault kinds taken in turn along the trace.

    With ``every_fault`` (the default; ``TL_AOT_FAULT_MATRIX=quick`` takes the faults in turn), every
    operation with every fault of its kind.
    """
    turn: dict = {}
    out = []
    for op in (op for op in trace if op[:2] not in NOT_TL_AOT):
        kinds = FAULTS[op[0]]
        if every_fault:
            out += [(op, k) for k in kinds]
            continue
        i = turn.get(op[0], 0)
        turn[op[0]] = i + 1
        out.append((op, kinds[i % len(kinds)]))
    return out


def _cause_words(fault) -> tuple:
    from tl_aot.common.fs_errors import _HINTS

    code = 28 if fault == "short" else fault
    return tuple(w for w in (_HINTS.get(code), os.strerror(code)) if w)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_file_system_operation_of_a_build_failed_in_turn(kind, states, memo, monkeypatch, record_property):
    import tempfile

    build, _ = KINDS[kind]
    work, prev, before, clean = states[kind]
    monkeypatch.setenv("TMPDIR", str(work / "tmp"))  # the lock of a read-only output folder goes there
    monkeypatch.setattr(tempfile, "tempdir", None)

    def run(target=None, fault=None) -> tuple:
        _fresh(prev, work)
        with in_folder(work), FaultFS(work, target=target, fault=fault) as fs:
            memo.fs = fs
            try:
                code, err = build(work, 512)
            finally:
                memo.fs = None
        return code, err, fs

    code, err, traced = run()
    assert code == 0, err
    assert not traced.unknown, f"file-system calls FaultFS cannot fail (give them a kind in faultfs.AUDITED): {sorted(traced.unknown)}"
    schedule = _schedule(traced.trace, every_fault=os.environ.get("TL_AOT_FAULT_MATRIX") != "quick")
    failures, clean_errors, successes = [], 0, 0
    for op, fault in schedule:
        code, err, fs = run(op, fault)
        problem = "the fault never fired" if fs.fired is None else _judge(code, err, fs, work, kind, before, clean, fault)
        if problem is None:
            with in_folder(work):
                code2, err2 = build(work, 512)
            if code2 != 0 or _outputs(work, kind) != clean:
                problem = f"the build with the fault gone differs from a clean build (exit {code2}): {err2[-500:]}"
        if problem:
            failures.append(f"{op} {fault}: {problem}")
        elif code == 0:
            successes += 1
        else:
            clean_errors += 1
    record_property("operations", len(schedule))
    ops = len({op for op, _ in schedule})
    print(f"\n{kind}: {ops} operations, {len(schedule)} faults: {clean_errors} clean errors, {successes} successes, {len(failures)} bad")
    assert not failures, f"{len(failures)} of {len(schedule)}:\n" + "\n".join(failures[:40])


_TEMPORARY = re.compile(r"^\.(.+)\.(\d+\.part|\d+\.old|[a-z0-9_]{8}\.tmp)$")


def _names_of(path: Path, root: Path) -> list:
    """What a message may call ``path``: itself, a folder holding it (inside the build folder), the file a temporary stands for."""
    full = path if path.is_absolute() else root / path
    names = [path, full, *[p for p in full.parents if len(str(p)) > len(str(root))], *path.parents[:-1]]
    m = _TEMPORARY.match(path.name)
    if m:
        names += [path.with_name(m.group(1)), full.with_name(m.group(1))]
    return names


def _judge(code: int, err: str, fs: FaultFS, root: Path, kind: str, before: dict, clean: dict, fault) -> str | None:
    """What is wrong with a build that ran under a fault (None: nothing)."""
    if "Traceback" in err or code not in (0, 1):
        return f"exit {code}, traceback:\n{err[-1500:]}"
    bad = _unverified(root / "cache") if kind != "setuptools" else []
    if bad:
        return f"unverified cache entries {bad}"
    now = _outputs(root, kind)
    if code == 0:
        return None if now == clean else "exit 0 but the outputs are not the clean build's"
    if now != before:
        return "failed, and the previous library or header changed"
    lines = [ln for ln in err.splitlines() if ln.startswith(("tl_aot: error:", "error:"))]
    if not lines:
        return f"no error line: {err[-800:]}"
    _, path, _ = fs.fired
    text = err
    if not any(str(p) in text for p in _names_of(Path(path), root)):
        return f"the message names neither {path} nor a folder holding it: {text[-600:]}"
    if not any(w in text for w in _cause_words(fault)):
        return f"the message does not say {_cause_words(fault)}: {text[-600:]}"
    return None
