"""The documentation's code blocks and what each says about how it is tested.

Every fenced block in ``README.md`` and ``docs/**/*.md`` carries a marker on the line right above
it, an HTML comment that renders as nothing::

    <!-- docs-test: run scenario=quickstart expect="2 entries" -->
    <!-- docs-test: file scenario=setuptools path=setup.py -->
    <!-- docs-test: same as=setuptools:setup.py -->
    <!-- docs-test: ci -->
    <!-- docs-test: covered-by test=tests/integration/test_cluster_cpu.py::test_name -->
    <!-- docs-test: show reason="what a build prints" -->

* ``run``: the block runs as written, as a process (a ``bash``/``console`` block through ``bash -e -o
  pipefail``, a ``python`` block as a script), in the scenario's folder, after the scenario's
  earlier blocks (across pages, in the order of :data:`PAGES_IN_ORDER`). ``expect`` (repeatable)
  must appear in what it prints; ``exit`` is the status it must end with (default 0); ``gpu``
  blocks run in ``tests/gpu`` only.
* ``file``: the block is written to ``path`` in the scenario's folder (a ``setup.py``, a kernel).
* ``same``: the block repeats a ``file`` block elsewhere (``as=SCENARIO:PATH``) and must stay equal to it.
* ``ci``: an install command: each of its command lines appears verbatim in ``.ci/run`` or the release
  workflow, which run it.
* ``covered-by``: a command a test runs in another form (a Dask cluster, a GPU host); the test must exist.
* ``show``: not a command (printed output, a diagram, a fragment of a program); ``reason`` says which.

A block without a marker, or a marker without its block, fails ``tests/unit/test_docs_blocks.py``:
a new example cannot slip in untested.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ROOT", "Block", "Marker", "MarkerError", "KINDS", "doc_pages", "blocks_of", "all_blocks", "scenario_blocks"]

ROOT = Path(__file__).resolve().parents[2]

#: Marker kinds and the keys each takes (``gpu`` is a flag of ``run``).
KINDS = {
    "run": {"scenario", "expect", "exit", "gpu", "timeout"},
    "file": {"scenario", "path"},
    "ci": set(),
    "same": {"as"},
    "covered-by": {"test"},
    "show": {"reason"},
}
_REQUIRED = {"run": {"scenario"}, "file": {"scenario", "path"}, "same": {"as"}, "covered-by": {"test"}, "show": {"reason"}}
_MARKER = re.compile(r"^<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+)(?P<lang>[\w+-]*)\s*$")

#: Pages whose scenarios continue from one page to the next, in this order (the rest: alphabetical, after these).
PAGES_IN_ORDER = ("README.md",)


class MarkerError(ValueError):
    """A marker that does not parse, or names a key its kind does not take."""


@dataclass(frozen=True)
class Marker:
    """What a block's marker says: its kind and keys (``expect`` may repeat)."""

    kind: str
    keys: tuple = ()  # (key, value), in the marker's order
    flags: frozenset = field(default_factory=frozenset)

    def get(self, key: str, default: str = "") -> str:
        return next((v for k, v in self.keys if k == key), default)

    def all(self, key: str) -> list:
        return [v for k, v in self.keys if k == key]


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language and text, and its marker (None: unmarked)."""

    page: Path  # relative to the repository root
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    marker: Marker | None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def parse_marker(body: str, where: str) -> Marker:
    """The :class:`Marker` of a marker comment's body (``run scenario=x expect="a b" gpu``)."""
    try:
        words = shlex.split(body)
    except ValueError as e:
        msg = f"{where}: marker {body!r}: {e}"
        raise MarkerError(msg) from None
    if not words or words[0] not in KINDS:
        msg = f"{where}: marker {body!r}: the kind must be one of {', '.join(KINDS)}"
        raise MarkerError(msg)
    kind, keys, flags = words[0], [], set()
    for w in words[1:]:
        k, eq, v = w.partition("=")
        if k not in KINDS[kind]:
            msg = f"{where}: marker {body!r}: {kind} takes no {k!r} (it takes {', '.join(sorted(KINDS[kind])) or 'nothing'})"
            raise MarkerError(msg)
        if eq:
            keys.append((k, v))
        else:
            flags.add(k)
    missing = _REQUIRED.get(kind, set()) - {k for k, _ in keys}
    if missing:
        msg = f"{where}: marker {body!r}: {kind} needs {', '.join(sorted(missing))}"
        raise MarkerError(msg)
    return Marker(kind, tuple(keys), frozenset(flags))


def doc_pages(root: Path = ROOT) -> list:
    """The pages whose blocks are checked: the README, then every page under ``docs/`` (relative paths)."""
    pages = [Path(p) for p in PAGES_IN_ORDER]
    pages += sorted(p.relative_to(root) for p in (root / "docs").rglob("*.md"))
    return pages


