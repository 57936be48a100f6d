"""The CuTeDSL backend's build-side rules: the backend key, the missing extra, and kernels found by pattern."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import tomllib

from tl_aot.common.errors import CompileError, SpecError, ToolchainNotFound
from tl_aot.common.metadata import DeviceKernel
from tl_aot.frontends.cli_parser import build_parser
from tl_aot.jit.request_key import backend_kind
from tl_aot.lower import cubin, cutedsl
from tl_aot.spec import KernelSpec, load_spec_file

ROOT = Path(__file__).resolve().parents[2]


def _spec(**kw):
    return KernelSpec.create(name="k", source="k.py", function="f", archs=["90a"], **kw)


def test_backend_defaults_to_the_kernel_files_choice_and_takes_cuda_or_cutedsl():
    assert _spec().backend == ""
    assert _spec(backend="cutedsl").backend == "cutedsl"
    assert _spec(backend="cuda").backend == "cuda"


@pytest.mark.parametrize("bad", ["triton", "CUTEDSL", 1])
def test_an_unknown_backend_is_an_error_naming_the_entry_and_the_choices(bad):
    with pytest.raises(SpecError, match=r"entry 'k': backend .* is not one of 'cuda', 'cutedsl'"):
        _spec(backend=bad)


def test_a_specialisation_may_pick_its_own_backend(tmp_path):
    (tmp_path / "k.py").write_text("def f(N):\n    pass\n")
    (tmp_path / "lib.toml").write_text(
        '[library]\narchs = ["90a"]\n[[entry]]\nname = "k"\nsource = "k.py"\nfunction = "f"\nbackend = "cutedsl"\n'
        'specialisations = [{args = {N = 1}}, {args = {N = 2}, backend = "cuda", fallback = true}]\n'
    )
    first, second = load_spec_file(tmp_path / "lib.toml").entries
    assert (first.backend, second.backend) == ("cutedsl", "cuda")
    (tmp_path / "lib.toml").write_text(
        '[library]\narchs = ["90a"]\n[[entry]]\nname = "k"\nsource = "k.py"\nfunction = "f"\n'
        'specialisations = [{args = {N = 1}, backend = "hip"}]\n'
    )
    with pytest.raises(SpecError, match=r"specialisation #1: backend 'hip'"):
        load_spec_file(tmp_path / "lib.toml")


def test_the_cli_takes_backend_and_refuses_others(capsys):
    args = build_parser().parse_args(["build", "k.py:f", "--backend", "cutedsl"])
    assert args.backend == "cutedsl"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["build", "k.py:f", "--backend", "hip"])
    assert "invalid choice" in capsys.readouterr().err


def test_a_kernel_file_asks_for_cutedsl_by_target_or_execution_backend():
    assert backend_kind("cutedsl", None) == "cutedsl"
    assert backend_kind(None, "cutedsl") == "cutedsl"
    assert backend_kind(None, {"kind": "cutedsl", "arch": "sm_90a"}) == "cutedsl"
    assert backend_kind("tvm_ffi", "cuda") == "cuda"
    assert backend_kind(None, None) == "cuda"


def test_without_the_extra_a_cutedsl_build_names_the_packages_to_install(monkeypatch):
    monkeypatch.setattr(cutedsl, "cutedsl_version", lambda: "")
    with pytest.raises(ToolchainNotFound) as e:
        cutedsl.require_cutedsl("gemm", "sm_90a")
    assert "pip install 'tl_aot[cutedsl]'" in str(e.value) and "nvidia-cutlass-dsl==4.8.1" in str(e.value)
    assert (e.value.entry, e.value.arch) == ("gemm", "sm_90a")


def test_another_tilelang_than_the_one_whose_cutedsl_module_tl_aot_drives_is_named(monkeypatch):
    monkeypatch.setattr(cutedsl, "cutedsl_version", lambda: "4.8.1")
    monkeypatch.setattr(cutedsl, "package_version", lambda dist: "0.1.12")
    monkeypatch.setattr("importlib.util.find_spec", lambda name: object())
    with pytest.raises(ToolchainNotFound, match=r"TileLang 0.1.12 is installed: pip install tilelang==0.1.15"):
        cutedsl.require_cutedsl("gemm", "sm_90a")


def test_the_extra_pins_the_cutedsl_version_tl_aot_names():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["cutedsl"] == [f"{cutedsl.CUTEDSL_DIST}=={cutedsl.CUTEDSL_PIN}"]


def _elf(section_names) -> bytes:
    """A minimal 64-bit ELF whose section headers name ``section_names`` (what a cubin's kernels look like)."""
    strtab = b"\0" + b"".join(n.encode() + b"\0" for n in [*section_names, ".shstrtab"])
    offsets, pos = [], 1
    for n in [*section_names, ".shstrtab"]:
        offsets.append(pos)
        pos += len(n) + 1
    header = bytearray(64)
    header[:5] = b"\x7fELF\x02"
    shoff = 64 + len(strtab)
    shnum = len(offsets) + 1
    struct.pack_into("<Q", header, 0x28, shoff)
    struct.pack_into("<HHH", header, 0x3A, 64, shnum, shnum - 1)
    sections = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    sections += [struct.pack("<IIQQQQIIQQ", off, 1, 0, 0, 64, len(strtab), 0, 0, 1, 0) for off in offsets]
    return bytes(header) + strtab + b"".join(sections)


MANGLED = [
    ".text.kernel_cutlass_main_kernel_tensorptrf32_gmem_align16_o_0",
    ".text.kernel_cutlass_main_kernel_1_tensorptrf32_gmem_align16_o_0",
    ".nv.info",
]


def test_each_launch_is_found_by_pattern_a_base_name_winning_over_its_numbered_variants():
    image = _elf(MANGLED)
    assert cubin.kernel_names(image) == [n.removeprefix(".text.") for n in MANGLED[:2]]
    found = cutedsl.match_kernels((DeviceKernel("main_kernel"), DeviceKernel("main_kernel_1")), image, entry="two", arch="sm_90a")
    assert found == {"main_kernel": MANGLED[0][6:], "main_kernel_1": MANGLED[1][6:]}


def test_a_pattern_matching_no_kernel_or_several_is_a_build_error_naming_entry_and_arch():
    image = _elf(MANGLED)
    with pytest.raises(CompileError, match=r"entry 'two' \(sm_100a\): kernel pattern 'fused_kernel' matches no kernel") as e:
        cutedsl.match_kernels((DeviceKernel("fused_kernel"),), image, entry="two", arch="sm_100a")
    assert (e.value.entry, e.value.arch) == ("two", "sm_100a")
    with pytest.raises(CompileError, match=r"kernel pattern 'kernel_cutlass' matches 2 kernels"):
        cutedsl.match_kernels((DeviceKernel("kernel_cutlass"),), image, entry="two", arch="sm_90a")
