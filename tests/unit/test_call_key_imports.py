"""Call keys of kernels that read the user's other modules: imported in their body, or a module global read by attribute.

``from .tiles import BLOCK`` in a factory (an import cycle dodged) reads without a ``LOAD_GLOBAL``: a
key that did not spell it stayed the same when the user edited ``BLOCK = 128`` to ``256`` in
``tiles.py``, and a served call was answered with the kernel built for 128. ``tiles.BLOCK`` off a
module imported at the top made the call unkeyed (traced, ~25 ms); it is keyed by the attributes
the code reads.
"""

from __future__ import annotations

import dis
import importlib
import json
import sys
import types
from pathlib import Path

import pytest

pytest.importorskip("tilelang")

from support.call_key_reference import reference_key  # noqa: E402
from support.user_modules import keys_in_two_processes, load_user_module, write_source  # noqa: E402

from tl_aot.call_keys import key as ck  # noqa: E402
from tl_aot.call_keys.code_imports import Import, code_imports  # noqa: E402
from tl_aot.call_keys.key import call_key  # noqa: E402

#: A kernel importing only from libraries in its body (TileLang, math): keyed as it was before imports were read.
LIBRARY_ONLY = """@tilelang.jit(out_idx=[-1])
def library_only(N):
    import tilelang.language as TL
    from math import ceil

    @TL.prim_func
    def main(X: TL.Tensor((N,), "float32"), Y: TL.Tensor((N,), "float32")):
        with TL.Kernel(ceil(N / 128), threads=128) as _:
            for i in TL.Parallel(N):
                Y[i] = X[i]

    return main
"""

TILES = """
BLOCK = 128
SCALE = 2.0


def threads(n):
    return min(n, BLOCK)
"""

KERNELS = (
    """
import tilelang
import tilelang.language as T

from . import tiles


@tilelang.jit(out_idx=[-1])
def relative(N):
    from .tiles import BLOCK, SCALE

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                Y[bx * BLOCK + i] = X[bx * BLOCK + i] * SCALE

    return main


@tilelang.jit(out_idx=[-1])
def absolute(N):
    from PKG.tiles import threads

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads(N)) as _:
            for i in T.Parallel(N):
                Y[i] = X[i]

    return main


def block():
    from .tiles import BLOCK

    return BLOCK


@tilelang.jit(out_idx=[-1])
def through_a_helper(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=block()) as _:
            for i in T.Parallel(N):
                Y[i] = X[i]

    return main


@tilelang.jit(out_idx=[-1])
def by_attribute(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, tiles.BLOCK), threads=tiles.threads(N)) as bx:
            for i in T.Parallel(tiles.BLOCK):
                Y[bx * tiles.BLOCK + i] = X[bx * tiles.BLOCK + i]

    return main


"""
    + LIBRARY_ONLY
)

ENTRIES = ("relative", "absolute", "through_a_helper", "by_attribute", "library_only")


@pytest.fixture
def package(tmp_path, monkeypatch):
    """``package(name, tiles=TILES, kernels=KERNELS)``: a user's package ``name`` (tiles.py, kernels.py) imported afresh."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def load(name: str, tiles: str = TILES, kernels: str = KERNELS):
        folder = tmp_path / name
        folder.mkdir(exist_ok=True)
        write_source(folder / "__init__.py", "")
        write_source(folder / "tiles.py", tiles)
        write_source(folder / "kernels.py", kernels.replace("PKG", name))
        for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
            monkeypatch.delitem(sys.modules, module)
        importlib.invalidate_caches()
        return importlib.import_module(f"{name}.kernels")

    return load


def _keys(k) -> dict[str, str | None]:
    return {name: call_key(getattr(k, name), (256,), {}, "90") for name in ENTRIES}


def test_imports_in_the_body_key_the_values_they_read_as_the_reference_spells_them(package):
    """Relative, absolute and a helper's imports are keyed, byte for byte the reference speller's; asked again, the same."""
    k = package("imp_keyed")
    keys = _keys(k)
    assert None not in keys.values() and len(set(keys.values())) == len(ENTRIES)
    assert keys == {name: reference_key(getattr(k, name), (256,), {}, "90") for name in ENTRIES}
    assert _keys(k) == keys


def test_the_spelling_names_each_imported_value_by_its_module_and_a_library_import_adds_nothing(package):
    """What a kernel imports from the user's package is in its spelling by absolute name; TileLang's and math's are not."""
    k = package("imp_named")
    relative = json.loads(ck._function_text(k.relative))
    assert relative[4]["from imp_named.tiles import BLOCK"] == 128 and relative[4]["from imp_named.tiles import SCALE"] == 2.0
    library = json.loads(ck._function_text(k.library_only))
    assert not [name for name in library[4] if name.startswith("from ")], library[4]  # the key it had before imports were read


