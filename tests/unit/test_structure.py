"""The package stays readable: no function in tl_aot/ longer than 80 lines (split by job instead)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "tl_aot"
LIMIT = 80


def test_no_function_is_longer_than_80_lines():
    long = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > LIMIT:
                    long.append(f"{path.relative_to(PKG.parent)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "split these by job:\n" + "\n".join(long)


def test_every_module_says_what_it_is_for():
    missing = [p.name for p in sorted(PKG.glob("*.py")) if not ast.get_docstring(ast.parse(p.read_text()))]
    assert not missing, f"modules without a docstring: {missing}"
