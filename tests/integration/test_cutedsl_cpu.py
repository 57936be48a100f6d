"""Entries built with TileLang's CuTeDSL backend, for sm_90a and sm_100a, on a machine without a GPU."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.helpers import ok, tl_aot_cli, tl_aot_here

pytest.importorskip("tilelang")

from tl_aot.common.arch import parse_arch  # noqa: E402
from tl_aot.common.errors import CompileError, ToolchainNotFound  # noqa: E402
from tl_aot.lower import cubin, cutedsl  # noqa: E402
from tl_aot.spec import KernelSpec  # noqa: E402

KERNELS = Path(__file__).parents[1] / "kernels"
ENTRIES = {"gemm_tma", "scale", "two", "flash_fwd"}


def _needs_extra():
    if not cutedsl.cutedsl_version():
        pin = f"{cutedsl.CUTEDSL_DIST}=={cutedsl.CUTEDSL_PIN}"
        pytest.skip(f"the CuTeDSL backend needs the cutedsl extra: pip install 'tl_aot[cutedsl]' ({pin})")


@pytest.fixture(scope="module")
def cutedsl_lib(tmp_path_factory, cache_dir) -> Path:
    _needs_extra()
    from tl_aot.pipeline.library import build_library
    from tl_aot.spec import load_spec_file

    out = tmp_path_factory.mktemp("cutedsl")
    return build_library(load_spec_file(KERNELS / "cutedsl.toml"), out_dir=out, cache_dir=cache_dir, log=None, jobs=2).library


def test_every_entry_is_a_cutedsl_cubin_for_sm90a_and_sm100a(cutedsl_lib):
    import tl_aot

    m = tl_aot.load(cutedsl_lib).manifest
    assert {e.name for e in m.entries} == ENTRIES
    for e in m.entries:
        assert [str(v.arch) for v in e.variants] == ["sm_90a", "sm_100a"], e.name
        for v in e.variants:
            assert (v.backend, v.image_kind, v.nvcc_options) == ("cutedsl", "cubin", ()), (e.name, v.arch)
            assert v.image_bytes > 1000, (e.name, v.arch)
    gemm = m.entry("gemm_tma").variants[0]
    assert [d.name for d in gemm.tma_descriptors] == ["A_desc", "B_desc"]
    assert len(m.entry("two").variants[0].kernels) == 2
    assert [p.name for p in m.entry("flash_fwd").outputs] == ["Out"]
    assert [s.name for s in m.entry("scale").symbols] == ["n"]


def test_inspect_shows_the_backend_of_each_variant(cutedsl_lib):
    text = ok(tl_aot_cli("inspect", cutedsl_lib)).stdout
    assert text.count("(CuTeDSL backend, kernels found by pattern)") == 2 * len(ENTRIES)
    assert "scale(X: float32[n], Y: float32[n], alpha: float32)" in text
    data = json.loads(ok(tl_aot_cli("inspect", cutedsl_lib, "--json")).stdout)
    assert {v["backend"] for e in data["entries"] for v in e["variants"]} == {"cutedsl"}


def _cached_image(cache_dir: Path, entry: str, arch: str) -> bytes:
    for d in Path(cache_dir).iterdir():
        variant = d / "variant.json"
        if variant.is_file():
            v = json.loads(variant.read_text())
            if (v["entry"], v["arch"], v.get("backend")) == (entry, arch, "cutedsl"):
                return (d / "image.bin").read_bytes()
    raise AssertionError(f"no cached cutedsl image of {entry} {arch}")


def test_a_pattern_that_matches_no_kernel_of_the_cubin_is_a_build_error(cutedsl_lib, cache_dir):
    import tl_aot

    kernels = tl_aot.load(cutedsl_lib).manifest.entry("two").variants[1].kernels
    image = _cached_image(cache_dir, "two", "sm_100a")
    names = cubin.kernel_names(image)
    assert len(names) == 2 and all("kernel_cutlass_main_kernel" in n for n in names)
    assert set(cutedsl.match_kernels(kernels, image, entry="two", arch="sm_100a")) == {"main_kernel", "main_kernel_1"}
    renamed = (type(kernels[0])("scale_kernel"),)
    with pytest.raises(CompileError, match=r"entry 'two' \(sm_100a\): kernel pattern 'scale_kernel' matches no kernel"):
        cutedsl.match_kernels(renamed, image, entry="two", arch="sm_100a")


def _scale_spec(**kw) -> KernelSpec:
    return KernelSpec.create(name="scale", source=KERNELS / "cutedsl.py", function="scale_cutedsl", archs=["90a"], **kw)


def test_a_kernel_file_asking_for_cutedsl_without_the_extra_names_the_packages(monkeypatch):
    from tl_aot.lower.lower import lower_variant

    monkeypatch.setattr(cutedsl, "cutedsl_version", lambda: "")
    with pytest.raises(ToolchainNotFound, match=r"entry 'scale' \(sm_90a\): .*pip install 'tl_aot\[cutedsl\]'"):
        lower_variant(_scale_spec(), parse_arch("90a"))


REFUSED = [("90+PTX", {}, "cubins only"), ("90a", {"compile_flags": ["-lineinfo"]}, "-lineinfo")]


@pytest.mark.parametrize(("arch", "kw", "fragment"), REFUSED)
def test_what_the_cutedsl_backend_cannot_honour_is_refused_by_name(arch, kw, fragment):
    _needs_extra()
    from tl_aot.common.errors import SpecError
    from tl_aot.lower.lower import lower_variant

    spec = KernelSpec.create(name="scale", source=KERNELS / "cutedsl.py", function="scale_cutedsl", archs=[arch], **kw)
    with pytest.raises(SpecError, match=r"entry 'scale' \(sm_90") as e:
        lower_variant(spec, parse_arch(arch))
    assert fragment in str(e.value)


def test_backend_cuda_overrides_the_kernel_files_cutedsl():
    from tl_aot.lower.lower import lower_variant

    v = lower_variant(_scale_spec(backend="cuda"), parse_arch("90a"))
    assert v.backend == "cuda" and "__global__" in v.cuda_source


def test_a_kernel_taking_workspaces_is_refused_by_name_as_tilelangs_cutedsl_backend_cannot_pass_them():
    _needs_extra()
    from tl_aot.common.errors import LoweringError
    from tl_aot.lower.lower import lower_variant

    spec = KernelSpec.create(
        name="decode",
        source=KERNELS / "conformance" / "splitkv_decode.py",
        function="decode_splitkv",
        args={"batch": 2, "heads": 16, "kv_heads": 1, "seqlen": 1024, "dim": 64, "num_split": 4},
        archs=["90a"],
        backend="cutedsl",
    )
    with pytest.raises(LoweringError, match=r"entry 'decode' \(sm_90a\): .*workspaces \(partial_lse, partial_out\).*backend = \"cuda\""):
        lower_variant(spec, parse_arch("90a"))


def test_the_cubins_parameters_are_checked_against_the_launchers_arguments(cutedsl_lib, cache_dir):
    import dataclasses

    import tl_aot

    kernel = tl_aot.load(cutedsl_lib).manifest.entry("gemm_tma").variants[0].kernels[0]
    image = _cached_image(cache_dir, "gemm_tma", "sm_90a")
    (name,) = cutedsl.match_kernels((kernel,), image, entry="gemm_tma", arch="sm_90a").values()
    assert [a.ctype for a in kernel.args] == ["CUtensorMap", "CUtensorMap", "void*"]
    assert cubin.param_sizes(image, name) == [128, 128, 8]
    wrong = dataclasses.replace(kernel, args=(*kernel.args[:2], dataclasses.replace(kernel.args[2], ctype="int32_t")))
    with pytest.raises(CompileError, match=r"entry 'gemm_tma' \(sm_90a\): CuTeDSL kernel .* takes parameters of \[128, 128, 8\] bytes"):
        cutedsl.match_kernels((wrong,), image, entry="gemm_tma", arch="sm_90a")


def test_a_cutedsl_compile_failure_names_entry_arch_and_module_and_the_worker_goes_on(cutedsl_lib, cache_dir, tmp_path):
    import dataclasses

    from tl_aot.common.metadata import LoweredVariant
    from tl_aot.common.metadata_json import from_json

    for d in Path(cache_dir).iterdir():
        text = (d / "variant.json").read_text() if (d / "variant.json").is_file() else "{}"
        if '"backend": "cutedsl"' in text and '"entry": "scale"' in text and '"arch": "sm_90a"' in text:
            variant = from_json(LoweredVariant, text)
            break
    broken = dataclasses.replace(variant, cuda_source=variant.cuda_source.replace("--gpu-arch=sm_90a", "--gpu-arch=sm_1"))
    with pytest.raises(CompileError, match=r"entry 'scale' \(sm_90a\): CuTeDSL failed to compile the module TileLang generated") as e:
        cutedsl.compile_cubin(broken, parse_arch("90a"), tmp_path)
    assert "kernel.py" in str(e.value) and e.value.arch == "sm_90a"
    image, _ = cutedsl.compile_cubin(variant, parse_arch("90a"), tmp_path)
    assert image == _cached_image(cache_dir, "scale", "sm_90a")


def test_the_cli_builds_a_plain_kernel_file_with_backend_cutedsl(tmp_path, cache_dir):
    _needs_extra()
    build = ["build", f"{KERNELS / 'elementwise.py'}:add_one", "--backend", "cutedsl"]
    ok(tl_aot_here(*build, "--arch", "100a", "-o", tmp_path, "--cache-dir", cache_dir, "-q"))
    data = json.loads(ok(tl_aot_here("inspect", "--json", tmp_path / "libadd_one.so")).stdout)
    assert [(v["arch"], v["backend"]) for v in data["entries"][0]["variants"]] == [("sm_100a", "cutedsl")]


#: TileLang's CuTeDSL JIT at its first call: the generated module's cubin step, given the call's real tensors.
_JIT_CUBIN_STEP = """
import importlib.util, inspect, json, sys
import torch, tilelang
folder, shapes, floats = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
spec = importlib.util.spec_from_file_location("jit_module", folder + "/kernel.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
step = module._generate_cubin_if_needed
def value(n):
    return torch.empty(shapes[n][0], dtype=getattr(torch, shapes[n][1])) if n in shapes else 1.5 if n in floats else 7
step(*[value(n) for n in inspect.signature(step).parameters])
"""


@pytest.mark.parametrize(("entry", "n"), [("gemm_tma", None), ("scale", 1 << 20)])
def test_the_cubin_is_the_one_tilelangs_cutedsl_jit_makes_from_real_tensors(cutedsl_lib, cache_dir, tmp_path, entry, n):
    from tl_aot.common.metadata import LoweredVariant
    from tl_aot.common.metadata_json import from_json

    for d in Path(cache_dir).iterdir():
        text = (d / "variant.json").read_text() if (d / "variant.json").is_file() else "{}"
        if '"backend": "cutedsl"' in text and f'"entry": "{entry}"' in text and '"arch": "sm_90a"' in text:
            variant = from_json(LoweredVariant, text)
    (tmp_path / "kernel.py").write_text(variant.cuda_source)
    shapes = {p.name: ([d if isinstance(d, int) else n for d in p.shape], p.dtype) for p in variant.params if p.is_tensor}
    floats = [p.name for p in variant.params if not p.is_tensor and p.dtype.startswith("float")]
    step = [sys.executable, "-c", _JIT_CUBIN_STEP, str(tmp_path), json.dumps(shapes), json.dumps(floats)]
    subprocess.run(step, check=True, capture_output=True)
    jit, ours = (tmp_path / "kernel.cubin").read_bytes(), _cached_image(cache_dir, entry, "sm_90a")
    if n is None:
        assert jit == ours  # static shapes: byte for byte
    else:  # a dynamic dim: the same machine code; CuTeDSL spells the first call's shape into the kernel's name
        code = [{k: v for k, v in cubin.sections(img).items() if k.startswith(".text.")} for img in (jit, ours)]
        assert [list(c.values()) for c in code] == [list(code[1].values())] * 2
        assert str(n) in cubin.kernel_names(jit)[0] and cubin.kernel_names(ours) != cubin.kernel_names(jit)


def _jit_launcher(entry: str) -> str:
    """The C++ launcher TileLang's CuTeDSL JIT generates for ``entry`` of cutedsl.toml on an H100 (sm_90a)."""
    import tilelang
    import tomllib
    from tilelang import tvm
    from tilelang.jit.adapter.wrapper import TLPyWrapper

    e = next(x for x in tomllib.loads((KERNELS / "cutedsl.toml").read_text())["entry"] if x["name"] == entry)
    spec = importlib.util.spec_from_file_location(f"jit_{entry}", KERNELS / e["source"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, e["function"])
    func = fn.jit_impl.get_tir(**e["args"]) if hasattr(fn, "jit_impl") else fn(**e["args"])
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a", "keys": ["cuda", "gpu", "cutedsl"]})
    with tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}), tvm.transform.PassContext(opt_level=3):
        art = tilelang.lower(func, target=target)
    wrapper = TLPyWrapper(target)  # as CuTeDSLKernelAdapter builds it
    wrapper.assign_optimized_module(tvm.IRModule({"main": func}))
    wrapper.assign_pass_configs({})
    wrapper.assign_host_module(art.host_mod)
    wrapper.assign_device_module(art.device_mod)
    return wrapper.wrap(art.kernel_source)["launcher_cpp_code"]


