"""Serving answers a ``@tilelang.jit`` call by its call key, before TileLang traces; anything the key misses is a miss."""

from __future__ import annotations

import enum
import gc
import sys
import types
from pathlib import Path

import pytest

pytest.importorskip("tilelang")

from support.call_key_reference import reference_key, reference_text  # noqa: E402
from support.served_fakes import fake_library  # noqa: E402
from support.user_modules import load_user_module  # noqa: E402

from tl_aot.call_keys.key import call_key  # noqa: E402
from tl_aot.capture.record import CaptureRecord  # noqa: E402
from tl_aot.capture.recorder import Capturer  # noqa: E402
from tl_aot.config.user_code import user_function  # noqa: E402
from tl_aot.gpu.cuda_driver import emulating, gpu_identity  # noqa: E402
from tl_aot.gpu.device import PROFILES, emulate  # noqa: E402
from tl_aot.jit.seam import Interception, intercepting, jit_module, uninstall  # noqa: E402
from tl_aot.serving import active  # noqa: E402
from tl_aot.serving import server as serving  # noqa: E402
from tl_aot.serving.served_kernel import ServedKernel  # noqa: E402

KERNEL = """
import tilelang
import tilelang.language as T

SCALE = 2.0


def make(shift):
    @tilelang.jit(out_idx=[-1])
    def add(N):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=128) as _:
                for i in T.Parallel(N):
                    Y[i] = X[i] * SCALE + shift

        return main

    return add
"""


@pytest.fixture
def kmod(tmp_path, monkeypatch):
    """A user's kernel module, imported from a file (its source is what the key digests): :data:`KERNEL` unless told."""
    return lambda name, text=KERNEL: load_user_module(tmp_path, monkeypatch, name, text)


@pytest.fixture
def traces(monkeypatch):
    """How many times TileLang built a prim_func (``JITImpl.get_tir``)."""
    calls = []
    real = jit_module().JITImpl.get_tir

    def counting(self, *args, **kwargs):
        calls.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(jit_module().JITImpl, "get_tir", counting)
    return calls


def _library(record, request_key: str):
    """A library holding the captured kernel as entry ``add_k``."""
    return fake_library(record, request_key, "add_k", "add")


def _capture(tmp_path, jit, n: int) -> str:
    cap = Capturer(tmp_path / "r.json", compile_for_real=False)
    with intercepting(Interception(cap._on_request, name="capture")):
        jit.compile(n)
    cap.flush()
    [(key, item)] = CaptureRecord.load(tmp_path / "r.json").kernels.items()
    assert item["calls"], "the capture recorded the call's key"
    return key


def test_a_served_jit_call_never_traces_and_a_changed_closure_or_global_misses(tmp_path, kmod, traces, monkeypatch):
    k = kmod("kern_a")
    with emulating("90"):
        request_key = _capture(tmp_path, k.make(1.0), 256)
        assert len(traces) == 1  # the capture traced once
        monkeypatch.setattr(active, "_installed", [])
        monkeypatch.setattr(active, "_active", serving.Server([_library(tmp_path / "r.json", request_key)], strict=True))
        active._patch(jit_module())
        try:
            kernel = k.make(1.0)(256)  # a new @tilelang.jit object, called as a library calls it
            assert isinstance(kernel, ServedKernel) and kernel(1, 2)[:2] == ("ran", "add_k")
            assert len(traces) == 1, "served before TileLang built the prim_func"
            assert active._active.stats.served_untraced == 1
            assert (active._active.stats.lookups, active._active.stats.call_lookups) == (1, 1)  # one lookup, by call key
            assert kernel.prim_func is not None and len(traces) == 2  # traced only when asked for
            with pytest.raises(serving.KernelNotServed):
                k.make(2.0)(256)  # another value in its closure: another kernel
            assert len(traces) == 3  # it was keyed by its prim_func, which no library holds
            st = active._active.stats  # its call key missed, then its traced prim_func was hashed: counted apart
            assert (st.lookups, st.call_lookups) == (3, 2) and st.lookup_s >= st.call_lookup_s
            monkeypatch.setattr(k, "SCALE", 3.0)
            with pytest.raises(serving.KernelNotServed):
                k.make(1.0)(256)  # a global it reads changed
            assert active._active.stats.served_untraced == 1
        finally:
            uninstall(active._installed[0])


