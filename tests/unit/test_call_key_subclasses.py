"""Call keys of kernels configured by a user's subclass of a builtin value type: a ``typing.NamedTuple`` or ``namedtuple``
config, a ``str`` with methods. Each is keyed by its value and its classes' bodies, so editing a method or a field's default
moves the key (before, only the class's name and the value were spelled: the old kernel was served after the edit)."""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("tilelang")

from support.call_key_reference import reference_key, reference_text  # noqa: E402
from support.user_modules import keys_in_two_processes, load_user_module  # noqa: E402

from tl_aot.call_keys import key as ck  # noqa: E402
from tl_aot.call_keys.key import call_key  # noqa: E402
from tl_aot.call_keys.spelling_reads import Reads  # noqa: E402

KERNEL = """
import collections
import typing

import tilelang
import tilelang.language as T


class Config(typing.NamedTuple):
    block: int = 128
    scale: float = 2.0

    def threads(self):
        return self.block * 2

    def halved(self):
        return Config(self.block // 2, self.scale)


Tile = collections.namedtuple("Tile", "rows cols", defaults=(32,))


class Wide(Tile):
    __slots__ = ()

    def _replace(self, **changes):
        return self


class Dim(str):
    def axis(self):
        return self.upper()


def make(cfg):
    @tilelang.jit(out_idx=[-1])
    def scaled(N):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=cfg.threads()) as _:
                for i in T.Parallel(N):
                    Y[i] = X[i] * cfg.scale

        return main

    return scaled


@tilelang.jit(out_idx=[-1])
def given(N, cfg):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=cfg.threads()) as _:
            for i in T.Parallel(N):
                Y[i] = X[i] * cfg.scale

    return main


@tilelang.jit(out_idx=[-1])
def built(N):
    cfg = Config(block=N)  # the class itself, read from the module

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=cfg.threads()) as _:
            for i in T.Parallel(N):
                Y[i] = X[i] * cfg.scale

    return main
"""


@pytest.fixture
def kmod(tmp_path, monkeypatch):
    """A user's kernel module, imported from a file (its source is what the key digests): :data:`KERNEL` unless told."""
    return lambda name, text=KERNEL: load_user_module(tmp_path, monkeypatch, name, text)


def _given(k, value) -> str | None:
    return call_key(k.given, (256, value), {}, "90")


def test_a_namedtuple_config_is_keyed_closed_over_and_as_an_argument(kmod):
    """Closed over by a factory's kernel or given to the kernel, the config keys the call, as the reference spells it."""
    k = kmod("nt_keyed")
    closed = call_key(k.make(k.Config()), (256,), {}, "90")
    argument = _given(k, k.Config())
    assert None not in (closed, argument)
    assert closed == reference_key(k.make(k.Config()), (256,), {}, "90")
    assert argument == reference_key(k.given, (256, k.Config()), {}, "90")
    assert call_key(k.make(k.Config()), (256,), {}, "90") == closed  # another config, equal fields: the same kernel
    assert call_key(k.make(k.Config(block=64)), (256,), {}, "90") not in (None, closed)
    assert _given(k, k.Config(scale=3.0)) not in (None, argument)
    assert _given(k, (128, 2.0)) not in (None, argument)  # a plain tuple of the same values: another kernel's config
    built = call_key(k.built, (256,), {}, "90")  # the class read as a global: its body spelled
    assert built is not None and built == reference_key(k.built, (256,), {}, "90")


