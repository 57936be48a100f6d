"""Request keys do not depend on what the process lowered before: TileLang's lowering renames variables in place.

The bug: a build's lowering process keyed a GEMM after lowering it, and ``@tilelang.jit`` hands out
one prim_func object per arguments; TileLang's sm_80 MMA macros rename the kernel's thread
variable (``tx`` -> ``thread_binding``) on that shared object, so one variant's key depended on
which variants the same process had lowered before (a Dask-built library differed from a local one).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("tilelang")
sys.path.insert(0, str(Path(__file__).parents[1] / "kernels"))
import elementwise  # noqa: E402

from tl_aot.jit.ir_record import save_ir  # noqa: E402
from tl_aot.jit.pristine_ir import pristine_ir  # noqa: E402
from tl_aot.jit.request_key import options_of, request_key  # noqa: E402
from tl_aot.jit.seam import CompileRequest  # noqa: E402

_KERNELS = Path(__file__).parents[1] / "kernels"


def _key(func) -> str:
    return request_key(func, options_of(CompileRequest.of(func, None)))


def _strings(text: str) -> set:
    return {n["data"] for n in json.loads(text)["nodes"] if n.get("type") == "ffi.String"}


def _rename_in_place(func, old: str, new: str) -> None:
    """What TileLang's eager builder does to a variable a macro binds to a Python name: ``IRBuilder.name``."""
    from tilelang import tvm
    from tvm.script.ir_builder import IRBuilder

    found = []

    def visit(n) -> None:
        if isinstance(n, tvm.tirx.Var) and n.name == old and not found:
            found.append(n)

    tvm.tirx.stmt_functor.post_order_visit(func.body, visit)
    assert found, f"no variable {old!r} in the prim_func"
    IRBuilder.name(new, found[0])


def test_a_variable_renamed_in_place_after_keying_leaves_the_key_and_the_stored_ir_alone():
    func = elementwise.axpy(4096)
    key, text = _key(func), pristine_ir(func)
    _rename_in_place(func, "bx", "renamed_by_a_macro")
    assert "renamed_by_a_macro" in _strings(save_ir(func))  # the object did change under the key
    assert _key(func) == key
    assert pristine_ir(func) == text and "renamed_by_a_macro" not in _strings(text)
    assert _key(elementwise.axpy(4096)) == key  # an equal prim_func, never renamed, keys the same


def test_the_stored_ir_given_explicitly_is_what_is_keyed():
    func = elementwise.axpy(2048)
    other = elementwise.axpy(1024)
    options = options_of(CompileRequest.of(func, None))
    assert request_key(func, options, text=save_ir(other)) == request_key(other, options)


def _fresh_specialised():
    """tests/kernels/specialised.py imported afresh: its ``@tilelang.jit`` factories' caches are new."""
    spec = importlib.util.spec_from_file_location("specialised_pristine", _KERNELS / "specialised.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_gemm_lowered_for_sm80_keys_as_it_did_before_lowering():
    from tilelang import tvm

    from tl_aot.capture.device_code import lower
    from tl_aot.jit.resolve import resolve_kernel
    from tl_aot.spec import KernelSpec

    module = _fresh_specialised()
    args = {"dtype": "bfloat16", "N": 512, "K": 2048}
    spec = KernelSpec(name="gemm", source=_KERNELS / "specialised.py", function="gemm", args=args, archs=("80",), out_idx=(-1,))
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_80"})
    with target:
        resolved = resolve_kernel(spec, module, "test", "sm_80")
        before = _key(resolved.func)
        lower(resolved.func, target, {})
        again = resolve_kernel(spec, module, "test", "sm_80")  # @tilelang.jit's cache: the same prim_func object
    assert again.func.same_as(resolved.func)
    assert _key(again.func) == before


def test_a_build_keys_one_variant_alike_whichever_arch_its_lowering_process_lowered_first():
    """What differed between a Dask-built and a locally built library: gemm bfloat16 N=512 K=2048, sm_90a after sm_80."""
    from tilelang import tvm

    from tl_aot.common.arch import parse_arch
    from tl_aot.jit.resolve import resolve_kernel
    from tl_aot.lower.lower import lower_variant
    from tl_aot.spec import load_spec_file

    lib = load_spec_file(_KERNELS / "specialised.toml", archs=("80", "90a"))
    (entry,) = [e for e in lib.entries if dict(e.args) == {"dtype": "bfloat16", "N": 512, "K": 2048}]
    keys = [lower_variant(entry, parse_arch(arch)).request_key for arch in ("80", "90a", "80")]
    with tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}):  # the kernel as a user's process asks for it, never lowered
        r = resolve_kernel(entry, _fresh_specialised(), "test", "sm_90a")
    req = CompileRequest.of(
        r.func, [-1], execution_backend=r.execution_backend, target=r.target, pass_configs=r.pass_configs, compile_flags=r.compile_flags
    )
    assert keys == [keys[0]] * 3
    assert keys[0] == request_key(r.func, options_of(req))