def test_the_call_key_covers_source_closure_globals_arguments_and_gpu(kmod):
    a = kmod("kern_b")
    key = call_key(a.make(1.0), (256,), {}, "90")
    assert key and key == call_key(a.make(1.0), (256,), {}, "90")
    assert key != call_key(a.make(1.0), (512,), {}, "90")
    assert key != call_key(a.make(1.0), (256,), {}, "80")
    assert call_key(a.make(1.0), (256,), {}, "90:sms=132") != call_key(a.make(1.0), (256,), {}, "90:sms=114")  # SXM, PCIe
    assert key != call_key(a.make(1.5), (256,), {}, "90")
    b = kmod("kern_b", KERNEL.replace("X[i] * SCALE + shift", "X[i] * SCALE - shift"))
    assert call_key(b.make(1.0), (256,), {}, "90") not in (None, key)  # same name, other source


def test_a_call_that_cannot_be_spelled_is_not_keyed(kmod):
    k = kmod("kern_c", KERNEL.replace("def make(shift):", "def make(shift, box=object()):\n    _ = box"))
    assert call_key(k.make(1.0), (256,), {}, "90") is not None  # box is not read by the jit function
    text = KERNEL.replace("SCALE = 2.0", "class Scale:\n    value = 2.0\n\n\nSCALE = Scale()").replace("SCALE +", "SCALE.value +")
    d = kmod("kern_d", text)
    key = call_key(d.make(1.0), (256,), {}, "90")  # a user's object, spelled (its class body, its attributes) each call
    assert key is not None and key == reference_key(d.make(1.0), (256,), {}, "90")
    d.Scale.value = 3.0  # changed in place: the next call's key moves
    assert call_key(d.make(1.0), (256,), {}, "90") not in (None, key)
    slotted = text.replace("class Scale:\n", "class Scale:\n    __slots__ = ()\n")
    assert call_key(kmod("kern_d2", slotted).make(1.0), (256,), {}, "90") is None  # slots: not read whole, not spelled
    assert call_key(kmod("kern_e").make(1.0), (object(),), {}, "90") is None  # an argument compared by identity
    helper = kmod("kern_cfg", "BLOCK = 128\n")
    text = KERNEL.replace("import tilelang\n", "import tilelang\nimport kern_cfg\n")
    passed_on = text.replace("+ shift", '+ shift + getattr(kern_cfg, "BL" + "OCK")')
    assert call_key(kmod("kern_f", passed_on).make(1.0), (256,), {}, "90") is None  # a user's module read by a computed name
    assert helper.BLOCK == 128


@pytest.mark.parametrize(
    ("how", "read"),
    [
        ("globals() by a computed name", 'globals()["SC" + "ALE"]'),
        ("its own module by __import__", '__import__("kern_dyn").SCALE'),
        ("eval of a string", 'eval("SCALE")'),
        ("a file", 'float(open(__file__ + ".scale").read())'),
    ],
)  # fmt: skip
def test_a_function_reading_what_no_spelling_covers_is_not_keyed(kmod, tmp_path, how, read):
    """Globals read by a computed name or a file's contents: the key could not move when they change, so there is none.

    Its helper calling ``open`` is unkeyed too; a module global of the user's that shadows one of these names is a value.
    """
    (tmp_path / "kern_dyn.py.scale").write_text("2.0")
    k = kmod("kern_dyn", KERNEL.replace("X[i] * SCALE", f"X[i] * {read}"))
    assert k.make(1.0) is not None and call_key(k.make(1.0), (256,), {}, "90") is None, how
    helped = KERNEL.replace("SCALE = 2.0", "def scale():\n    return float(open(__file__ + '.scale').read())")
    assert call_key(kmod("kern_dyn2", helped.replace("X[i] * SCALE", "X[i] * scale()")).make(1.0), (256,), {}, "90") is None
    shadowed = kmod("kern_dyn3", KERNEL.replace("SCALE = 2.0", "SCALE = 2.0\nopen = 3").replace("X[i] * SCALE", "X[i] * open"))
    key = call_key(shadowed.make(1.0), (256,), {}, "90")
    assert key is not None and key == reference_key(shadowed.make(1.0), (256,), {}, "90")


