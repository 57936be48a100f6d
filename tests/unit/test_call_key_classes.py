"""Call keys of kernels configured by a user's classes: a dataclass by its fields, parameters and the methods its author
wrote; a class whose methods name it (or each other) by its body, spelled once."""

from __future__ import annotations

import linecache
import sys
import textwrap
import types

import pytest

pytest.importorskip("tilelang")

from support.call_key_reference import reference_key, reference_text  # noqa: E402
from support.user_modules import keys_in_two_processes, load_user_module  # noqa: E402

from tl_aot.call_keys import key as ck  # noqa: E402
from tl_aot.call_keys.key import call_key  # noqa: E402
from tl_aot.call_keys.spelling_reads import Reads  # noqa: E402

KERNEL = """
import dataclasses
from dataclasses import dataclass, field

import tilelang
import tilelang.language as T


@dataclass(frozen=True)
class Config:
    block: int = 128
    scale: float = 2.0
    tags: tuple = ()

    def threads(self):
        return self.block


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
"""


@pytest.fixture
def kmod(tmp_path, monkeypatch):
    """A user's kernel module, imported from a file (its source is what the key digests): :data:`KERNEL` unless told."""
    return lambda name, text=KERNEL: load_user_module(tmp_path, monkeypatch, name, text)


def _key(k, cfg) -> str | None:
    return call_key(k.make(cfg), (256,), {}, "90")


def test_a_kernel_closing_over_a_config_dataclass_is_keyed_as_the_reference_spells_it(kmod):
    k = kmod("dc_closure")
    key = _key(k, k.Config())
    assert key is not None and key == reference_key(k.make(k.Config()), (256,), {}, "90")
    assert _key(k, k.Config()) == key  # another instance, the same fields
    assert _key(k, k.Config(scale=3.0)) not in (None, key)
    assert _key(k, k.Config(tags=("a",))) not in (None, key)


@pytest.mark.parametrize(
    ("change", "edit"),
    [
        ("a field's default", ("scale: float = 2.0", "scale: float = 2.5")),
        ("a field added", ("tags: tuple = ()", "tags: tuple = ()\n    extra: int = 0")),
        ("a method the author wrote", ("return self.block", "return self.block // 2")),
        ("frozen", ("@dataclass(frozen=True)", "@dataclass(frozen=False)")),
        ("order", ("@dataclass(frozen=True)", "@dataclass(frozen=True, order=True)")),
        ("a field out of __init__", ("tags: tuple = ()", "tags: tuple = field(default=(), init=False)")),
        ("a field's annotation", ("block: int = 128", "block: float = 128")),
        ("a field out of the comparison", ("tags: tuple = ()", "tags: tuple = field(default=(), compare=False)")),
        pytest.param(
            "keyword-only", ("@dataclass(frozen=True)", "@dataclass(frozen=True, kw_only=True)"),
            marks=pytest.mark.skipif(sys.version_info < (3, 10), reason="kw_only is Python 3.10's"),
        ),
    ],
)  # fmt: skip
def test_what_a_dataclass_is_made_of_moves_the_key(kmod, change, edit):
    """Each edit changes what the kernel's config can do: the key of the same call moves, and matches the reference."""
    before = _key(kmod("dc_edit"), kmod("dc_edit").Config())
    edited = kmod("dc_edit", KERNEL.replace(*edit))
    after = _key(edited, edited.Config())
    assert after not in (None, before), change
    assert after == reference_key(edited.make(edited.Config()), (256,), {}, "90"), change


def test_a_dataclass_passed_as_an_argument_is_keyed_by_its_value(kmod):
    """Given to the jit itself (``given(N, cfg)``), the config is spelled as a closure's: equal fields, the same key."""
    k = kmod("dc_arg")
    key = call_key(k.given, (256, k.Config()), {}, "90")
    assert key is not None and key == reference_key(k.given, (256, k.Config()), {}, "90")
    assert call_key(k.given, (256, k.Config()), {}, "90") == key
    assert call_key(k.given, (256, k.Config(block=64)), {}, "90") not in (None, key)
    assert call_key(k.given, (256,), {"cfg": k.Config()}, "90") not in (None, key)  # by keyword: another call
    assert call_key(k.given, (256,), {"cfg": k.Config()}, "90") == reference_key(k.given, (256,), {"cfg": k.Config()}, "90")


