"""The error types have one public home, ``tl_aot.errors`` (and ``tl_aot.<Name>``), and keep it.

A user's ``except tl_aot.errors.LibraryError`` written against one release must keep working in
the next: the names below are pinned (adding one is a conscious edit here and in
docs/reliability.md), every class names the public path as its module (what a traceback prints
and what a pickle stores), and the modules that used to define a class still hand it on.
"""

from __future__ import annotations

import importlib
import pickle
import traceback

import pytest

import tl_aot
import tl_aot.errors

#: The public error types, as documented in docs/reliability.md ("Errors").
PUBLIC = [
    "TlAotError",
    "SpecError",
    "LoweringError",
    "CompileError",
    "FailedProcessError",
    "ToolchainNotFound",
    "LibraryError",
    "FilesystemError",
    "KernelNotServed",
    "ClusterError",
    "ToolsetMismatch",
    "PartError",
    "WheelCheckError",
]


def _public_path(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_the_public_names_are_pinned():
    assert tl_aot.errors.__all__ == PUBLIC
    assert set(PUBLIC) <= set(tl_aot.__all__)


@pytest.mark.parametrize("name", PUBLIC)
def test_each_error_is_one_class_at_its_public_path(name):
    cls = getattr(tl_aot.errors, name)
    assert getattr(tl_aot, name) is cls
    assert issubclass(cls, tl_aot.errors.TlAotError)
    assert _public_path(cls) == f"tl_aot.errors.{name}"  # what a traceback prints


def test_a_pickled_error_names_the_public_path_and_keeps_its_fields():
    e = tl_aot.errors.LoweringError("kernel.py:3: bad shape", entry="gemm", arch="sm_90a", location="kernel.py:3")
    data = pickle.dumps(e)
    assert b"tl_aot.errors" in data and b"tl_aot.common" not in data
    back = pickle.loads(data)
    assert type(back) is tl_aot.errors.LoweringError
    assert (str(back), back.fields()) == (str(e), e.fields())


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("tl_aot.common.errors", "LibraryError"),
        ("tl_aot.pipeline.cluster", "ClusterError"),
        ("tl_aot.pipeline.shards", "PartError"),
        ("tl_aot.pipeline.variant_task", "ToolsetMismatch"),
        ("tl_aot.wheel.wheel_check", "WheelCheckError"),
    ],
)
def test_the_modules_that_defined_a_class_still_hand_it_on(module, name):
    assert getattr(importlib.import_module(module), name) is getattr(tl_aot.errors, name)


def test_kernel_not_served_is_handed_on_by_the_serving_module():
    for module in ("tl_aot.serving.server",):  # the serving wing hands it on
        try:
            serving = importlib.import_module(module)
        except ModuleNotFoundError:
            continue
        assert serving.KernelNotServed is tl_aot.errors.KernelNotServed
        assert issubclass(serving.KernelNotServed, LookupError)
        return
    pytest.fail("no serving module")


def test_load_raises_a_class_a_user_can_catch_by_its_public_path(tmp_path):
    bad = tmp_path / "libnot_a_library.so"
    bad.write_bytes(b"this is not an ELF file")
    with pytest.raises(tl_aot.errors.LibraryError) as info:
        tl_aot.load(bad)
    cls = type(info.value)
    module, _, name = _public_path(cls).rpartition(".")
    assert getattr(importlib.import_module(module), name) is cls
    shown = traceback.format_exception_only(cls, info.value)[-1]
    assert shown.startswith("tl_aot.errors.LibraryError: ") and str(bad) in shown
