"""Call keys of kernels configured by enums: a library's member by name, a user's by its members' values and its methods.

A served call whose key did not move when the user edited ``FAST = 64`` to ``128`` would be
answered with the kernel built for 64, and an incremental capture would not record the new one.
"""

from __future__ import annotations

import enum

import pytest

pytest.importorskip("tilelang")

from support.call_key_reference import reference_key, reference_text  # noqa: E402
from support.user_modules import keys_in_two_processes, load_user_module  # noqa: E402

from tl_aot.call_keys import key as ck  # noqa: E402
from tl_aot.call_keys.key import call_key  # noqa: E402
from tl_aot.call_keys.spelling_reads import Reads  # noqa: E402

KERNEL = """
import enum

import tilelang
import tilelang.language as T


class Mode(enum.Enum):
    FAST = 64
    SLOW = 128
    QUICK = 64  # an alias of FAST

    def threads(self):
        return self.value * 2

    @property
    def half(self):
        return self.value // 2

    @classmethod
    def default(cls):
        return Mode.FAST


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2

    def blocks(self):
        return self * 32


def make(mode):
    @tilelang.jit(out_idx=[-1])
    def scaled(N):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=mode.threads()) as _:
                for i in T.Parallel(N):
                    Y[i] = X[i] * mode.half

        return main

    return scaled


@tilelang.jit(out_idx=[-1])
def given(N, mode, level):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(level.blocks(), threads=mode.threads()) as _:
            for i in T.Parallel(N):
                Y[i] = X[i]

    return main


@tilelang.jit(out_idx=[-1])
def by_default(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=Mode.default().threads()) as _:
            for i in T.Parallel(N):
                Y[i] = X[i]

    return main
"""


@pytest.fixture
def kmod(tmp_path, monkeypatch):
    """A user's kernel module, imported from a file (its source is what the key digests): :data:`KERNEL` unless told."""
    return lambda name, text=KERNEL: load_user_module(tmp_path, monkeypatch, name, text)


def _keys(k) -> tuple[str | None, str | None, str | None]:
    """The key of a factory closing over a member, of the jit given members, of the jit reading the enum class."""
    return (
        call_key(k.make(k.Mode.FAST), (256,), {}, "90"),
        call_key(k.given, (256, k.Mode.SLOW, k.Level.HIGH), {}, "90"),
        call_key(k.by_default, (256,), {}, "90"),
    )


def test_a_users_enum_keys_its_calls_as_the_reference_spells_them(kmod):
    """Each way a kernel reads a user's enum is keyed (the enum class read by name too), byte for byte the reference's."""
    k = kmod("en_keyed")
    keys = _keys(k)
    assert None not in keys and len(set(keys)) == 3
    assert keys == (
        reference_key(k.make(k.Mode.FAST), (256,), {}, "90"),
        reference_key(k.given, (256, k.Mode.SLOW, k.Level.HIGH), {}, "90"),
        reference_key(k.by_default, (256,), {}, "90"),
    )
    assert _keys(k) == keys  # asked again: the same
    for value in (k.Mode.FAST, k.Mode.QUICK, k.Level.LOW, k.Mode, k.Level, [k.Mode.SLOW, k.Level.HIGH]):
        assert ck._text(value, ck._DEPTH, Reads()) == reference_text(value), value
    assert call_key(k.make(k.Mode.SLOW), (256,), {}, "90") not in (None, keys[0])  # another member, another key