NESTED = """
from dataclasses import dataclass, field

import tilelang
import tilelang.language as T


def round_up(n, to):
    return (n + to - 1) // to * to


@dataclass(frozen=True)
class Tile:
    m: int = 64


@dataclass(frozen=True)
class Config:
    block: int = 100
    tile: Tile = field(default_factory=Tile)

    def threads(self):
        return round_up(self.block, self.tile.m)


@tilelang.jit(out_idx=[-1])
def given(N, cfg):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=cfg.threads()) as _:
            for i in T.Parallel(N):
                Y[i] = X[i] * 2.0

    return main
"""


def test_a_config_holding_a_config_and_calling_a_helper_is_keyed_as_an_argument(kmod):
    """An argument is spelled as deep as a closure value: a nested dataclass, a method calling the module's helper."""
    k = kmod("dc_nested", NESTED)
    key = call_key(k.given, (256, k.Config()), {}, "90")
    assert key is not None and key == reference_key(k.given, (256, k.Config()), {}, "90")
    assert call_key(k.given, (256, k.Config(tile=k.Tile(32))), {}, "90") not in (None, key)
    for edit in (("m: int = 64", "m: int = 32"), ("// to * to", "// to * to + 1")):
        edited = kmod("dc_nested", NESTED.replace(*edit))
        assert call_key(edited.given, (256, edited.Config()), {}, "90") not in (None, key), edit


def test_a_base_dataclasss_change_moves_a_derived_configs_key(kmod):
    text = KERNEL.replace(
        "def make(cfg):",
        "@dataclass(frozen=True)\nclass Wide(Config):\n    lanes: int = 4\n\n\ndef make(cfg):",
    )
    k = kmod("dc_base", text)
    key = _key(k, k.Wide())
    assert key is not None and key == reference_key(k.make(k.Wide()), (256,), {}, "90")
    edited = kmod("dc_base", text.replace("scale: float = 2.0", "scale: float = 4.0"))
    assert _key(edited, edited.Wide()) not in (None, key)


def test_default_factories_and_class_variables_are_spelled(kmod):
    text = KERNEL.replace(
        "    tags: tuple = ()\n",
        "    tags: tuple = ()\n    sizes: list = field(default_factory=list)\n    LIMIT: 'typing.ClassVar[int]' = 9\n",
    ).replace("import dataclasses\n", "import dataclasses\nimport typing\n")
    k = kmod("dc_factory", text)
    key = _key(k, k.Config())
    assert key is not None and key == reference_key(k.make(k.Config()), (256,), {}, "90")
    assert _key(k, k.Config(sizes=[1])) not in (None, key)  # the instance's list, spelled each call
    edited = kmod("dc_factory", text.replace("default_factory=list", "default_factory=lambda: [1]"))
    assert _key(edited, edited.Config()) not in (None, key)


@pytest.mark.skipif(sys.version_info < (3, 10), reason="dataclass(slots=True) is Python 3.10's")
def test_a_slots_dataclass_is_keyed_by_its_slots_values(kmod):
    k = kmod("dc_slots", KERNEL.replace("@dataclass(frozen=True)", "@dataclass(frozen=True, slots=True)"))
    cfg = k.Config()
    assert not hasattr(cfg, "__dict__")
    key = _key(k, cfg)
    assert key is not None and key == reference_key(k.make(cfg), (256,), {}, "90")
    assert _key(k, k.Config(scale=3.0)) not in (None, key)
    assert _key(k, k.Config()) == key


def test_a_plain_subclass_of_a_slots_dataclass_keeps_both_its_slots_and_its_dict(kmod):
    """A subclass without slots gives instances a ``__dict__`` too: the slots' values are still read (else two configs share a key)."""
    if sys.version_info < (3, 10):
        pytest.skip("dataclass(slots=True) is Python 3.10's")
    text = KERNEL.replace("@dataclass(frozen=True)", "@dataclass(slots=True)").replace(
        "def make(cfg):", "class Tuned(Config):\n    pass\n\n\ndef make(cfg):"
    )
    k = kmod("dc_mixed", text)
    a, b = k.Tuned(), k.Tuned(scale=5.0)
    a.note = "x"
    b.note = "x"
    ka, kb = _key(k, a), _key(k, b)
    assert None not in (ka, kb) and ka != kb
    assert ka == reference_key(k.make(a), (256,), {}, "90")