def test_a_gpu_is_identified_by_what_a_factory_may_read_of_it():
    with emulate(PROFILES["H100-SXM"]):
        sxm = gpu_identity()
    with emulate(PROFILES["H100-PCIe"]):
        pcie = gpu_identity()
    assert sxm.startswith("90:sms=132,") and pcie.startswith("90:sms=114,")
    with emulating("90"):
        assert gpu_identity() == "90:"


def test_a_parameter_default_is_part_of_the_key(kmod):
    k = kmod("kern_g", KERNEL.replace("def add(N):", "def add(N, bias=shift):").replace("+ shift", "+ bias"))
    assert call_key(k.make(1.0), (256,), {}, "90") != call_key(k.make(2.0), (256,), {}, "90")


def test_the_kernels_of_a_library_are_keyed():
    """Helpers, TileLang's classes and modules read by the function are spelled: every @tilelang.jit kernel here is keyed."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "kernels"))
    import faithful

    calls = [
        (faithful.gemm_jit, (512, 512, 512)),
        (faithful.flashattn_fwd, (1, 2, 256, 64)),
        (faithful.flashattn_bwd, (1, 2, 256, 64)),  # reads a helper of its module that builds a tl.Fragment
        (faithful.bmm_fp8_persistent, (4, 256, 256, 256)),
        (faithful.attn_fwd_persistent_causal, (1, 2, 256, 128)),
    ]
    keys = [call_key(jit, args, {}, "90:sms=132") for jit, args in calls]
    assert all(keys) and len(set(keys)) == len(keys)


def test_a_kept_spelling_gives_the_key_spelled_afresh_and_spells_nothing_again(kmod, monkeypatch):
    from tl_aot.call_keys import key as ck

    jit = kmod("kern_memo").make(1.0)
    spelled = []
    real = ck._function_text_of
    monkeypatch.setattr(ck, "_function_text_of", lambda *a: spelled.append(a[0]) or real(*a))
    keys = [call_key(jit, (n,), {"k": n} if n % 2 else {}, "90:sms=132") for n in (256, 512, 1024, 2048)]
    assert spelled == [jit]  # spelled for the first call; the later ones (other arguments) re-checked what it read
    assert len(set(keys)) == 4
    for n, key in zip((256, 512, 1024, 2048), keys):
        assert key == reference_key(jit, (n,), {"k": n} if n % 2 else {}, "90:sms=132")
    tricky = ('x,"gpu":1', {"gpu": ',"gpu":'})  # the text the function's spelling is spliced before, inside values
    assert call_key(jit, tricky, {"a": tricky[0]}, "90") == reference_key(jit, tricky, {"a": tricky[0]}, "90")


@pytest.mark.parametrize(
    "change",
    [
        "global",  # a module global the function reads is rebound
        "closure",  # a closure cell is rebound (nonlocal)
        "defaults",  # its parameter defaults are replaced
        "code",  # its code is replaced
        "list",  # a list it reads is changed in place
        "kwdefaults",  # its keyword-only defaults dict is changed in place
    ],
)
@pytest.mark.parametrize("asked", [1, 20])  # checked by a pass over what it read; by columns once asked often
def test_a_kept_spelling_is_never_used_once_what_it_read_changed(kmod, change, asked):
    from tl_aot.call_keys import key as ck

    text = KERNEL.replace("def add(N):", "def add(N, bias=0.5):").replace("+ shift", "+ shift + bias")
    if change == "list":
        text = text.replace("SCALE = 2.0", "SCALE = 2.0\nROWS = [1, 2]").replace("+ bias", "+ bias + ROWS[0]")
    if change == "kwdefaults":
        text = text.replace("bias=0.5):", "bias=0.5, *, scale=1.0):").replace("+ bias", "+ bias + scale")
    other = text[text.index("def make(") :].replace("def make(", "def make_other(").replace("+ shift", "- shift")
    k = kmod(f"kern_change_{change}", text + "\n\n" + other)
    jit = k.make(1.0)
    fn = user_function(jit.func)  # the user's function behind TileLang's wrapper
    before = call_key(jit, (256,), {}, "90")
    assert call_key(jit, (512,), {}, "90") != before and call_key(jit, (256,), {}, "90") == before
    kept = id(jit) in ck._SPELLED
    assert kept == (change not in ("list", "kwdefaults"))  # what may change in place is spelled every time
    for _ in range(asked):
        assert call_key(jit, (256,), {}, "90") == before
    assert not kept or (ck._SPELLED[id(jit)][1]._check is not None) == (asked > 1)
    if change == "global":
        k.SCALE = 3.0
    elif change == "closure":
        fn.__closure__[fn.__code__.co_freevars.index("shift")].cell_contents = 2.0
    elif change == "defaults":
        fn.__defaults__ = (0.25,)
    elif change == "code":
        fn.__code__ = user_function(k.make_other(1.0).func).__code__  # another body (same free variables)
    elif change == "list":
        k.ROWS[0] = 7
    elif change == "kwdefaults":
        fn.__kwdefaults__["scale"] = 2.0
    after = call_key(jit, (256,), {}, "90")
    assert after != before and after == reference_key(jit, (256,), {}, "90")


def test_global_names_read_off_the_bytes_are_what_dis_reads():
    """The key's global names come from a direct scan of the bytecode: the same set ``dis`` gives, for every code object of tl_aot."""
    import dis

    from tl_aot.call_keys.code_globals import loaded_globals

    def codes(code):
        yield code
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                yield from codes(const)

    root = Path(__file__).parents[2] / "tl_aot"
    seen = 0
    for path in sorted(root.rglob("*.py")):
        for code in codes(compile(path.read_text(), str(path), "exec")):
            want = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
            assert loaded_globals(code) == want, (path, code.co_name)
            seen += 1
    assert seen > 2000  # every function, class body and comprehension of the package


