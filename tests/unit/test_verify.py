"""``verify``: each variant against the requests a workload's JIT made (identical, different, not reached)."""

from __future__ import annotations

import base64
import json

from tl_aot.metadata import ArchVariant, LoweredEntry, Manifest
from tl_aot.verify import report, verify

OPTIONS = {"out_idx": [-1], "pass_configs": {"tl.enable_fast_math": True}, "compile_flags": [], "backend": "cuda", "target": None}


def _manifest(*variants) -> Manifest:
    entries = tuple(LoweredEntry(name=name, source="k.py", function="k", variants=(v,)) for name, v in variants)
    return Manifest(abi_version=1, library="lib", entries=entries)


def _variant(key: str, arch="sm_90a", options=OPTIONS, name="main", func_hash="aaaa") -> ArchVariant:
    request = json.dumps({"name": name, "options": options})
    return ArchVariant(arch=arch, request_key=key, request=request, func_hash=func_hash, resolved="make(n=1) -> k()")


def _item(options=OPTIONS, name="main", jit="pkg.k", headers=None) -> dict:
    return {"name": name, "ir": "not IR", "options": options, "headers": headers or {}, "devices": [{"arch": "sm_90a"}],
            "origins": [{"jit": jit, "args": {"n": "1"}}]}  # fmt: skip


def test_every_status_and_what_differs():
    other = {**OPTIONS, "pass_configs": {"tl.disable_tma_lower": True}}
    man = _manifest(
        ("same", _variant("k1")),
        ("options", _variant("k2", options=other)),
        ("elsewhere", _variant("k3", name="other_func")),
        ("sm80", _variant("k4", arch="sm_80")),
        ("unkeyed", _variant("")),
    )
    found = {f.entry: f for f in verify([("lib.so", man)], {"k1": _item(), "k9": _item()})}
    assert found["same"].status == "identical" and found["same"].detail == "pkg.k(n=1)"
    # the record's IR cannot be hashed here: the prim_func is not known to be the same, so it is "not reached"
    assert found["options"].status == "unreached"
    assert "tl.disable_tma_lower = true built, absent requested" in found["options"].detail
    assert "tl.enable_fast_math = absent built, true requested" in found["options"].detail
    assert found["elsewhere"].status == "unreached" and "no prim_func named 'other_func'" in found["elsewhere"].detail
    assert found["sm80"].status == "unchecked" and "sm_90 only" in found["sm80"].detail
    assert found["unkeyed"].status == "unchecked"
    text, passed = report(list(found.values()))
    assert not passed and "1 identical, 2 unreached, 2 unchecked: FAILED" in text
    assert report([found["same"], found["sm80"]])[1]
    assert report([found["same"], found["elsewhere"]], allow_unreached=True)[1]


def test_same_prim_func_with_other_options_is_different(monkeypatch):
    import tl_aot.verify as v

    monkeypatch.setattr(v, "_hash_of", lambda item: "aaaa")
    flags = {**OPTIONS, "compile_flags": ["-include", "/build/pkg/h.h"]}
    headers = {"/build/pkg/h.h": base64.b64encode(b"#define X 1\n").decode()}
    mine = {**OPTIONS, "compile_flags": ["-include", "h.h#0000000000000000"]}
    [f] = verify([("lib.so", _manifest(("k", _variant("k1", options=mine))))], {"k2": _item(options=flags, headers=headers)})
    assert f.status == "different" and f.detail.startswith("pkg.k(n=1) asks for it with other options: compile_flags:")
    # the recorded header is named by its content, wherever it was captured
    assert '"h.h#' in f.detail and "/build/pkg" not in f.detail