def test_the_fast_spelling_of_dataclasses_is_the_references_byte_for_byte(kmod):
    k = kmod("dc_text")
    for value in (k.Config(), k.Config, k.Config(tags=(1, "a", None)), [k.Config(block=64)]):
        assert ck._text(value, ck._DEPTH, Reads()) == reference_text(value), value


def test_hostile_dataclasses_give_no_key_and_no_traceback(kmod):
    """What cannot be spelled the same in every process makes the call unkeyed (None), never an exception."""
    text = KERNEL + textwrap.dedent(
        """

        class Opaque:
            __slots__ = ()


        @dataclass
        class Holding:
            thing: object = Opaque()
            block: int = 128
            scale: float = 1.0

            def threads(self):
                return self.block


        @dataclass
        class Annotated:
            block: Opaque() = 128
            scale: float = 1.0

            def threads(self):
                return self.block


        @dataclass
        class Raising:
            block: int = 128
            scale: float = 1.0

            def threads(self):
                return self.block

            def __getattribute__(self, name):
                raise RuntimeError("no attribute for you")
        """
    )
    k = kmod("dc_hostile", text)
    assert _key(k, k.Holding()) is None  # a field's default of a slotted class of the user's: unkeyable
    assert _key(k, k.Annotated()) is None  # an annotation spelled by an address
    assert _key(k, k.Raising()) is None  # isinstance asks its __getattribute__ for __class__, which raises


HOSTILE = """
import functools
from dataclasses import dataclass, field

import torch


class Lying:  # its own __dict__: the attributes object.__getattribute__ finds are not the instance's
    __dict__ = property(lambda self: {})

    def __init__(self, block):
        object.__setattr__(self, "block", block)


class RaisingProperty:
    def __init__(self):
        self.block = 1

    @property
    def threads(self):
        raise RuntimeError("no threads")


class RaisingGetattr:
    def __init__(self):
        self.block = 1

    def __getattr__(self, name):
        raise RuntimeError(name)


class RaisingEq:
    __hash__ = None

    def __init__(self):
        self.block = 1

    def __eq__(self, other):
        raise RuntimeError("no eq")


class Odd:
    bound = (1).__add__
    part = functools.partial(int, "7")
    static_builtin = staticmethod(len)
    length = property(len)


NonStrName = type("NonStrName", (), {1: 2, "block": 1})


@dataclass
class TensorDefault:
    block: int = 1
    weight: object = torch.zeros(1)


@dataclass(frozen=True)
class RaisingFactory:
    block: int = 1
    sizes: list = field(default_factory=lambda: 1 / 0)
"""


def test_hostile_objects_give_no_key_or_the_references_and_never_a_traceback(kmod):
    """Hooks that raise, a ``__dict__`` of the class's making, odd class members: each call is None or keyed exactly."""
    k = kmod("hostile_objs", KERNEL + HOSTILE)
    values = {
        "lying": k.Lying(1), "raising property": k.RaisingProperty(), "raising getattr": k.RaisingGetattr(),
        "raising eq": k.RaisingEq(), "odd members": k.Odd(), "non-string name": k.NonStrName(),
        "tensor default": k.TensorDefault(), "raising factory": k.RaisingFactory(sizes=[]),
        "lying class": k.Lying, "odd class": k.Odd, "tensor default class": k.TensorDefault,
    }  # fmt: skip
    for name, value in values.items():
        key = _key(k, value)
        assert key == _reference_or_none(k.make(value)), name
        assert call_key(k.given, (256, value), {}, "90") == _reference_or_none(k.given, (256, value)), name
    assert _key(k, k.Lying(1)) is None  # two of them, block 1 and 2, would have shared a key
    assert _key(k, k.TensorDefault()) is None and _key(k, k.TensorDefault) is None  # a tensor: not the same in every process
    assert None not in (_key(k, k.RaisingProperty()), _key(k, k.RaisingEq()), _key(k, k.RaisingFactory(sizes=[])))