@pytest.mark.parametrize(
    ("change", "edit", "moved"),
    [
        ("an imported constant", ("BLOCK = 128", "BLOCK = 256"), {"relative", "absolute", "through_a_helper", "by_attribute"}),
        ("another imported constant", ("SCALE = 2.0", "SCALE = 3.0"), {"relative"}),
        ("an imported function's body", ("return min(n, BLOCK)", "return max(n, BLOCK)"), {"absolute", "by_attribute"}),
    ],
)
def test_an_edited_imported_value_moves_the_keys_of_the_kernels_that_import_it(package, change, edit, moved):
    """Each kernel importing the edited value gets a new key (never the old kernel); the others keep theirs (still served)."""
    before = _keys(package("imp_edit"))
    after = _keys(package("imp_edit", tiles=TILES.replace(*edit)))
    assert None not in after.values(), change
    assert {name for name in ENTRIES if after[name] != before[name]} == moved, change


@pytest.mark.parametrize("entry", ["relative", "by_attribute"])
def test_a_value_rebound_in_the_live_module_moves_a_kept_key(package, entry):
    """A kept spelling is checked against the module it read: ``tiles.BLOCK = 256`` at run time moves the key."""
    k = package(f"imp_live_{entry}")
    tiles = sys.modules[f"imp_live_{entry}.tiles"]
    first = call_key(getattr(k, entry), (256,), {}, "90")
    tiles.BLOCK = 256
    assert call_key(getattr(k, entry), (256,), {}, "90") not in (None, first)
    tiles.BLOCK = 128
    assert call_key(getattr(k, entry), (256,), {}, "90") == first


def test_a_module_read_by_attribute_is_spelled_by_the_attributes_its_code_reads(package):
    """``tiles.BLOCK`` and ``tiles.threads(N)`` in the kernel and its prim_func: the module by name and those two values."""
    k = package("imp_attrs")
    spelled = json.loads(ck._function_text(k.by_attribute))[4]["tiles"]
    assert spelled[:2] == ["user module", "imp_attrs.tiles"] and sorted(spelled[2]) == ["BLOCK", "threads"]
    assert spelled[2]["BLOCK"] == 128 and spelled[2]["threads"][0] == "function"


@pytest.mark.parametrize(
    ("what", "body"),
    [
        ("a user's module into a local", "import PKG.tiles as t\n    BLOCK = t.BLOCK"),
        ("a user's submodule", "from . import tiles as t\n    BLOCK = t.BLOCK"),
        ("a name the module lacks", "from .tiles import MISSING as BLOCK"),
        ("a third-party module into a local", "import json as BLOCK"),
        ("a module global passed on", "BLOCK = len(dir(tiles))"),
        ("a module global read by a computed name", 'BLOCK = getattr(tiles, "BL" + "OCK")'),
    ],
)
def test_an_import_the_key_cannot_follow_leaves_the_call_unkeyed(package, what, body):
    """What the body reads off a module it holds is not followed: unkeyed (served by its traced prim_func), never a guess."""
    kernels = KERNELS.replace("from .tiles import BLOCK, SCALE", body + "\n    SCALE = 2.0")
    k = package("imp_unkeyed", kernels=kernels)
    assert call_key(k.relative, (256,), {}, "90") is None, what
    assert call_key(k.absolute, (256,), {}, "90") is not None  # the module's other kernels stay keyed


