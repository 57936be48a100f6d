"""The CUDA compiler's one search order (tl_aot.cuda.cuda_toolkit), the driver floors (tl_aot.gpu.cuda_compat), NVRTC options."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from tl_aot.common.arch import parse_arch
from tl_aot.common.errors import ToolchainNotFound
from tl_aot.cuda import cuda_toolkit
from tl_aot.cuda.cuda_toolkit import find_toolkit, pin_toolkit
from tl_aot.gpu.cuda_compat import cuda_int, cuda_str, image_floor, library_floor, min_cuda_for_arch

FAKE_NVCC = """#!/bin/sh
case "$1" in
  --version) echo "Cuda compilation tools, release {major}.{minor}, V{major}.{minor}.{build}" ;;
  --list-gpu-arch) printf 'compute_80\\ncompute_90\\n' ;;
esac
"""


def _exe(path: Path, text: str = FAKE_NVCC.format(major=13, minor=0, build=88)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _pip_cu13(site: Path) -> Path:
    root = site / "nvidia" / "cu13"
    _exe(root / "bin" / "nvcc")
    _exe(root / "nvvm" / "bin" / "cicc", "#!/bin/sh\n")
    (root / "include").mkdir(parents=True)
    return root


def _pip_cu12(site: Path) -> Path:
    nv = site / "nvidia"
    (nv / "cuda_nvrtc" / "lib").mkdir(parents=True)
    (nv / "cuda_nvrtc" / "lib" / "libnvrtc.so.12").write_bytes(b"")
    _exe(nv / "cuda_nvcc" / "bin" / "ptxas", FAKE_NVCC.format(major=12, minor=9, build=86))
    for d in ("cuda_runtime", "cuda_nvcc", "cuda_cccl"):
        (nv / d / "include").mkdir(parents=True, exist_ok=True)
    return nv


@pytest.fixture
def world(tmp_path, monkeypatch):
    """Every kind of compiler on disk; the environment names none of them until a test says so."""
    for var in ("TL_AOT_NVCC", "CUDA_HOME", "CUDA_PATH", "TL_AOT_CUDA", "_TL_AOT_EXPORTED_CUDA_HOME"):
        # setenv first: monkeypatch records (and so restores) only a variable that was set, and a test
        # here exports CUDA_HOME; left behind, it would point this worker's later TileLang compiles at a fake nvcc.
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    site = tmp_path / "site"
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not (Path(p) / "nvidia").is_dir()] + [str(site)])
    pin_toolkit(None)
    yield {
        "explicit": _exe(tmp_path / "explicit" / "nvcc"),
        "home": _exe(tmp_path / "home" / "bin" / "nvcc").parent.parent,
        "path": _exe(tmp_path / "onpath" / "nvcc").parent,
        "site": site,
    }
    pin_toolkit(None)


def _find():
    find_toolkit.cache_clear()
    return find_toolkit()


def test_search_order_explicit_then_cuda_home_then_path_then_pip(world, monkeypatch):
    _pip_cu13(world["site"])
    assert (_find().origin, _find().nvcc) == ("pip", str(world["site"] / "nvidia" / "cu13" / "bin" / "nvcc"))
    monkeypatch.setenv("PATH", str(world["path"]))
    assert (_find().origin, _find().nvcc) == ("PATH", str(world["path"] / "nvcc"))
    monkeypatch.setenv("CUDA_HOME", str(world["home"]))
    assert (_find().origin, _find().home) == ("CUDA_HOME", str(world["home"]))
    monkeypatch.setenv("TL_AOT_NVCC", str(world["explicit"]))
    assert (_find().origin, _find().nvcc) == ("TL_AOT_NVCC", str(world["explicit"]))


def test_cuda_path_is_cuda_home_and_a_home_without_nvcc_is_passed_over(world, monkeypatch):
    _pip_cu13(world["site"])
    monkeypatch.setenv("CUDA_PATH", str(world["home"]))
    assert _find().origin == "CUDA_HOME"
    monkeypatch.setenv("CUDA_PATH", str(world["path"]))  # no bin/nvcc there
    assert _find().origin == "pip"


def test_a_wrong_tl_aot_nvcc_is_an_error_not_a_fallback(world, monkeypatch):
    monkeypatch.setenv("TL_AOT_NVCC", str(world["site"] / "no-nvcc"))
    with pytest.raises(ToolchainNotFound, match="TL_AOT_NVCC=.*is not a file"):
        _find()


def test_pip_cuda13_is_a_toolkit_root_and_names_its_wheels(world):
    root = _pip_cu13(world["site"])
    tk = _find()
    assert (tk.kind, tk.home, tk.nvcc) == ("nvcc", str(root), str(root / "bin" / "nvcc"))
    assert tk.describe.startswith("pip (")


def test_an_incomplete_pip_cuda13_is_not_a_compiler(world):
    root = _pip_cu13(world["site"])
    (root / "nvvm" / "bin" / "cicc").unlink()  # nvidia-cuda-nvcc without nvidia-nvvm: nvcc cannot run
    with pytest.raises(ToolchainNotFound, match=r"no CUDA compiler was found .*tl_aot\[build\]"):
        _find()


def test_pip_cuda12_is_nvrtc_and_ptxas_with_the_wheels_headers(world):
    nv = _pip_cu12(world["site"])
    tk = _find()
    assert tk.kind == "nvrtc" and not tk.nvcc
    assert tk.ptxas == str(nv / "cuda_nvcc" / "bin" / "ptxas")
    assert tk.nvrtc == str(nv / "cuda_nvrtc" / "lib" / "libnvrtc.so.12")
    assert tk.include_dirs[0] == str(nv / "cuda_runtime" / "include")  # cuda.h, cuda_runtime.h


def test_both_pip_compilers_cuda12_first_unless_tl_aot_cuda_says(world, monkeypatch):
    _pip_cu12(world["site"])
    _pip_cu13(world["site"])
    assert _find().kind == "nvrtc"  # the older driver floor
    monkeypatch.setenv("TL_AOT_CUDA", "13")
    assert _find().kind == "nvcc"
    monkeypatch.setenv("TL_AOT_CUDA", "12")
    assert _find().kind == "nvrtc"


def test_tl_aot_cuda_naming_a_missing_release_says_what_to_install(world, monkeypatch):
    _pip_cu13(world["site"])
    monkeypatch.setenv("TL_AOT_CUDA", "12")
    with pytest.raises(ToolchainNotFound, match=r"pip install 'tl_aot\[build-cu12\]'"):
        _find()


def test_no_compiler_at_all_names_the_search_and_the_extra(world):
    with pytest.raises(ToolchainNotFound) as e:
        _find()
    assert "TL_AOT_NVCC, CUDA_HOME/CUDA_PATH, nvcc on PATH" in str(e.value)
    assert "pip install 'tl_aot[build]'" in str(e.value)


def test_pinned_toolkit_wins_until_unpinned(world, monkeypatch):
    _pip_cu13(world["site"])
    tk = _find()
    pin_toolkit(tk)
    monkeypatch.setenv("PATH", str(world["path"]))
    assert find_toolkit() is tk
    pin_toolkit(None)
    assert find_toolkit().origin == "PATH"


def test_tilelang_is_pointed_at_the_same_toolkit(world, monkeypatch):
    from tl_aot.cuda import toolchain

    root = _pip_cu13(world["site"])
    _find()
    monkeypatch.delenv("CUDA_HOME", raising=False)
    toolchain.point_tilelang_at_toolkit()
    assert os.environ["CUDA_HOME"] == str(root)
    pin_toolkit(None)
    assert _find().origin == "pip"  # the CUDA_HOME set for TileLang is not taken for a user's choice
    monkeypatch.setenv("CUDA_HOME", str(world["home"]))  # an explicit one is kept (it chose the toolkit)
    toolchain.point_tilelang_at_toolkit()
    assert os.environ["CUDA_HOME"] == str(world["home"])


def test_cli_locates_the_nvcc(world, capsys):
    from tl_aot.frontends.cli import main

    root = _pip_cu13(world["site"])
    _find()
    assert main(["--nvcc"]) == 0
    assert capsys.readouterr().out.strip() == str(root / "bin" / "nvcc")


def test_cli_nvcc_with_the_cuda12_pip_compiler_says_there_is_none(world, capsys):
    from tl_aot.frontends.cli import main

    _pip_cu12(world["site"])
    _find()
    assert main(["--nvcc"]) == 1
    assert "has no nvcc" in capsys.readouterr().err


# --- driver floors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "compiler,ptx,backend,floor",
    [
        ("12.9.86", False, "cuda", (12, 0)),  # a cubin: any driver of its major (minor version compatibility)
        ("12.9.86", True, "cuda", (12, 9)),  # PTX: the driver must know its ISA
        ("13.0.88", False, "cuda", (13, 0)),
        ("13.2.51", True, "cuda", (13, 2)),
        ("12.2.140", False, "cutedsl", (12, 4)),  # kernels found by enumerating the module
    ],
)
def test_image_floor(compiler, ptx, backend, floor):
    assert image_floor(compiler, ptx=ptx, backend=backend) == floor


def test_library_floor_is_the_highest_image_floor_with_its_driver():
    f = library_floor([(12, 0), (13, 0)])
    assert (f.min_cuda, f.min_version, f.as_int) == ("13.0", "580.65.06", 13000)
    assert library_floor([(12, 0)]).min_version == "525.60.13"
    assert library_floor([(13, 7)]).min_version == ""  # not in the table: said as a CUDA version only


def test_cuda_version_spellings():
    assert cuda_int("12.4.131") == 12040 and cuda_int("13.0") == 13000
    assert cuda_str(12080) == "12.8"


@pytest.mark.parametrize("arch,cuda", [("90a", (12, 0)), ("100a", (12, 8)), ("120", (12, 8)), ("103a", (12, 9)), ("80", (12, 0))])
def test_min_cuda_per_arch(arch, cuda):
    assert min_cuda_for_arch(parse_arch(arch).number) == cuda


# --- the CUDA 12 pip compiler: NVRTC options and its PTX ---------------------------------------


def test_nvrtc_options_mirror_what_nvcc_gives_cicc_and_ptxas(world, monkeypatch):
    from tl_aot.cuda import nvcc_command

    _pip_cu12(world["site"])
    _find()
    monkeypatch.setattr(nvcc_command, "tilelang_include_dirs", lambda: ["/tl/src", "/tl/cutlass"])
    nv, px = nvcc_command.nvrtc_options(
        parse_arch("90a"),
        ["--use_fast_math", "-O3", "--ptxas-options=--register-usage-level=5", "-Xcompiler", "-fPIC"]
        + ["-I", "/inc", "-DX=1", "-include", "h.h"],
    )
    assert nv[:5] == ["--gpu-architecture=compute_90a", "-std=c++20", "-lineinfo", "-w", "-default-device"]
    assert "-I/tl/src" in nv and any(o.endswith("cuda_runtime/include") for o in nv)
    assert ["--use_fast_math", "-I/inc", "-DX=1", "--pre-include=h.h"] == nv[-4:]
    assert "-O3" not in nv and "-fPIC" not in nv
    assert px == ["-w", "-arch=sm_90a", "-m64", "--generate-line-info", "--register-usage-level=5"]


def test_unreferenced_globals_are_dropped_from_nvrtc_ptx():
    from tl_aot.cuda.nvrtc_compile import drop_unused_globals

    ptx = "\n".join(
        [
            ".global .align 1 .u8 _ZN4cuda3std3__417integral_constantIbLb0EE5valueE;",
            ".global .align 8 .u64 _ZN4cuda3std3__411__type_listIJhtjmyEE6__sizeE = 5;",
            ".global .align 4 .b8 used_table[8] = {1, 0, 0, 0, 2, 0, 0, 0};",
            ".visible .entry main_kernel()",
            "{",
            "\tld.global.u32 %r1, [used_table];",
            "}",
        ]
    )
    out = drop_unused_globals(ptx)
    assert "integral_constant" not in out and "__type_list" not in out
    assert ".global .align 4 .b8 used_table[8]" in out and "main_kernel" in out


def test_module_has_no_import_time_search():
    src = Path(cuda_toolkit.__file__).read_text()
    assert "\nfind_toolkit()" not in src and "\n_search(" not in src


# --- a build's choice among pip compilers: the widest driver reach that builds every arch -------


@pytest.mark.parametrize("archs,kind", [(["90a"], "nvrtc"), (["90a", "110"], "nvcc"), (["80+PTX"], "nvcc")])
def test_build_takes_cuda12_unless_an_arch_needs_cuda13(world, monkeypatch, archs, kind):
    from tl_aot.cuda import compiler_choice, toolchain
    from tl_aot.cuda.compiler_choice import check_toolchain
    from tl_aot.spec import KernelSpec, LibrarySpec

    nv = _pip_cu12(world["site"])
    (nv / "cuda_runtime" / "include" / "cuda.h").write_text("")
    root = _pip_cu13(world["site"])
    (root / "include" / "cuda.h").write_text("")
    monkeypatch.setattr(compiler_choice, "supported_archs_of", lambda tk: frozenset({80, 90} | ({110} if tk.kind == "nvcc" else set())))
    monkeypatch.setattr(toolchain, "_nvcc_facts", lambda tool: ("12.9.86" if tool.endswith("ptxas") else "13.0.88", str(Path(tool).parent)))
    monkeypatch.setattr(toolchain, "cuda_include_dir", lambda nvcc=None: str(nv / "cuda_runtime" / "include"))
    kernels = Path(__file__).parents[1] / "kernels"
    lib = LibrarySpec("lib", (KernelSpec.create(name="add_one", source=kernels / "elementwise.py", function="add_one", archs=archs),))
    version = check_toolchain(lib)
    assert find_toolkit().kind == kind
    assert version == ("12.9.86 (NVRTC)" if kind == "nvrtc" else "13.0.88")


def test_an_arch_the_only_compiler_cannot_build_names_the_cuda_it_needs(world, monkeypatch):
    from tl_aot.common.errors import SpecError
    from tl_aot.cuda import compiler_choice, toolchain
    from tl_aot.cuda.compiler_choice import check_toolchain
    from tl_aot.spec import KernelSpec, LibrarySpec

    nv = _pip_cu12(world["site"])
    (nv / "cuda_runtime" / "include" / "cuda.h").write_text("")
    monkeypatch.setattr(compiler_choice, "supported_archs_of", lambda tk: frozenset({80, 90, 100, 120}))
    monkeypatch.setattr(toolchain, "_nvcc_facts", lambda tool: ("12.9.86", str(nv / "cuda_runtime" / "include")))
    kernels = Path(__file__).parents[1] / "kernels"
    lib = LibrarySpec("lib", (KernelSpec.create(name="add_one", source=kernels / "elementwise.py", function="add_one", archs=["110"]),))
    with pytest.raises(SpecError) as e:
        check_toolchain(lib)
    msg = str(e.value)
    assert "entry 'add_one' (sm_110)" in msg and "NVRTC + ptxas 12.9.86 from pip" in msg
    assert "sm_110 needs CUDA 13.0 or newer (pip install 'tl_aot[build-cu13]')" in msg