def test_a_config_dataclass_keys_the_same_in_another_process(tmp_path):
    """The key names the kernel in every process (capture and serving run in different ones), whatever its hash seed."""
    for name, text in (("dc_proc", KERNEL), ("dc_proc_nested", NESTED), ("dc_proc_holding", SELF_HOLDING)):
        (tmp_path / f"{name}.py").write_text(text)
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); from tl_aot.call_keys.key import call_key; "
        "import dc_proc as k, dc_proc_nested as n, dc_proc_holding as h; "
        "print(call_key(k.make(k.Config(scale=3.0, tags=('a', 1))), (256,), {}, '90'), "
        "call_key(n.given, (256, n.Config(tile=n.Tile(32))), {}, '90'), call_key(h.make(h.DEFAULT), (256,), {}, '90'))"
    )
    keys = keys_in_two_processes(tmp_path, probe)
    assert len(keys) == 1 and [len(key) for key in next(iter(keys)).split()] == [32, 32, 32], keys


def _cell(monkeypatch, name: str, text: str) -> types.ModuleType:
    """A notebook cell run as module ``name``: code whose file is no file, its lines in linecache as IPython keeps them."""
    filename = f"<cell {name}>"
    monkeypatch.setitem(linecache.cache, filename, (len(text), None, text.splitlines(True), filename))
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)
    exec(compile(text, filename, "exec"), module.__dict__)
    return module


def test_a_method_the_author_wrote_in_a_notebook_cell_is_spelled_not_skipped(monkeypatch):
    """A cell's ``__eq__`` is in no file, as the methods ``dataclasses`` writes are: it is the author's all the same."""
    eq = "    def __eq__(self, other):\n        return self.block == other.block\n\n"
    text = KERNEL.replace("    def threads(self):", eq + "    def threads(self):")
    k = _cell(monkeypatch, "dc_cell", text)
    key = _key(k, k.Config())
    assert key is not None and key == reference_key(k.make(k.Config()), (256,), {}, "90")
    edited = _cell(monkeypatch, "dc_cell", text.replace("self.block == other.block", "self.scale == other.scale"))
    assert _key(edited, edited.Config()) not in (None, key)


def test_dataclass_parts_recognise_only_what_dataclasses_wrote():
    import dataclasses

    from tl_aot.call_keys import dataclass_parts as parts

    @dataclasses.dataclass(frozen=True)
    class Written:
        x: int = 0

        def __eq__(self, other):  # the author's: dataclasses keeps it, the key spells it
            return self.x == other.x

    members = Written.__dict__
    assert parts.is_dataclass_class(Written) and not parts.is_dataclass_class(type("Plain", (Written,), {}))
    assert parts.generated("__init__", members["__init__"]) and parts.generated("__setattr__", members["__setattr__"])
    assert parts.generated("__repr__", members["__repr__"])  # the standard library's wrapper
    assert not parts.generated("__eq__", members["__eq__"])
    assert not parts.generated("threads", members["__init__"])  # a name dataclasses never writes
    authors: dict = {}
    exec("def __eq__(self, other):\n    return True\n", authors)  # the author's, compiled from a string
    assert parts.generated("__eq__", authors["__eq__"]) is (sys.version_info < (3, 11))  # 3.11 names dataclasses' apart
    assert not parts.generated("__getstate__", members["__init__"])  # dataclasses' own functions only


SELF_NAMING = """
import tilelang
import tilelang.language as T


class Tiling:
    def __init__(self, block):
        self.block = block

    def halved(self):
        return Tiling(max(self.block // 2, 1))

    def other(self):
        return Pair(self.block)

    @classmethod
    def unit(cls):
        return cls(1)


class Pair:
    def __init__(self, n):
        self.n = n

    def back(self):
        return Tiling(self.n)


def make(tiling):
    @tilelang.jit(out_idx=[-1])
    def scaled(N):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=128) as _:
                for i in T.Parallel(N):
                    Y[i] = X[i] * float(tiling.halved().block + Tiling.unit().block)

        return main

    return scaled
"""