def test_a_module_the_body_has_not_imported_yet_is_unkeyed_until_it_is(package):
    """Before the body first runs its import, the module's values are unknown here: unkeyed; once imported, keyed as the reference."""
    k = package("imp_later", kernels=KERNELS.replace("from . import tiles\n", "import tilelang as _unused  # noqa: F401\n"))
    assert "imp_later.tiles" not in sys.modules
    assert call_key(k.relative, (256,), {}, "90") is None
    importlib.import_module("imp_later.tiles")
    assert call_key(k.relative, (256,), {}, "90") == reference_key(k.relative, (256,), {}, "90") is not None


def test_code_imports_are_read_off_the_bytecode_with_their_level_and_names():
    """Each import statement, nested functions' too; code without one is read as none."""

    def body():
        import os.path  # noqa: F401
        from json import dumps, loads  # noqa: F401

        def inner():
            from .. import up  # noqa: F401

        return inner

    assert code_imports(body.__code__) == (Import("os.path", 0, None), Import("json", 0, ("dumps", "loads")), Import("", 2, ("up",)))
    assert code_imports(_keys.__code__) == ()


def test_import_keys_are_the_same_in_another_process(tmp_path):
    """A capture and the served run are two processes with two hash seeds: kernels importing in their body key alike."""
    folder = tmp_path / "imp_proc"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "tiles.py").write_text(TILES)
    (folder / "kernels.py").write_text(KERNELS.replace("PKG", "imp_proc"))
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); from tl_aot.call_keys.key import call_key; import imp_proc.kernels as k; "
        "print(*[call_key(getattr(k, n), (256,), {}, '90') for n in ('relative', 'absolute', 'through_a_helper', 'by_attribute')])"
    )
    keys = keys_in_two_processes(tmp_path, probe)
    assert len(keys) == 1 and [len(key) for key in next(iter(keys)).split()] == [32, 32, 32, 32], keys


def test_a_value_imported_twice_is_spelled_once_as_json_writes_it(package):
    """The body and a function defined in it importing the same value: one entry, the key byte for byte the reference's."""
    again = "\n    def again():\n        from .tiles import BLOCK\n\n        return BLOCK\n\n    _ = again\n"
    kernels = KERNELS.replace("def block():\n    from .tiles import BLOCK\n", "def block():\n    from .tiles import BLOCK\n" + again)
    k = package("imp_twice", kernels=kernels)
    pairs = json.loads(ck._function_text(k.block), object_pairs_hook=lambda items: items)
    assert [name for name, _ in pairs[4]] == ["from imp_twice.tiles import BLOCK"]
    assert call_key(k.through_a_helper, (256,), {}, "90") == reference_key(k.through_a_helper, (256,), {}, "90") is not None


def test_a_name_only_the_modules_getattr_makes_leaves_the_call_unkeyed(package):
    """``from .tiles import LAZY`` answered by the module's ``__getattr__``: not in its dict, so not keyed (never a guess)."""
    tiles = TILES + "\n\ndef __getattr__(name):\n    if name == 'LAZY':\n        return 64\n    raise AttributeError(name)\n"
    kernels = KERNELS.replace("from .tiles import BLOCK, SCALE", "from .tiles import LAZY as BLOCK, SCALE")
    k = package("imp_lazy", tiles=tiles, kernels=kernels)
    assert call_key(k.relative, (256,), {}, "90") is None
    with pytest.raises(ck.Unkeyable):
        reference_key(k.relative, (256,), {}, "90")
    assert call_key(k.absolute, (256,), {}, "90") is not None


def test_every_name_of_a_users_module_leaves_the_call_unkeyed(package, tmp_path):
    """``from M import *`` (a syntax error in a ``def``, so only in code compiled as a module's): what it binds is not followed."""
    package("imp_star")  # imp_star.tiles imported
    script = tmp_path / "imp_star_body.py"
    script.write_text("from imp_star.tiles import *\nresult = BLOCK * 2\n")
    body = types.FunctionType(compile(script.read_text(), str(script), "exec"), {"__name__": "imp_star_body"})
    assert call_key(body, (256,), {}, "90") is None
    library = tmp_path / "imp_star_library.py"
    library.write_text("from math import *\nresult = ceil(2.5)\n")
    keyed = types.FunctionType(compile(library.read_text(), str(library), "exec"), {"__name__": "imp_star_library"})
    assert call_key(keyed, (256,), {}, "90") is not None  # the standard library's names: covered by the versions