@pytest.mark.parametrize(
    ("change", "value", "edit"),
    [
        ("a NamedTuple's method body", "Config()", ("return self.block * 2", "return self.block * 4")),
        ("a NamedTuple field's default", "Config(128, 2.0)", ("scale: float = 2.0", "scale: float = 2.5")),
        ("a namedtuple's defaults", "Tile(8, 32)", ('defaults=(32,)', 'defaults=(64,)')),
        ("a str subclass's method", "Dim('m')", ("return self.upper()", "return self.lower()")),
        ("the author's own _replace", "Wide(1, 2)", ("        return self\n", "        return Wide(*self)\n")),
        ("a method added", "Config()", ("    def halved(self):", "    def doubled(self):\n        return 2\n\n    def halved(self):")),
    ],
)  # fmt: skip
def test_an_edit_to_a_subclass_config_moves_the_key(kmod, change, value, edit):
    """The kernel's config would behave otherwise after the edit: the same call's key moves (the old kernel is not served)."""
    before_module = kmod("nt_edit")
    before = _given(before_module, eval(value, vars(before_module)))
    edited = kmod("nt_edit", KERNEL.replace(*edit))
    after_value = eval(value, vars(edited))
    after = _given(edited, after_value)
    assert before is not None and after not in (None, before), change
    assert after == reference_key(edited.given, (256, after_value), {}, "90"), change


def test_same_named_namedtuples_of_two_modules_key_apart(kmod):
    """Two ``Config`` classes with equal fields and values but other methods (or another module) name other kernels."""
    a = kmod("nt_mod_a")
    b = kmod("nt_mod_b", KERNEL.replace("return self.block * 2", "return self.block"))
    c = kmod("nt_mod_c")  # the same text as a's, another module: its class is another class
    keys = [_given(a, m.Config()) for m in (a, b, c)]  # one kernel, given each module's Config(128, 2.0)
    assert None not in keys and len(set(keys)) == 3, keys
    closed = [call_key(a.make(m.Config()), (256,), {}, "90") for m in (a, b, c)]
    assert None not in closed and len(set(closed)) == 3, closed


def test_namedtuple_parts_recognise_only_what_collections_wrote():
    """Skipped: the members ``namedtuple`` wrote. Spelled: an author's method of any name, even one compiled from a string."""
    import collections
    import typing

    from tl_aot.call_keys import namedtuple_parts as parts

    class Cfg(typing.NamedTuple):
        block: int = 128

        def __repr__(self):  # the author's: typing keeps it over namedtuple's
            return "Cfg"

    Pair = collections.namedtuple("Pair", "a b")

    class Mine(Pair):
        __slots__ = ()

        def _replace(self, **changes):
            return self

    left = {c: sorted(n for n, m in vars(c).items() if not parts.generated(n, m, c)) for c in (Cfg, Pair)}
    noise = {"__module__", "__doc__", "__annotations__", "__qualname__", "__firstlineno__", "__static_attributes__"}
    assert {c: [n for n in names if n not in noise] for c, names in left.items()} == {
        Cfg: ["__repr__", "_field_defaults", "_fields"], Pair: ["_field_defaults", "_fields"],
    }  # fmt: skip
    assert parts.is_namedtuple_class(Pair) and not parts.is_namedtuple_class(Mine) and not parts.is_namedtuple_class(tuple)
    authors: dict = {}
    exec("__new__ = lambda cls, a, b: tuple.__new__(cls, (a, b))", authors)  # the author's, compiled from a string
    assert not parts.generated("__new__", staticmethod(authors["__new__"]), Pair)
    assert not parts.generated("_replace", Mine.__dict__["_replace"], Pair)  # in a named tuple class, still the author's
    assert not parts.generated("__match_args__", ("b", "a"), Pair) and not parts.generated("__slots__", ("x",), Pair)
    assert not parts.generated("b", vars(Pair)["a"], Cfg)  # a field accessor only under a field's name


