"""The package stays readable: short functions (split by job instead), and templates that only substitute and loop."""

from __future__ import annotations

import ast

from support.tree import PACKAGE, TEMPLATES, files, read

#: Modules of the package: a floor, so a glob that reads the wrong folder fails (there are ~140).
MODULES = 100
LIMIT = 80
#: Lines of the C++ templates together: they hold only what varies per library (issue 33).
CXX_TEMPLATE_LINES = 330
#: Filters that only spell a value (join a list, count it, indent a macro's lines); anything else decides in a template.
SPELLING_FILTERS = {"join", "length", "map", "indent"}


def test_no_function_is_longer_than_80_lines():
    long = []
    modules = files(PACKAGE, "*.py", recursive=True, at_least=MODULES)
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > LIMIT:
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, f"{read(modules, 'modules')}; split these by job:\n" + "\n".join(long)


def test_every_module_says_what_it_is_for():
    """Every module of every sub-package, not only the top level's: its docstring says what it is for."""
    modules = files(PACKAGE, "*.py", recursive=True, at_least=MODULES)
    missing = [str(p.relative_to(PACKAGE.parent)) for p in modules if not (ast.get_docstring(ast.parse(p.read_text())) or "").strip()]
    assert not missing, f"{read(modules, 'modules')}; these have no docstring: {missing}"


def test_templates_only_substitute_and_loop():
    """Decisions and spelling live in Python (tl_aot.codegen.launcher_context): a template tests flags, never computes."""
    import jinja2
    from jinja2 import nodes

    env = jinja2.Environment()
    found = []
    templates = files(TEMPLATES, "*.j2", at_least=5)
    for path in templates:
        tree = env.parse(path.read_text())
        where = f"codegen/templates/{path.name}"
        for n in tree.find_all((nodes.Compare, nodes.Concat, nodes.BinExpr, nodes.Getitem, nodes.Slice)):
            found.append(f"{where}:{n.lineno} {type(n).__name__}")
        found += [f"{where}:{n.lineno} filter {n.name}" for n in tree.find_all(nodes.Filter) if n.name not in SPELLING_FILTERS]
        for n in tree.find_all((nodes.If, nodes.CondExpr)):
            test = n.test.node if isinstance(n.test, nodes.Not) else n.test
            if not isinstance(test, (nodes.Name, nodes.Getattr)):
                found.append(f"{where}:{n.lineno} tests {type(test).__name__}")
    assert not found, f"{read(templates, 'templates')}; compute these in Python and pass the result:\n" + "\n".join(found)


def test_cxx_templates_hold_only_what_varies():
    """Fixed C++ (checks, the call path, exports) lives in the runtime; the templates stay within their budget."""
    templates = files(TEMPLATES, "*.cc.j2", at_least=3)
    lines = {p.name: len(p.read_text().splitlines()) for p in templates}
    assert sum(lines.values()) <= CXX_TEMPLATE_LINES, (
        f"{read(templates, 'C++ templates')} {lines}: move what does not vary into tl_aot/include/tl_aot"
    )
