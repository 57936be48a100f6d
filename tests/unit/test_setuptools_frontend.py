"""tl_aot.frontends.setuptools without building: declarations, file names, outputs, wheel tag, the generated loader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from setuptools import Distribution, Extension

from tl_aot.common.arch import parse_arch, parse_arch_list
from tl_aot.common.errors import SpecError
from tl_aot.frontends.setuptools import TileLangExtension, bdist_wheel, build_ext

DEMO = Path(__file__).resolve().parents[1] / "packages" / "setuptools_wheel"
ADD_ONE = {"name": "add_one", "source": "kernels/add_one.py", "function": "add_one"}
SCALE = {"name": "scale", "source": "kernels/scale.py", "function": "scale", "args": {"N": 1024}, "archs": ["90a"]}


@pytest.fixture
def in_demo(monkeypatch):
    monkeypatch.chdir(DEMO)
    monkeypatch.delenv("TL_AOT_ARCHS", raising=False)


def test_declaration_names_files_and_records_kernel_sources(in_demo):
    ext = TileLangExtension("tl_demo._kernels", entries=[ADD_ONE, SCALE], archs=["sm_80"])
    assert (ext.library_name, ext.library_filename, ext.loader_filename) == ("_kernels", "lib_kernels.so", "_kernels.py")
    # add_one.py imports common.py: both reach the sdist through ``depends``.
    assert ext.depends == ["kernels/add_one.py", "kernels/common.py", "kernels/scale.py"]
    spec = ext.library_spec()
    assert [(e.name, [str(a) for a in e.archs]) for e in spec.entries] == [("add_one", ["sm_80"]), ("scale", ["sm_90a"])]
    assert dict(spec.entries[1].args) == {"N": 1024}
    override = ext.library_spec(archs=TileLangExtension("x._k", entries=[ADD_ONE], archs="86").archs)
    assert {str(a) for e in override.entries for a in e.archs} == {"sm_86"}


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"entries": [{"name": "a", "source": "k.py"}]}, "missing key\\(s\\) function"),
        ({"entries": [{**ADD_ONE, "arg": {}}]}, "unknown key 'arg' \\(did you mean 'args'\\?\\)"),
        ({"entries": [{**ADD_ONE, "name": "LIBRARY_PATH"}]}, "reserved by tl_aot"),
        ({"entries": [{**ADD_ONE, "name": "cleanup_module"}]}, "reserved by tl_aot"),
        ({"entries": [ADD_ONE, ADD_ONE]}, "'add_one' is listed twice"),
        ({"entries": [{**ADD_ONE, "args": [1, 2]}]}, "args must be a table"),
        ({"entries": [{**ADD_ONE, "archs": ["sm_90x"]}]}, "unsupported arch name"),
        ({"entries": [ADD_ONE], "sources": ["a.c"]}, "unsupported argument\\(s\\) sources"),
        ({"entries": []}, "no entries"),
    ],
)
def test_bad_declarations_fail_in_setup_py(kwargs, match):
    with pytest.raises(SpecError, match=match):
        TileLangExtension("pkg._kernels", **kwargs)


def test_bad_module_name():
    with pytest.raises(SpecError, match="dotted module name"):
        TileLangExtension("pkg/kernels", entries=[ADD_ONE])


def test_missing_kernel_file_is_named_at_build_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ext = TileLangExtension("pkg._kernels", entries=[ADD_ONE], archs=["80"])
    with pytest.raises(SpecError, match="kernel source kernels/add_one.py does not exist"):
        ext.library_spec()


def _dist(*exts) -> Distribution:
    return Distribution(
        {"name": "demo", "version": "0", "packages": ["tl_demo"], "ext_modules": list(exts), "cmdclass": {"build_ext": build_ext}}
    )


@pytest.mark.filterwarnings("ignore:setup.py install is deprecated")  # the output mapping asks install_lib
def test_build_ext_places_library_and_loader_in_the_package(in_demo):
    ext = TileLangExtension("tl_demo._kernels", entries=[ADD_ONE], archs=["80"])
    cmd = build_ext(_dist(ext, Extension("tl_demo._native", ["src/native.c"])))
    cmd.ensure_finalized()
    assert cmd.get_ext_fullpath("tl_demo._kernels").endswith("/tl_demo/lib_kernels.so")
    outputs = [Path(p).name for p in cmd.get_outputs()]
    assert {"lib_kernels.so", "_kernels.py"} <= set(outputs)
    glue = [str(Path("tl_demo") / "_tl_aot_torch" / name) for name in ("__init__.py", "torch_fakes.py")]  # the torch glue package
    assert all(any(p.endswith(g) for p in cmd.get_outputs()) for g in glue)
    assert any(n.startswith("_native.") and n.endswith(".so") for n in outputs)
    cmd.inplace = True
    mapping = {Path(k).name: v for k, v in cmd.get_output_mapping().items()}
    assert mapping["lib_kernels.so"] == str(Path("tl_demo") / "lib_kernels.so")
    assert mapping["_kernels.py"] == str(Path("tl_demo") / "_kernels.py")
    assert set(glue) <= set(cmd.get_output_mapping().values())


def test_an_older_one_file_torch_glue_is_removed_where_its_package_lands(tmp_path):
    """tl_aot once shipped ``_tl_aot_torch.py``; a rebuild leaves only the package ``_tl_aot_torch/`` that replaces it."""
    from tl_aot.frontends.setuptools_files import remove_stale_glue

    (tmp_path / "_tl_aot_torch").mkdir()
    (tmp_path / "_tl_aot_torch.py").write_text("# the old glue\n")
    remove_stale_glue(tmp_path)
    remove_stale_glue(tmp_path)  # none left: nothing to do
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_tl_aot_torch"]


def test_wheel_tag_is_py3_none_only_without_cpython_extensions(in_demo):
    kernels = TileLangExtension("tl_demo._kernels", entries=[ADD_ONE], archs=["80"])
    pure = bdist_wheel(_dist(kernels))
    pure.ensure_finalized()
    impl, abi, plat = pure.get_tag()
    assert (impl, abi) == ("py3", "none") and plat.startswith("linux")
    mixed = bdist_wheel(_dist(kernels, Extension("tl_demo._native", ["src/native.c"])))
    mixed.ensure_finalized()
    assert mixed.get_tag()[:2] != ("py3", "none")


def test_build_ext_options_are_checked():
    cmd = build_ext(_dist())
    cmd.archs = "80;bogus"
    with pytest.raises(Exception, match="--archs: unsupported arch name 'bogus'"):
        cmd.ensure_finalized()


def test_generated_loader_needs_only_tvm_ffi():
    from tl_aot.codegen.render import render_loader
    from tl_aot.common.metadata import Manifest
    from tl_aot.common.metadata_json import from_json

    manifest = from_json(Manifest, json.loads((Path(__file__).parent / "golden" / "manifest.json").read_text()))
    text = render_loader(manifest, module="pkg._kernels", library_file="lib_kernels.so")
    assert text.startswith(f"# Generated by tl_aot {manifest.tl_aot_version} from ")
    compile(text, "_kernels.py", "exec")
    imports = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(("import ", "from "))]
    # tvm_ffi at import; the torch glue (shipped beside the loader, importing no torch) for entries taking
    # no input tensor, and inside register_torch_ops() (with os, to find the native companion beside the library)
    glue = "from . import _tl_aot_torch"
    assert imports == ["import os", "import tvm_ffi", "import json", glue, glue, "import os as __tl_aot_os"]
    assert "import torch" not in text and "__tl_aot_register_if_torch" not in text
    for name, members in manifest.exports().items():
        raw = f'__tl_aot_module["{name}"]'
        # several outputs come back as a tuple, like the JIT's list, not as a tvm_ffi.Array
        call = f"__tl_aot_tuple({raw})" if len(members[0].outputs) > 1 else raw
        # no input tensor to place the outputs: allocated with torch on its current device when torch is imported
        tensorless = members[0].outputs and not any(p.is_tensor for p in members[0].inputs)
        assert (f'{name} = __tl_aot_allocate({call}, "{name}")' if tensorless else f"{name} = {call}") in text
        assert all(m.signature() in text for m in members)
    assert "norm__s0" not in text
    assert '"lib_kernels.so"' in text and "pkg._kernels needs apache-tvm-ffi" in text


def test_a_kernel_spec_given_in_setup_py_keeps_every_field(tmp_path, monkeypatch):
    from tl_aot.spec import KernelSpec

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TL_AOT_ARCHS", raising=False)
    (tmp_path / "k.py").write_text("def gemm(m, block_m):\n    pass\n")
    spec = KernelSpec.create(
        name="g",
        source="k.py",
        function="gemm",
        args={"m": 64, "block_m": 128},
        factory_args={"n": 32},
        jit_args={"stages": 2},
        select="fwd",
        imports=["json"],
        archs=["90a"],
        pass_configs={"tl.disable_tma_lower": True},
        compile_flags=["-O3"],
        device="H100-SXM",
        out_idx=[-1],
        tune=[{"block_m": 64}, {"block_m": 128}],
    )
    assert TileLangExtension("pkg._k", entries=[spec]).library_spec().entries == (spec,)
    one = KernelSpec.create(**spec.keywords(), specialisations=[{"args": {"n": 1}}])[0]
    with pytest.raises(SpecError, match="KernelSpec 'g__s0' is one specialisation"):
        TileLangExtension("pkg._k", entries=[one])


def test_entries_are_declared_arch_free_and_bound_by_the_one_precedence(in_demo, monkeypatch):
    """An entry is checked once in setup.py, arch-free; build_ext --archs > TL_AOT_ARCHS > entry's > extension's."""
    ext = TileLangExtension("tl_demo._kernels", entries=[{**ADD_ONE, "device": "H100-SXM"}, SCALE], archs=["90a"])
    assert [e.archs for e in ext.entries] == [(), (parse_arch("90a"),)] and ext.entries[0].device == "H100-SXM"
    spec = ext.library_spec()
    assert [[str(a) for a in e.archs] for e in spec.entries] == [["sm_90a"], ["sm_90a"]] and spec.entries[0].device == "H100-SXM"
    monkeypatch.setenv("TL_AOT_ARCHS", "80")
    with pytest.raises(SpecError, match="entry 'add_one': device 'H100-SXM' fits none of its archs \\(sm_80\\)"):
        ext.library_spec()  # the device is checked again once the archs are known
    plain = TileLangExtension("tl_demo._kernels", entries=[ADD_ONE, SCALE], archs=["90a"])
    lines = []
    assert {str(a) for e in plain.library_spec(log=lines.append).entries for a in e.archs} == {"sm_80"}
    assert lines == ["archs sm_80 from TL_AOT_ARCHS (no build_ext --archs given)"]
    assert {str(a) for e in plain.library_spec(archs=parse_arch_list("86")).entries for a in e.archs} == {"sm_86"}