def test_what_collections_wrote_is_skipped_and_what_the_author_wrote_is_spelled(kmod):
    """A named tuple is spelled by its fields and defaults and its author's methods; ``_replace`` only where the author wrote one."""
    k = kmod("nt_members")
    tile = ck._text(k.Tile(1, 2), ck._DEPTH, Reads())
    assert tile == (
        '["subclass",[["nt_members.Tile",{"_field_defaults":["dict",[["cols",32]]],"_fields":["tuple",["rows","cols"]]}]],'
        '["tuple",[1,2]],{}]'
    )
    wide = ck._text(k.Wide(1, 2), ck._DEPTH, Reads())
    assert '"nt_members.Wide.Wide._replace"' not in wide and '"nt_members.Wide._replace"' in wide  # the author's, by its source
    assert wide.count("_replace") == 2  # its member name and its function's name: collections' in Tile is skipped
    config = ck._text(k.Config(), ck._DEPTH, Reads())
    assert '"threads"' in config and '"_make"' not in config and '"__new__"' not in config and '"block":' not in config
    assert '["user class ref","nt_members.Config"]' in config  # halved() names its own class: by reference, not again


def test_the_fast_spelling_of_subclasses_is_the_references_byte_for_byte(kmod):
    k = kmod("nt_text")
    dim = k.Dim("m")
    dim.extra = [1, "x"]  # an instance attribute of a str subclass: spelled with its value
    values = [
        k.Config(), k.Config, k.Tile(1, 2), k.Tile, k.Wide(3, 4), k.Dim("m"), dim, [k.Config(64), k.Dim("n")],
        {"cfg": k.Config(scale=0.5)}, (k.Tile(k.Config(), 1),),
    ]  # fmt: skip
    for value in values:
        assert ck._text(value, ck._DEPTH, Reads()) == reference_text(value), value
    assert ck._text(dim, ck._DEPTH, Reads()) != ck._text(k.Dim("m"), ck._DEPTH, Reads())


HOSTILE = """

import threading


class Locked(typing.NamedTuple):
    block: int = 1
    LOCK = threading.Lock()  # a class value no process spells alike


class Defaulted(typing.NamedTuple):
    block: int = 1
    weight: object = object()


class Meta(type):
    pass


class Measured(str, metaclass=Meta):
    pass


class Slotted(list):  # a value in a slot the key does not read (a tuple's or a str's subclass can have none)
    __slots__ = ("extra",)


class Lying(str):
    __dict__ = property(lambda self: {})


Unnamed = type("Unnamed", (int,), {"__module__": 5})


class Sneaky(tuple):  # hooks the key never asks: the value is read by tuple's own methods
    def __iter__(self):
        raise RuntimeError("no items for you")

    def __eq__(self, other):
        raise RuntimeError("no eq")


class Unequal(float):
    def __ne__(self, other):  # a NaN test by != would spell every value NaN
        return True


class Raising(typing.NamedTuple):
    block: int = 1

    def threads(self):
        raise RuntimeError("spelled by its source, never called")
"""


def test_hostile_subclasses_give_no_key_or_the_references_and_never_a_traceback(kmod):
    """What cannot be spelled alike in every process makes the call unkeyed (None); hooks that raise are never asked."""
    k = kmod("nt_hostile", KERNEL + textwrap.dedent(HOSTILE))
    held = k.Dim("m")
    held.lock = k.threading.Lock()
    unkeyable = {
        "class value": k.Locked(), "field default": k.Defaulted(), "metaclass": k.Measured("m"), "slots": k.Slotted([1, 2]),
        "own __dict__": k.Lying("m"), "module not a string": k.Unnamed(1), "attribute": held,
    }  # fmt: skip
    for name, value in unkeyable.items():
        assert _given(k, value) is None, name
        assert call_key(k.make(value), (256,), {}, "90") is None, name
        with pytest.raises(ck.Unkeyable):
            ck._text(value, ck._DEPTH, Reads())
    for value in (k.Sneaky((1, 2)), k.Raising(), k.Unequal(1.5)):
        key = _given(k, value)
        assert key is not None and key == reference_key(k.given, (256, value), {}, "90"), value
    assert _given(k, k.Unequal(1.5)) != _given(k, k.Unequal(2.5))
    assert _given(k, k.Sneaky((1, 2))) != _given(k, k.Sneaky((1, 3)))