@pytest.mark.parametrize(
    ("change", "edit"),
    [
        ("a member's value", ("    SLOW = 128\n", "    SLOW = 256\n")),
        ("the aliased member's value", ("    FAST = 64\n    SLOW = 128\n    QUICK = 64", "    FAST = 32\n    SLOW = 128\n    QUICK = 32")),
        ("a method's body", ("return self.value * 2", "return self.value * 4")),
        ("a property's body", ("return self.value // 2", "return self.value // 4")),
        ("a class method's body", ("return Mode.FAST", "return Mode.SLOW")),
        ("an IntEnum's value", ("    HIGH = 2\n", "    HIGH = 3\n")),
        ("an IntEnum's method", ("return self * 32", "return self * 64")),
        ("a member added", ("    QUICK = 64  # an alias of FAST\n", "    QUICK = 64  # an alias of FAST\n    HUGE = 512\n")),
    ],
)  # fmt: skip
def test_what_a_users_enum_is_made_of_moves_the_key(kmod, change, edit):
    """Each edit changes what a kernel reading the enum can build: a key that reads the edited part moves, none is lost."""
    before = _keys(kmod("en_edit"))
    edited = kmod("en_edit", KERNEL.replace(*edit))
    after = _keys(edited)
    assert None not in after, change
    assert after != before, change
    reads_mode = change not in ("an IntEnum's value", "an IntEnum's method")
    if reads_mode:  # every key reads Mode's body: each moves
        assert all(a != b for a, b in zip(after, before)), change
    else:  # only the jit given a Level reads it
        assert after[1] != before[1] and after[0] == before[0], change


def test_a_library_enum_is_spelled_by_name_as_before():
    """TileLang's, torch's and the standard library's own enums are covered by their versions: their spelling is unchanged."""
    import tilelang

    key = tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED
    assert ck._text(key, ck._DEPTH, Reads()) == reference_text(key)
    expected = f'"{key.value}"' if isinstance(key, str) else f'["enum","tilelang.transform.pass_config.PassConfigKey","{key.name}"]'
    assert ck._text(key, ck._DEPTH, Reads()) == expected
    assert ck._text(enum.Enum, ck._DEPTH, Reads()) == '["class","enum.Enum"]'


def test_a_flag_combination_and_a_mixin_are_spelled(kmod):
    """A flag's combined member (``A | B``, no member of its own) and a user's mixin class are spelled as the reference."""
    text = (
        "import enum\n\nclass Tiles:\n    UNIT = 16\n\n    def tiles(self):\n        return self.UNIT * 2\n\n"
        "class Opt(Tiles, enum.Flag):\n    A = 1\n    B = 2\n"
    )
    k = kmod("en_flag", text)
    for value in (k.Opt.A | k.Opt.B, k.Opt.A, k.Opt):
        assert ck._text(value, ck._DEPTH, Reads()) == reference_text(value), value
    edited = kmod("en_flag", text.replace("UNIT = 16", "UNIT = 32"))
    assert ck._text(edited.Opt.A, ck._DEPTH, Reads()) != ck._text(k.Opt.A, ck._DEPTH, Reads())


def test_an_enum_that_cannot_be_spelled_leaves_its_call_unkeyed(kmod):
    """A member whose value is a tensor: the call is unkeyed (served by its traced prim_func), never a traceback."""
    import torch

    k = kmod("en_tensor", KERNEL.replace("    SLOW = 128\n", "    SLOW = 128\n    BAD = __import__('torch').ones(1)\n"))
    assert call_key(k.make(k.Mode.FAST), (256,), {}, "90") is None
    assert isinstance(k.Mode.BAD.value, torch.Tensor)


def test_enum_keys_are_the_same_in_another_process(tmp_path):
    """A capture and the served run are two processes with two hash seeds: a user's enum keys their calls alike."""
    (tmp_path / "en_proc.py").write_text(KERNEL)
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); from tl_aot.call_keys.key import call_key; import en_proc as k; "
        "print(call_key(k.make(k.Mode.FAST), (256,), {}, '90'), call_key(k.given, (256, k.Mode.SLOW, k.Level.HIGH), {}, '90'))"
    )
    keys = keys_in_two_processes(tmp_path, probe)
    assert len(keys) == 1 and [len(key) for key in next(iter(keys)).split()] == [32, 32], keys