def _ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\b\d+\b", text)]


def _jit_launch(code: str) -> dict:
    """Grid, block, dynamic shared memory (launch and attribute), launch API and TMA encodings of a JIT launcher."""
    (launch,) = re.findall(r"cuLaunchKernel\(\s*kernels\[0\],([^;]*?),\s*stream", code)
    (attr,) = re.findall(r"CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,\s*(\d+)\)", code)
    descs = {}
    for name, body in re.findall(r"// Descriptor \d+: \w+ \(tensor: (\w+)\)(.*?)if \(result", code, re.S):
        n = _ints(" ".join(re.findall(r"static_cast<\w+>\((\d+)\)", body)))
        r = (len(n) - 4) // 4  # rank r: dims r, strides r-1, box r, element strides r, then dtype and 4 enums
        descs[name] = (n[4 * r - 1], r, n[:r], n[r : 2 * r - 1], n[2 * r - 1 : 3 * r - 1], n[3 * r - 1 : 4 * r - 1], n[4 * r :])
    return {
        "grid_block_smem": _ints(launch),
        "smem_attribute": int(attr),
        "api": "cuLaunchKernel" if "cuLaunchKernelEx" not in code else "cuLaunchKernelEx",
        "tma": descs,
    }


def _our_launch(cc: str, entry: str) -> dict:
    """The same for tl_aot's launcher of ``entry`` (its sm_90a variant, launch_v0)."""
    body = cc.split(f'constexpr const char* kName = "{entry}";')[1].split("void launch_v0(")[1].split("\n}\n")[0]
    grid = _ints(re.search(r"grid0\[3\] = \{([^}]*)\}", body).group(1))
    block = _ints(re.search(r"block\[3\] = \{([^}]*)\}", body).group(1))
    smem = int(re.search(r"smem0 = (\d+);", body).group(1))
    descs = {}
    for dims, strides, estr, box, call in re.findall(
        r"dims\[\] = \{([^}]*)\};\s*const int64_t strides\[\] = \{([^}]*)\};\s*const cuuint32_t estr\[\] = \{([^}]*)\};"
        r"\s*const cuuint32_t box\[\] = \{([^}]*)\};\s*rt::encode_tiled\(([^;]*)\);",
        body,
    ):
        name = re.search(r'kName, "(\w+)"', call).group(1)
        n = _ints(call.split(",", 3)[3])  # dtype, rank, then after the pointer and arrays: the 4 enums
        descs[name] = (n[0], n[1], _ints(dims), _ints(strides), _ints(box), _ints(estr), n[-4:])
    (launch,) = re.findall(r"rt::launch\(kName, \"\w+\", [^;]*?args, (nullptr|cluster), (\w+), (\w+)\);", body)
    plain = launch == ("nullptr", "false", "false")  # no cluster, not cooperative, no PDL: rt::launch calls cuLaunchKernel
    return {
        "grid_block_smem": grid + block + [smem],
        "smem_attribute": smem,
        "api": "cuLaunchKernel" if plain else "cuLaunchKernelEx",
        "tma": descs,
    }


@pytest.mark.parametrize("entry", ["gemm_tma", "flash_fwd"])
def test_the_launch_is_the_one_tilelangs_cutedsl_jit_makes(cutedsl_lib, entry):
    """Grid, block, dynamic shared memory, launch API and every TMA descriptor as TileLang's JIT launcher has them."""
    cc = (cutedsl_lib.parent / ".tl_aot" / "tl_aot_cutedsl" / "tl_aot_cutedsl.cc").read_text()
    jit, ours = _jit_launch(_jit_launcher(entry)), _our_launch(cc, entry)
    assert jit["tma"] and jit["grid_block_smem"][-1] > 48 * 1024
    assert ours == jit