HELPED = KERNEL.replace("SCALE = 2.0\n", "SCALE = 2.0\n\n\ndef scaled(x):\n    return x * SCALE\n").replace("X[i] * SCALE", "scaled(X[i])")


def test_a_new_closure_of_a_kept_function_is_keyed_afresh_and_an_edited_helper_or_global_changes_it(kmod):
    """A factory's new @tilelang.jit objects share the spelling of their globals (helpers included) only while it holds."""
    k = kmod("kern_helped", HELPED)
    keys = [call_key(k.make(s), (256,), {}, "90") for s in (1.0, 1.0, 2.0)]  # new closures over one code object
    assert keys[0] == keys[1] != keys[2]
    assert keys == [reference_key(k.make(s), (256,), {}, "90") for s in (1.0, 1.0, 2.0)]
    k.SCALE = 3.0  # a global the helper reads
    assert call_key(k.make(1.0), (256,), {}, "90") not in (None, keys[0])
    edited = kmod("kern_helped", HELPED.replace("return x * SCALE", "return x * SCALE * 2"))  # the helper's source, reloaded
    assert call_key(edited.make(1.0), (256,), {}, "90") not in (None, keys[0])


def test_a_call_key_is_the_same_in_a_fresh_process(kmod, tmp_path):
    """A capture and the served run are two processes: the key depends on nothing of the process (memos, hash seeds)."""
    import subprocess

    here = call_key(kmod("kern_fresh", HELPED).make(1.0), (256,), {"block": ("a", 1)}, "90:sms=132")
    code = (
        "import kern_fresh\nfrom tl_aot.call_keys.key import call_key\n"
        "print(call_key(kern_fresh.make(1.0), (256,), {'block': ('a', 1)}, '90:sms=132'))"
    )
    env = {"PYTHONPATH": ":".join([str(tmp_path), *sys.path]), "PATH": "", "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert here and out.stdout.split()[-1] == here


class _Color(enum.Enum):
    RED = 1


class _Level(enum.IntEnum):
    HIGH = 3


class _Name(str):
    pass


class _Pair(tuple):
    pass


class _Tiling:
    """A user's helper object, as a kernel factory closes over one (TileOPs' ``GroupTiling``)."""

    UNIT = 32

    def __init__(self, groups, block):
        self.groups, self.block = groups, block

    @property
    def bound(self):
        groups = self.groups

        def bound_of(n):
            return n // self.UNIT + groups

        return bound_of

    @staticmethod
    def steps(n):
        return max(1, (n - 1).bit_length())

    @classmethod
    def of(cls, n):
        return cls(n, cls.UNIT)

    def rows(self, tiles):
        return tiles * self.block


class _Wider(_Tiling):
    UNIT = 64


class _Slotted:
    __slots__ = ("n",)


class _Guarded(_Tiling):
    """Hides its ``__dict__`` from attribute reads: spelled from the instance's own dict, its ``__getattribute__`` in the key."""

    def __getattribute__(self, name):
        if name == "__dict__":
            raise RuntimeError("not for reading")
        return object.__getattribute__(self, name)


class _Meta(type):
    def __dir__(cls):
        raise RuntimeError("a metaclass of the user's: its classes are not spelled")


class _Measured(metaclass=_Meta):
    pass


def test_a_value_is_written_as_json_writes_its_spelling():
    """The key's JSON is written directly; for every kind of value it is ``json.dumps`` of the spelling, byte for byte."""
    import math

    import torch

    from tl_aot.call_keys import key as ck
    from tl_aot.call_keys.spelling_reads import Reads

    values = [
        None, True, False, 0, -7, 2**70, 1.5, -0.0, 1e300, math.inf, -math.inf, math.nan, "", "x", 'q"uote\\', "ünï\n\u2028",
        [], (), [1, "a", None, 2.5], (1, (2, [3.0, "b"])), {"k": 1, 2: [True]}, {}, _Color.RED, _Level.HIGH, _Name("n"),
        _Pair((1, 2)), [[1, 2], {"a": (3,)}], torch.float16, math, math.sqrt, ["mixed", _Level.HIGH, _Name("m"), torch.int8],
    ]  # fmt: skip
    values += [_Tiling(4, 64), [_Tiling(1, 1), _Wider(2, 8)], _Tiling, _Wider, _Guarded(1, 2)]  # a user's objects and classes
    for value in values:
        assert ck._text(value, ck._DEPTH, Reads()) == reference_text(value), value
    looped = _Tiling(1, 1)
    looped.me = looped  # an object holding itself: spelled a level deeper each time, until too deep
    named = _Tiling(1, 1)
    vars(named)[1] = "one"  # an attribute named by a number
    for unkeyable in (
        object(),
        [1, object()],
        {"a": {1, 2}},
        _Slotted(),
        _Slotted,
        looped,
        named,
        _Tiling(1, object()),
        _Measured,
        _Measured(),
    ):
        with pytest.raises(ck.Unkeyable):
            ck._text(unkeyable, ck._DEPTH, Reads())


@pytest.mark.parametrize(
    "change",
    [
        "out_idx",  # a list changed in place
        "pass_configs",  # a dict changed in place (a key added)
        "pass_value",  # a dict's value replaced in place
        "compile_flags",  # rebound
        "target",  # rebound
    ],
)
def test_a_jits_options_changed_after_its_first_call_change_its_key(kmod, change):
    """The jit's options are the key's too: a list or dict changed in place, or an option rebound, moves it."""
    from tilelang.transform import PassConfigKey

    jit = kmod(f"kern_options_{change}").make(1.0)
    jit.pass_configs = {PassConfigKey.TL_ENABLE_FAST_MATH: True}
    jit.compile_flags = ["-O3"]
    before = call_key(jit, (256,), {}, "90")
    assert call_key(jit, (256,), {}, "90") == before == reference_key(jit, (256,), {}, "90")
    if change == "out_idx":
        jit.out_idx.append(0)
    elif change == "pass_configs":
        jit.pass_configs[PassConfigKey.TL_DISABLE_TMA_LOWER] = True
    elif change == "pass_value":
        jit.pass_configs[PassConfigKey.TL_ENABLE_FAST_MATH] = False
    elif change == "compile_flags":
        jit.compile_flags = ["-O2"]
    else:
        jit.target = "cuda -arch=sm_90a"
    after = call_key(jit, (256,), {}, "90")
    assert after not in (None, before) and after == reference_key(jit, (256,), {}, "90")
    jit.pass_configs, jit.target = None, _Target()  # an object of another type (a TVM target, say): spelled by str()
    assert call_key(jit, (256,), {}, "90") == reference_key(jit, (256,), {}, "90")


class _Target:
    def __str__(self) -> str:
        return "cuda -arch=sm_90a"


NESTED = KERNEL.replace("def make(shift):\n", "def make(shift):\n    def offset(x):\n        return x + shift\n\n").replace(
    "X[i] * SCALE + shift", "offset(X[i] * SCALE)"
)


def test_a_kept_spelling_sees_a_change_inside_a_helper_it_holds_in_its_closure(kmod):
    """A helper closure held by the kernel's closure (a macro, say) is checked too: its cell, its code, its defaults."""
    from tl_aot.call_keys import key as ck

    k = kmod("kern_nested", NESTED)
    jit = k.make(1.0)
    before = call_key(jit, (256,), {}, "90")
    assert before and call_key(jit, (256,), {}, "90") == before and id(jit) in ck._SPELLED
    offset = user_function(jit.func).__closure__[user_function(jit.func).__code__.co_freevars.index("offset")].cell_contents
    offset.__closure__[0].cell_contents = 2.0  # the helper's own closure variable
    after = call_key(jit, (256,), {}, "90")
    assert after not in (None, before) and after == reference_key(jit, (256,), {}, "90")
    offset.__defaults__ = (1,)
    assert call_key(jit, (256,), {}, "90") not in (None, before, after)


HELPER = (
    KERNEL.replace(
        "SCALE = 2.0\n",
        "SCALE = 2.0\nGAIN = 1.0\n\n\ndef op(x, k=1.0):\n    return x * GAIN + k\n\n\ndef op2(x, k=1.0):\n    return x * GAIN - k\n",
    )
    .replace("def make(shift):", "def make(shift, f=op):")
    .replace("X[i] * SCALE + shift", "f(X[i] * SCALE) + shift")
)


@pytest.mark.parametrize("change", ["global", "defaults", "code", "closure"])
def test_a_kept_helper_spelling_is_shared_by_new_kernel_functions_until_the_helper_changes(kmod, change):
    """Each factory call makes a new kernel function over the same helper: its spelling is kept, never once it changed."""
    from tl_aot.call_keys import key as ck

    k = kmod(f"kern_helper_{change}", HELPER)
    first = call_key(k.make(1.0), (256,), {}, "90")
    assert first and any(have[0] is k.op for have in ck._HELPERS.values())  # the helper's spelling kept
    again = k.make(1.0)  # a new @tilelang.jit function of the same factory: the kept helper spelling answers
    assert call_key(again, (256,), {}, "90") == first == reference_key(again, (256,), {}, "90")
    if change == "global":
        k.GAIN = 2.0
    elif change == "defaults":
        k.op.__defaults__ = (2.0,)
    elif change == "code":
        k.op.__code__ = k.op2.__code__
    else:
        k.SCALE = 3.0  # what the kernel itself reads (the helper unchanged): the kept helper is used, the key still moves
    changed = k.make(1.0)
    after = call_key(changed, (256,), {}, "90")
    assert after not in (None, first) and after == reference_key(changed, (256,), {}, "90")


def test_the_processs_first_question_to_the_gpu_is_counted_apart_from_lookups(tmp_path, kmod, monkeypatch):
    """Loading the driver (cuInit) happens once per process: it is reported apart, not spread over the lookups."""
    import time

    k = kmod("kern_gpu_first")
    with emulating("90"):
        request_key = _capture(tmp_path, k.make(1.0), 256)
        real = serving.current_gpu_identity
        asked: list[float] = []

        def slow_first():  # the first answer loads the driver: 50 ms here
            if not asked:
                time.sleep(0.05)
            asked.append(time.perf_counter())
            return real()

        monkeypatch.setattr(serving, "current_gpu_identity", slow_first)
        monkeypatch.setattr(active, "_installed", [])
        server = serving.Server([_library(tmp_path / "r.json", request_key)], strict=True, cpu_time=True)
        monkeypatch.setattr(active, "_active", server)
        active._patch(jit_module())
        try:
            thresholds = gc.get_threshold()
            gc.set_threshold(1)  # a pass of the collector on any allocation: the lookups count those within them
            try:
                assert isinstance(k.make(1.0)(256), ServedKernel) and isinstance(k.make(1.0)(256), ServedKernel)
            finally:
                gc.set_threshold(*thresholds)
            st = active._active.stats
            assert st.served_untraced == 2 and st.gpu_first_s >= 0.05
            assert st.lookup_s < 0.05, "the driver's loading is not in the lookups' time"
            assert 0 < st.lookup_cpu_s and st.lookup_cpu_s < 0.05  # the looking-up thread's CPU time, beside the wall clock
        finally:
            uninstall(active._installed[0])


TILED = KERNEL.replace(
    "def make(shift):\n",
    """class Tiling:
    def __init__(self, block):
        self.block = block

    def scaled(self, x):
        return x * float(self.block)


def make(shift, tiling=None):
    tiling = tiling or Tiling(1)
""",
).replace("X[i] * SCALE + shift", "tiling.scaled(X[i]) * SCALE + shift")


def test_a_kernel_closing_over_a_users_object_is_keyed_by_its_class_and_attributes(kmod):
    """A factory's helper object (a tiling, a schedule) keys the call by its class's source and its attributes, not by a trace."""
    k = kmod("kern_tiled", TILED)
    jit = k.make(1.0, k.Tiling(4))
    key = call_key(jit, (256,), {}, "90")
    assert key is not None and key == reference_key(jit, (256,), {}, "90")
    assert call_key(k.make(1.0, k.Tiling(4)), (256,), {}, "90") == key  # another object, the same class and attributes
    assert call_key(k.make(1.0, k.Tiling(8)), (256,), {}, "90") not in (None, key)
    tiling = k.Tiling(4)
    jit = k.make(1.0, tiling)
    assert call_key(jit, (256,), {}, "90") == key
    tiling.block = 2  # changed in place after a call: the spelling holding an object is never kept
    assert call_key(jit, (256,), {}, "90") not in (None, key)
    edited = kmod("kern_tiled", TILED.replace("x * float(self.block)", "x * float(self.block + 0)"))
    assert call_key(edited.make(1.0, edited.Tiling(4)), (256,), {}, "90") not in (None, key)  # the method's source is the key's


def test_a_kernel_reading_a_users_class_is_keyed_by_its_body(kmod):
    """A factory that builds its helper from a module's class (TileOPs' grouped GEMM: ``GroupTiling(...)``) is keyed by that class."""
    text = TILED.replace("tiling.scaled(X[i])", "Tiling(2).scaled(X[i])")
    k = kmod("kern_cls", text)
    key = call_key(k.make(1.0), (256,), {}, "90")
    assert key is not None and key == reference_key(k.make(1.0), (256,), {}, "90")
    k.Tiling.scaled = lambda self, x: x  # the class changed in place: the next call's key moves
    assert call_key(k.make(1.0), (256,), {}, "90") not in (None, key)