def test_plain_values_and_librarys_subclasses_keep_their_spelling():
    """Keys of calls with plain arguments (or torch.Size, an OrderedDict, numpy's float) are the keys they were."""
    import collections

    import torch

    before = {  # spelled by the key before user subclasses were spelled by their classes
        "size": (torch.Size([2, 3]), '["Size",[2,3]]'),
        "list": ([1, "a", (2.5, None)], '["list",[1,"a",["tuple",[2.5,null]]]]'),
        "dict": ({"k": (1, 2)}, '["dict",[["k",["tuple",[1,2]]]]]'),
        "tuple": (("x", 3), '["tuple",["x",3]]'),
        "ordered": (collections.OrderedDict(a=1), '["dict",[["a",1]]]'),
        "scalars": ([7, 0.5, "s", None, True], '["list",[7,0.5,"s",null,true]]'),
    }
    for name, (value, text) in before.items():
        assert ck._text(value, ck._DEPTH, Reads()) == text == reference_text(value), name
    numpy = pytest.importorskip("numpy")
    assert ck._text(numpy.float64(0.5), ck._DEPTH, Reads()) == "0.5"  # a C type's subclass of float: its value


def test_a_defaultdict_is_spelled_with_its_factory():
    """What a defaultdict answers for a key it lacks is its factory's: two holding the same items but not the same factory
    key apart (they shared the key when only the items were spelled)."""
    import collections

    for factory in (int, list, None, lambda: 8):
        value = collections.defaultdict(factory, {"block": 64})
        assert ck._text(value, ck._DEPTH, Reads()) == reference_text(value), factory
    texts = {ck._text(collections.defaultdict(f, {"block": 64}), ck._DEPTH, Reads()) for f in (int, list, None)}
    assert len(texts) == 3 and '["class","builtins.int"]' in ck._text(collections.defaultdict(int), ck._DEPTH, Reads())


def test_a_value_is_spelled_by_its_type_not_by_what_its_class_attribute_claims(kmod):
    """An object whose ``__class__`` says ``list`` (a Mock's spec does) is spelled as what it is, a user's object: by its
    class's body and its attributes, so two holding different state key apart; it used to be its iteration's list."""
    from unittest import mock

    text = (
        "class Claims:\n    __class__ = property(lambda self: list)\n\n    def __init__(self, block):\n"
        "        self.block = block\n\n    def __iter__(self):\n        return iter([1, 2])\n"
    )
    k = kmod("lying_class", text)
    a, b = k.Claims(64), k.Claims(128)
    assert isinstance(a, list) and list(a) == list(b)  # what isinstance and iteration see: the same list
    spelled = ck._text(a, ck._DEPTH, Reads())
    assert spelled.startswith('["object",') and spelled != ck._text(b, ck._DEPTH, Reads())
    assert ck._text([1, 2], ck._DEPTH, Reads()) not in (spelled, ck._text(b, ck._DEPTH, Reads()))
    with pytest.raises(ck.Unkeyable):  # a Mock pretending to be a list: not a value every process spells alike
        ck._text(mock.Mock(spec=list), ck._DEPTH, Reads())


def test_subclass_configs_key_the_same_in_another_process(tmp_path):
    """Capture and serving are two processes: a NamedTuple config's key depends on no hash seed nor memo."""
    (tmp_path / "nt_proc.py").write_text(KERNEL)
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); from tl_aot.call_keys.key import call_key; import nt_proc as k; "
        "print(call_key(k.make(k.Config(64, 0.5)), (256,), {}, '90'), call_key(k.given, (256, k.Wide(1, 2)), {}, '90'), "
        "call_key(k.given, (256, k.Dim('m')), {}, '90'), call_key(k.built, (256,), {}, '90'))"
    )
    keys = keys_in_two_processes(tmp_path, probe)
    assert len(keys) == 1 and [len(key) for key in next(iter(keys)).split()] == [32, 32, 32, 32], keys
