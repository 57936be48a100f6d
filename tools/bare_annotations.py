"""Count bare ``dict`` / ``tuple`` annotations in ``tl_aot/``: the ones that name no element types.

    python tools/bare_annotations.py            # totals: "bare dict 12, bare tuple 9 (127 files)"
    python tools/bare_annotations.py --list     # every occurrence, file:line:col kind

A ``dict`` or ``tuple`` in an annotation says only "some mapping" or "some record": the reader (and
mypy) learns nothing of what travels. Counted are the annotations of parameters (``*args`` and
``**kwargs`` too), returns and annotated assignments (fields included), each occurrence of the
builtin ``dict`` / ``tuple`` or ``typing.Dict`` / ``typing.Tuple`` that is not subscripted, wherever
it sits in the annotation (``Optional[dict]``, ``list[tuple]`` and ``dict | None`` count one each).
Quoted annotations are parsed and counted the same way. ``tests/unit/test_bare_annotations.py``
pins the ceiling so the count cannot grow back.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]

#: Annotation names that are bare when not subscripted, by the kind they count as.
_KINDS = {"dict": "dict", "Dict": "dict", "tuple": "tuple", "Tuple": "tuple"}


class Bare(NamedTuple):
    """One bare annotation: where it is and which kind (``"dict"`` or ``"tuple"``)."""

    path: Path
    line: int
    col: int
    kind: str


def _annotations(tree: ast.AST) -> Iterator[ast.expr]:
    """Every annotation expression of *tree*: parameters, returns and annotated assignments."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                if arg is not None and arg.annotation is not None:
                    yield arg.annotation
            if node.returns is not None:
                yield node.returns
        elif isinstance(node, ast.AnnAssign):
            yield node.annotation


def _bare_in(annotation: ast.expr) -> Iterator[tuple[ast.expr, str]]:
    """The bare ``dict`` / ``tuple`` names inside one annotation, with their kind."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            parsed = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return
        # Positions of a quoted annotation are those of the string.
        for _node, kind in _bare_in(parsed):
            yield annotation, kind
        return
    subscripted = {id(n.value) for n in ast.walk(annotation) if isinstance(n, ast.Subscript)}
    for node in ast.walk(annotation):
        if id(node) in subscripted:
            continue
        if isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "typing":
            name = node.attr
        else:
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node is not annotation:
                yield from _bare_in(node)
            continue
        if name in _KINDS:
            yield node, _KINDS[name]


def bare_annotations(paths: Iterable[Path]) -> list[Bare]:
    """Every bare ``dict`` / ``tuple`` annotation in the Python files *paths*, in file order."""
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for annotation in _annotations(tree):
            for node, kind in _bare_in(annotation):
                found.append(Bare(path, node.lineno, node.col_offset, kind))
    found.sort()
    return found


def package_files(root: Path = ROOT) -> list[Path]:
    """The Python files of the ``tl_aot`` package under *root*."""
    return sorted((root / "tl_aot").rglob("*.py"))


def counts(found: Iterable[Bare]) -> dict[str, int]:
    """``{"dict": n, "tuple": m}`` of *found*."""
    totals = dict.fromkeys(("dict", "tuple"), 0)
    for bare in found:
        totals[bare.kind] += 1
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print every occurrence, file:line:col kind")
    args = parser.parse_args(argv)
    files = package_files()
    found = bare_annotations(files)
    if args.list:
        for bare in found:
            print(f"{bare.path.relative_to(ROOT)}:{bare.line}:{bare.col + 1} {bare.kind}")
    totals = counts(found)
    print(f"bare dict {totals['dict']}, bare tuple {totals['tuple']} ({len(files)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
