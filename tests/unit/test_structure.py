"""The package stays readable: short functions (split by job instead), and templates that only substitute and loop."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "tl_aot"
LIMIT = 80
#: Lines of the C++ templates together: they hold only what varies per library (issue 33).
CXX_TEMPLATE_LINES = 330
#: Filters that only spell a value (join a list, count it, indent a macro's lines); anything else decides in a template.
SPELLING_FILTERS = {"join", "length", "map", "indent"}


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


def test_templates_only_substitute_and_loop():
    """Decisions and spelling live in Python (tl_aot.codegen.launcher_context): a template tests flags, never computes."""
    import jinja2
    from jinja2 import nodes

    env = jinja2.Environment()
    found = []
    for path in sorted((PKG / "templates").glob("*.j2")):
        tree = env.parse(path.read_text())
        where = f"templates/{path.name}"
        for n in tree.find_all((nodes.Compare, nodes.Concat, nodes.BinExpr, nodes.Getitem, nodes.Slice)):
            found.append(f"{where}:{n.lineno} {type(n).__name__}")
        found += [f"{where}:{n.lineno} filter {n.name}" for n in tree.find_all(nodes.Filter) if n.name not in SPELLING_FILTERS]
        for n in tree.find_all((nodes.If, nodes.CondExpr)):
            test = n.test.node if isinstance(n.test, nodes.Not) else n.test
            if not isinstance(test, (nodes.Name, nodes.Getattr)):
                found.append(f"{where}:{n.lineno} tests {type(test).__name__}")
    assert not found, "compute these in Python and pass the result:\n" + "\n".join(found)


def test_cxx_templates_hold_only_what_varies():
    """Fixed C++ (checks, the call path, exports) lives in the runtime; the templates stay within their budget."""
    lines = {p.name: len(p.read_text().splitlines()) for p in sorted((PKG / "templates").glob("*.cc.j2"))}
    assert sum(lines.values()) <= CXX_TEMPLATE_LINES, f"{lines}: move what does not vary into tl_aot/include/tl_aot"
