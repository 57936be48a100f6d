"""Importing the user's kernel files: local dependencies, and no stale code in a long-lived process."""

from __future__ import annotations

from tl_aot.config.user_code import import_kernel_file, local_dependencies, snapshot_sources
from tl_aot.pipeline.cache import variant_key


def sources_of(spec):
    """The entry's kernel file and local modules, read now, as the plan reads them."""
    return snapshot_sources(spec.source, spec.imports)


def test_local_dependencies_are_found_without_importing(tmp_path):
    (tmp_path / "values.py").write_text("import helpers\nBLOCK = 128\n")
    (tmp_path / "helpers.py").write_text("X = 1\n")
    (tmp_path / "kernels.py").write_text("import os\nfrom values import BLOCK\n\ndef f():\n    return BLOCK\n")
    assert local_dependencies(tmp_path / "kernels.py") == sorted([tmp_path / "helpers.py", tmp_path / "values.py"])


def test_one_import_serves_every_arch_of_a_build(tmp_path):
    (tmp_path / "k.py").write_text("def f():\n    return 1\n")
    assert import_kernel_file(tmp_path / "k.py") is import_kernel_file(tmp_path / "k.py")


def test_edited_kernel_and_local_module_are_imported_afresh(tmp_path):
    """A second build in the same process must lower the code the new cache key was computed from."""
    kernel, values = tmp_path / "kern.py", tmp_path / "sizes.py"
    values.write_text("BLOCK = 128\n")
    kernel.write_text("from sizes import BLOCK\n\ndef f():\n    return ('v1', BLOCK)\n")
    assert import_kernel_file(kernel).f() == ("v1", 128)
    kernel.write_text("from sizes import BLOCK\n\ndef f():\n    return ('v2', BLOCK)\n")
    assert import_kernel_file(kernel).f() == ("v2", 128)
    values.write_text("BLOCK = 256\n")  # only the local module changes
    assert import_kernel_file(kernel).f() == ("v2", 256)


def test_edited_module_inside_a_package_is_imported_afresh(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "consts.py").write_text("N = 1\n")
    (pkg / "ops.py").write_text("from .consts import N\n\ndef f():\n    return N\n")
    assert import_kernel_file(pkg / "ops.py").f() == 1
    (pkg / "consts.py").write_text("N = 2\n")
    assert import_kernel_file(pkg / "ops.py").f() == 2


def test_cache_key_follows_local_modules(tmp_path):
    from tl_aot.spec import KernelSpec

    (tmp_path / "sizes.py").write_text("BLOCK = 128\n")
    (tmp_path / "k.py").write_text("from sizes import BLOCK\n\ndef f():\n    return BLOCK\n")
    spec = KernelSpec.create(name="k", source=tmp_path / "k.py", function="f", archs=["80"])
    sources = sources_of(spec)
    before = variant_key(spec, spec.archs[0], sources, spec.spelled_values(), nvcc_version="13.0")
    assert sources.paths == ((tmp_path / "k.py").resolve(), (tmp_path / "sizes.py").resolve())
    (tmp_path / "sizes.py").write_text("BLOCK = 256\n")
    assert variant_key(spec, spec.archs[0], sources_of(spec), spec.spelled_values(), nvcc_version="13.0") != before


def test_a_same_named_module_of_another_project_never_shadows_ours(tmp_path):
    for project, block in (("a", 64), ("b", 128)):
        (tmp_path / project).mkdir()
        (tmp_path / project / "sizes.py").write_text(f"BLOCK = {block}\n")
        (tmp_path / project / "kern.py").write_text("from sizes import BLOCK\n\ndef f():\n    return BLOCK\n")
    assert import_kernel_file(tmp_path / "a" / "kern.py").f() == 64
    assert import_kernel_file(tmp_path / "b" / "kern.py").f() == 128  # not project a's sizes.py
    assert import_kernel_file(tmp_path / "a" / "kern.py").f() == 64


def test_another_nvcc_host_compiler_is_another_key(tmp_path, monkeypatch):
    """nvcc preprocesses with the host compiler and tells cicc its version: a cache shared with a machine of another one
    never serves its images."""
    from tl_aot.config.kernel_spec import KernelSpec
    from tl_aot.pipeline import cache

    (tmp_path / "k.py").write_text("def f():\n    return 1\n")
    spec = KernelSpec.create(name="k", source=tmp_path / "k.py", function="f", archs=["80"])
    monkeypatch.setattr(cache, "nvcc_host_compiler", lambda: "gcc (Debian 12.2.0-14+deb12u1) 12.2.0")
    sources = sources_of(spec)
    before = variant_key(spec, spec.archs[0], sources, spec.spelled_values(), nvcc_version="13.0")
    assert variant_key(spec, spec.archs[0], sources, spec.spelled_values(), nvcc_version="13.0") == before
    monkeypatch.setattr(cache, "nvcc_host_compiler", lambda: "gcc (GCC) 14.1.0")
    assert variant_key(spec, spec.archs[0], sources, spec.spelled_values(), nvcc_version="13.0") != before
