"""Argument values beyond literals: spelled on the command line and in spec files, keyed faithfully."""

import enum
import math
from dataclasses import dataclass
from typing import NamedTuple

import pytest

from tl_aot.common.errors import LoweringError, SpecError
from tl_aot.config.values import Expr, as_spec_value, evaluate, from_spec_value, parse_value_text, spell


class Mode(enum.Enum):
    FAST = 1


@dataclass(frozen=True)
class Cfg:
    block: int = 64
    stages: int = 2


class Shape(NamedTuple):
    rows: int
    cols: int


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("4096", 4096),
        ("'float16'", "float16"),
        ("float16", "float16"),  # a bare word stays a string
        ("(1, 2)", (1, 2)),
        ("-1.5", -1.5),
        ("None", None),
    ],
)
def test_literals_and_bare_words_are_as_before(raw, want):
    assert parse_value_text(raw, "--arg x") == want


@pytest.mark.parametrize("raw", ["torch.float16", "float('inf')", "Cfg(block=128, stages=3)", "Mode.FAST", "T.float16"])
def test_names_and_calls_are_expressions(raw):
    value = parse_value_text(raw, "--arg x")
    assert isinstance(value, Expr)
    assert value.text == raw


@pytest.mark.parametrize(
    ("raw", "fragment"), [("1 + 2", "BinOp"), ("x[0]", "Subscript"), ("lambda: 1", "Lambda"), ("f(**kw)", "only names")]
)
def test_other_expressions_are_refused_naming_the_node(raw, fragment):
    with pytest.raises(SpecError, match="--arg x") as e:
        parse_value_text(raw, "--arg x")
    assert fragment in str(e.value)


def test_spec_tables_spell_expressions_and_constructed_values():
    assert from_spec_value({"_expr_": "torch.float16"}, "args.dtype") == Expr("torch.float16")
    made = from_spec_value({"_target_": "pkg.Cfg", "_args_": [1], "stages": {"_expr_": "Mode.FAST"}}, "args.cfg")
    assert made == Expr("pkg.Cfg(1, stages=Mode.FAST)")
    assert from_spec_value({"a": [{"_expr_": "x.y"}]}, "args") == {"a": [Expr("x.y")]}
    with pytest.raises(SpecError, match="args.dtype: an"):
        from_spec_value({"_expr_": "torch.float16", "other": 1}, "args.dtype")
    with pytest.raises(SpecError, match="_target_ must be a dotted name"):
        from_spec_value({"_target_": "not a name"}, "args.cfg")


def test_spellings_are_faithful_and_distinct():
    torch = pytest.importorskip("torch")
    here = __name__
    assert spell(torch.float16) == "torch.float16"
    assert spell(Mode.FAST) == f"{here}.Mode.FAST"
    assert spell(Cfg(128, 3)) == f"{here}.Cfg(block=128, stages=3)"
    assert spell(Shape(1, 2)) == f"{here}.Shape(rows=1, cols=2)"
    assert spell(float("inf")) == "float('inf')" and spell(float("nan")) == "float('nan')"
    assert spell((1,)) == "(1,)" and spell([1, "a"]) == "[1, 'a']"
    assert spell(True) != spell(1)
    assert spell(Cfg(128, 3)) != spell(Cfg(128, 2))


def test_an_object_without_a_faithful_spelling_is_refused():
    with pytest.raises(SpecError, match="no faithful spelling"):
        spell(object())


def test_objects_from_setup_py_become_expressions_of_their_spelling():
    assert as_spec_value(4) == 4 and as_spec_value((1, [2])) == (1, [2])
    assert as_spec_value(Cfg(1, 2)) == Expr(f"{__name__}.Cfg(block=1, stages=2)")
    assert as_spec_value(Mode.FAST) == Expr(f"{__name__}.Mode.FAST")


def test_evaluation_uses_the_kernel_module_then_builtins_then_imports():
    ns = {"Cfg": Cfg, "Mode": Mode}
    assert evaluate(Expr("Cfg(block=128)"), ns, "entry") == Cfg(128)
    assert evaluate({"m": Expr("Mode.FAST"), "t": (Expr("float('inf')"),)}, ns, "entry") == {"m": Mode.FAST, "t": (math.inf,)}
    assert evaluate(Expr("os.path.sep"), ns, "entry") == "/"  # an importable module, and its submodule
    with pytest.raises(LoweringError, match="entry: evaluating Nope"):
        evaluate(Expr("Nope(1)"), ns, "entry")
    with pytest.raises(LoweringError, match="entry: evaluating Cfg"):
        evaluate(Expr("Cfg(wrong=1)"), ns, "entry")