def blocks_of(page: Path, root: Path = ROOT) -> list:
    """The fenced blocks of ``page``, each with the marker on the line above it (a stray marker is an error)."""
    lines = (root / page).read_text().splitlines()
    out: list = []
    i = 0
    pending: tuple | None = None  # (line number, Marker) of a marker waiting for its block
    while i < len(lines):
        line = lines[i]
        m = _MARKER.match(line.strip())
        if m:
            if pending:
                msg = f"{page}:{pending[0]}: a docs-test marker with no code block right below it"
                raise MarkerError(msg)
            pending = (i + 1, parse_marker(m.group("body"), f"{page}:{i + 1}"))
            i += 1
            continue
        f = _FENCE.match(line)
        if f:
            start, indent, fence = i, f.group("indent"), f.group("fence")
            body: list = []
            i += 1
            while i < len(lines) and lines[i].strip() != fence:
                body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip())
                i += 1
            marker = pending[1] if pending and pending[0] == start else None
            if pending and pending[0] != start:
                msg = f"{page}:{pending[0]}: a docs-test marker must be on the line right above its code block"
                raise MarkerError(msg)
            pending = None
            out.append(Block(page, start + 1, f.group("lang"), "\n".join(body) + "\n", marker))
        elif pending and line.strip():
            msg = f"{page}:{pending[0]}: a docs-test marker must be on the line right above its code block"
            raise MarkerError(msg)
        i += 1
    if pending:
        msg = f"{page}:{pending[0]}: a docs-test marker with no code block right below it"
        raise MarkerError(msg)
    return out


def all_blocks(root: Path = ROOT) -> list:
    """Every block of every checked page, pages in :func:`doc_pages` order."""
    return [b for page in doc_pages(root) for b in blocks_of(page, root)]


def scenario_blocks(root: Path = ROOT) -> dict:
    """``{scenario: [block, ...]}`` of the ``run`` and ``file`` blocks, in page order."""
    out: dict = {}
    for b in all_blocks(root):
        if b.marker and b.marker.kind in ("run", "file"):
            out.setdefault(b.marker.get("scenario"), []).append(b)
    return out


#: Files a scenario's folder starts with (destination -> a path in the repository), besides its ``file`` blocks:
#: kernels the pages name but do not print. A scenario not listed starts empty.
SEEDS = {
    "setuptools": {"kernels": "samples/gemm_package/kernels"},
    "cmake": {"kernels": "samples/gemm_package/kernels"},
}

_SHELLS = ("bash", "sh", "console", "shell")


def seed(scenario: str, folder: Path, root: Path = ROOT) -> None:
    """Copy the scenario's :data:`SEEDS` into ``folder``."""
    import shutil

    for dest, src in SEEDS.get(scenario, {}).items():
        src_path = root / src
        if src_path.is_dir():
            shutil.copytree(src_path, folder / dest, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (folder / dest).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src_path, folder / dest)


def command_of(block: Block) -> list:
    """The argument list that runs a ``run`` block as written: a shell block through bash, a Python block as a script."""
    import sys

    if block.lang in _SHELLS:
        return ["bash", "-e", "-o", "pipefail", "-c", block.text]
    if block.lang == "python":
        return [sys.executable, "-c", block.text]
    msg = f"{block.where}: a run block must be {', '.join(_SHELLS)} or python, not {block.lang or 'unnamed'}"
    raise MarkerError(msg)


def run_scenario(scenario: str, folder: Path, env: dict, *, gpu: bool, root: Path = ROOT) -> list:
    """Run the scenario's blocks in order in ``folder`` (seeded first); ``gpu=False`` leaves the GPU blocks out.

    Returns ``[(block, seconds)]``; raises AssertionError naming the block, the status and the output
    when a block ends otherwise than its marker says or does not print what it expects.
    """
    import subprocess
    import time

    seed(scenario, folder, root)
    ran: list = []
    for block in scenario_blocks(root).get(scenario, []):
        m = block.marker
        if m.kind == "file":
            dest = folder / m.get("path")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(block.text)
            continue
        if "gpu" in m.flags and not gpu:
            continue
        t0 = time.perf_counter()
        proc = subprocess.run(
            command_of(block), cwd=folder, env=env, capture_output=True, text=True, check=False, timeout=float(m.get("timeout", "900"))
        )
        out = proc.stdout + proc.stderr
        want = int(m.get("exit", "0"))
        where = f"{block.where} (scenario {scenario}, in {folder})"
        assert proc.returncode == want, f"{where} exited with {proc.returncode}, not {want}:\n{block.text}\n--- output ---\n{out[-6000:]}"
        assert "Traceback (most recent call last)" not in out, f"{where} printed a traceback:\n{out[-6000:]}"
        for text in m.all("expect"):
            assert text in out, f"{where} did not print {text!r}:\n{out[-6000:]}"
        ran.append((block, time.perf_counter() - t0))
    return ran


def scenario_env(cache_dir: Path) -> dict:
    """The environment the blocks run in: this interpreter's ``python`` first on PATH, the session's variant cache."""
    import os
    import sys

    bindir = str(Path(sys.executable).parent)
    return dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), TL_AOT_CACHE_DIR=str(cache_dir))