def test_code_imports_read_off_the_bytecode_are_what_dis_reads():
    """Every import of every code object of tl_aot (1,700: its lazy imports), one whose name needs an EXTENDED_ARG, and none
    where the opcode's value is only an argument's byte."""

    def by_dis(code: types.CodeType) -> list[Import]:
        ins = [i for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"]
        found = [Import(x.argval, ins[n - 2].argval, ins[n - 1].argval) for n, x in enumerate(ins) if x.opname == "IMPORT_NAME"]
        return found + [i for c in code.co_consts if isinstance(c, types.CodeType) for i in by_dis(c)]

    seen = 0
    for path in sorted((Path(__file__).parents[2] / "tl_aot").rglob("*.py")):
        code = compile(path.read_text(), str(path), "exec")
        assert list(code_imports(code) or ()) == by_dis(code), path
        seen += len(by_dis(code))
    assert seen > 1000
    many = "def f():\n" + "".join(f"    x{i} = y{i}\n" for i in range(300)) + "    from m300 import z\n"
    [f] = [c for c in compile(many, "<many>", "exec").co_consts if isinstance(c, types.CodeType)]
    assert code_imports(f) == (Import("m300", 0, ("z",)),)
    [g] = [c for c in compile(many.replace("from m300 import z", "z = 0"), "<many>", "exec").co_consts if isinstance(c, types.CodeType)]
    assert dis.opmap["IMPORT_NAME"] in g.co_code[1::2] and code_imports(g) == ()  # the opcode's value as an argument: no import


#: A kernel module with no import in its kernels' bodies but a library's: its keys are pinned (:data:`PINNED`).
FIXED = (
    """
import tilelang
import tilelang.language as T

BLOCK = 128


def threads(n):
    return min(n, BLOCK)


def make(scale):
    @tilelang.jit(out_idx=[-1])
    def plain(N, bias=1.0):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, BLOCK), threads=threads(N)) as bx:
                for i in T.Parallel(BLOCK):
                    Y[bx * BLOCK + i] = X[bx * BLOCK + i] * scale + bias

        return main

    return plain


"""
    + LIBRARY_ONLY
)
#: :data:`FIXED`'s function spellings and call keys (TileLang's version read as "0.0.test"), as tl_aot spelled them before
#: it read imports (3aa16f5): libraries built then still serve these calls. Re-pinned only with a CALL_SCHEMA bump.
PINNED = {
    "plain": (
        '["function","imp_fixed.make.<locals>.plain","5e15dff99b2c2b5f",{"scale":2.0},{"BLOCK":128,"T":["module","tilelang.language"],'
        '"threads":["function","imp_fixed.threads","7b3c41b0f0c42674",{},{"BLOCK":128},[["list",[]],["dict",[]]]]},'
        '[["list",[1.0]],["dict",[]]]]',
        "a68784e525f40bf77fca607ac3bacf1c",
    ),
    "library_only": (
        '["function","imp_fixed.library_only","0bd19a5692813e1e",{},{},[["list",[]],["dict",[]]]]',
        "7b31dcacf159d75d3b58552ee5bde619",
    ),
}


def test_a_kernel_without_a_users_import_keeps_the_key_it_had_before_imports_were_read(tmp_path, monkeypatch):
    """No schema bump: a library built before imports were read still serves these calls (their keys, byte for byte, pinned)."""
    monkeypatch.setattr(ck, "_VERSION", ["0.0.test"])
    k = load_user_module(tmp_path, monkeypatch, "imp_fixed", FIXED)
    for name, jit in (("plain", k.make(2.0)), ("library_only", k.library_only)):
        assert (ck._function_text(jit), call_key(jit, (256,), {}, "90")) == PINNED[name], name