def test_a_class_whose_methods_name_it_is_keyed_by_its_body_once(kmod):
    """``Tiling(...)`` inside Tiling's method, and Tiling <-> Pair: named by reference inside the body being spelled."""
    k = kmod("self_naming", SELF_NAMING)
    key = _key(k, k.Tiling(8))
    assert key is not None and key == reference_key(k.make(k.Tiling(8)), (256,), {}, "90")
    assert _key(k, k.Tiling(8)) == key and _key(k, k.Tiling(4)) not in (None, key)
    assert ck._text(k.Tiling, ck._DEPTH, Reads()) == reference_text(k.Tiling)
    assert '["user class ref","self_naming.Tiling"]' in ck._text(k.Tiling, ck._DEPTH, Reads())
    assert ck._being_spelled() == []  # nothing left on the stack after a spelling, nor after an unkeyable one
    for edit in (("max(self.block // 2, 1)", "max(self.block // 4, 1)"), ("return Tiling(self.n)", "return Tiling(self.n + 1)")):
        edited = kmod("self_naming", SELF_NAMING.replace(*edit))
        assert _key(edited, edited.Tiling(8)) not in (None, key), edit  # a body named by reference is still in the key


def test_a_reference_spelled_inside_a_class_is_never_kept_for_a_spelling_outside_it(kmod):
    """``builder`` is spelled inside Tiling's body (its method calls it) with Tiling by reference: a kernel reading
    ``builder`` must get Tiling's whole body (here past the depth limit, so unkeyed), never that remembered reference."""
    text = (
        SELF_NAMING.replace("return Tiling(max(self.block // 2, 1))", "return builder(max(self.block // 2, 1))")
        + """

def builder(n):
    return Tiling(n)


def via(n):  # builder read one helper down: spelled at the depth Tiling's method reads it at
    return builder(n)


def make_with_builder(n):
    @tilelang.jit(out_idx=[-1])
    def scaled(N):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=128) as _:
                for i in T.Parallel(N):
                    Y[i] = X[i] * float(via(n).block)

        return main

    return scaled
"""
    )
    k = kmod("self_ref_memo", text)
    assert _key(k, k.Tiling(8)) is not None  # Tiling spelled, builder inside it
    # Outside, builder is read at the same depth, but Tiling's body then lies past the depth limit: unkeyed, as the
    # reference (no memo) says; a remembered reference would have keyed it without Tiling's body.
    assert call_key(k.make_with_builder(2), (256,), {}, "90") == _reference_or_none(k.make_with_builder(2)) is None


def _reference_or_none(jit, args: tuple = (256,)) -> str | None:
    """The reference's key, None where spelling it the slow way fails (a value it cannot spell, a hook that raises)."""
    try:
        return reference_key(jit, args, {}, "90")
    except Exception:  # noqa: BLE001 (a hostile object's hooks raise anything)
        return None


SELF_HOLDING = """
from dataclasses import dataclass, replace

import tilelang
import tilelang.language as T


@dataclass(frozen=True)
class Config:
    block: int = 128

    def wider(self):
        return replace(DEFAULT, block=self.block * 2)


DEFAULT = Config()


class Tiling:
    def __init__(self, m):
        self.m = m


Tiling.UNIT = Tiling(1)


def make(cfg):
    @tilelang.jit(out_idx=[-1])
    def scaled(N):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=128) as _:
                for i in T.Parallel(N):
                    Y[i] = X[i] * float(cfg.wider().block)

        return main

    return scaled
"""


def test_an_instance_named_inside_its_own_classs_body_names_the_class_by_reference(kmod):
    """A ``DEFAULT`` a dataclass's method reads, a class attribute holding an instance: keyed (they reached the depth limit)."""
    k = kmod("self_holding", SELF_HOLDING)
    for value in (k.Config(), k.Tiling(8), k.DEFAULT):
        key = _key(k, value)
        assert key is not None and key == reference_key(k.make(value), (256,), {}, "90"), value
        assert ck._text(value, ck._DEPTH, Reads()) == reference_text(value)
    assert '["object",["user class ref","self_holding.Tiling"],{"m":1}]' in ck._text(k.Tiling(8), ck._DEPTH, Reads())
    for edit, value in ((("DEFAULT = Config()", "DEFAULT = Config(block=64)"), "Config"), (("Tiling(1)", "Tiling(2)"), "Tiling")):
        key = _key(k, getattr(k, value)(8))
        edited = kmod("self_holding", SELF_HOLDING.replace(*edit))
        assert _key(edited, getattr(edited, value)(8)) not in (None, key), edit  # the instance's values are in the key
