"""Wheel tags from symbol versions: the manylinux table (against auditwheel's), the ELF reader, the check and retag."""

from __future__ import annotations

import base64
import hashlib
import platform
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tl_aot.cuda.toolchain import RUNTIME_INCLUDE, find_cxx
from tl_aot.wheel.elf_deps import ElfError, parse_elf_deps, read_elf_deps
from tl_aot.wheel.manylinux import CHECKED_NAMESPACES, policies_for, version_key
from tl_aot.wheel.wheel_check import WheelCheckError, check_claim, check_files, check_wheel, retag_wheel

ARCH = platform.machine()
SOURCE = """
#include <dlfcn.h>
#include <pthread.h>
#include <string>
static pthread_once_t once = PTHREAD_ONCE_INIT;
static void init() {}
extern "C" const char* probe(const char* lib) {
  pthread_once(&once, init);
  void* h = dlopen(lib, RTLD_NOW);
  if (!h) return dlerror();
  static std::string name = lib;
  return dlsym(h, name.c_str()) ? "found" : "missing";
}
"""


def _auditwheel_policies(arch: str):
    policy = pytest.importorskip("auditwheel.policy")
    return policy.WheelPolicies(libc=policy.Libc.GLIBC, arch=policy.Architecture(arch))


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_policy_table_is_auditwheels(arch):
    theirs = {p.name: p for p in _auditwheel_policies(arch) if p.name.startswith("manylinux")}
    ours = {p.platform: p for p in policies_for(arch)}
    assert sorted(ours) == sorted(theirs)
    for name, mine in ours.items():
        sets = theirs[name].symbol_versions
        for ns, newest in mine.newest:
            numeric = [v for v in sets[ns] if re.fullmatch(r"[\d.]+", v)]
            assert newest == max(numeric, key=version_key), (name, ns)
            # contiguous: every older version the libraries may carry is in their set too (numeric order)
        named = {f"{ns}_{v}" for ns in CHECKED_NAMESPACES for v in sets.get(ns, ()) if not re.fullmatch(r"[\d.]+", v)}
        assert mine.named == named, name
        assert mine.system_libs - {"ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "ld-linux.so.2"} == set(theirs[name].whitelist)


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_oldest_fitting_tag_is_what_auditwheel_computes(arch):
    """Every version some policy of ``arch`` knows, alone and beside another namespace's: the same verdict as auditwheel."""
    theirs = _auditwheel_policies(arch)
    known = sorted({f"{ns}_{v}" for p in theirs for ns in CHECKED_NAMESPACES for v in p.symbol_versions.get(ns, ())})
    cases = [{v} for v in known] + [{v, w} for v in known for w in known if v.split("_")[0] != w.split("_")[0]][::7]
    cases += [{"GLIBC_2.99"}, {"GLIBCXX_3.4.99"}, {"CXXABI_TM_9"}]
    for versions in cases:
        want = theirs.versioned_symbols_policy({"lib.so": versions}).name
        fit = next((p.platform for p in policies_for(arch) if all(p.allows(v) for v in versions)), f"linux_{arch}")
        assert fit == want, versions


def _compile(tmp_path: Path, name: str, *flags: str) -> Path:
    src = tmp_path / "probe.cc"
    src.write_text(SOURCE)
    out = tmp_path / name
    cmd = [find_cxx(), "-shared", "-fPIC", "-O1", *flags, "-o", str(out), str(src)]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    """The probe built as the host compiler leaves it, and as tl_aot builds libraries (glibc_compat.h)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("ELF libraries: Linux only")
    tmp = tmp_path_factory.mktemp("elf")
    plain = _compile(tmp, "libplain.so", "-ldl", "-lpthread")
    compat = _compile(
        tmp, "libcompat.so", "-I", str(RUNTIME_INCLUDE), "-include", "tl_aot/glibc_compat.h",
        "-Wl,--push-state,--no-as-needed", "-l:libdl.so.2", "-l:libpthread.so.0", "-Wl,--pop-state",
    )  # fmt: skip
    return plain, compat


def test_elf_reader_agrees_with_pyelftools(libs):
    elffile = pytest.importorskip("elftools.elf.elffile")
    for lib in libs:
        mine = read_elf_deps(lib)
        with lib.open("rb") as f:
            elf = elffile.ELFFile(f)
            dyn = elf.get_section_by_name(".dynamic")
            needed = tuple(t.needed for t in dyn.iter_tags() if t.entry.d_tag == "DT_NEEDED")
            verneed = elf.get_section_by_name(".gnu.version_r")
            theirs = sorted((v.name, a.name) for v, auxes in verneed.iter_versions() for a in auxes)
            versym = elf.get_section_by_name(".gnu.version")
            dynsym = elf.get_section_by_name(".dynsym")
            by_ver = {}
            for i, sym in enumerate(dynsym.iter_symbols()):
                ver = versym.get_symbol(i)["ndx"]
                if sym["st_shndx"] == "SHN_UNDEF" and sym.name and ver not in ("VER_NDX_LOCAL", "VER_NDX_GLOBAL"):
                    by_ver.setdefault(ver, set()).add(sym.name)
        assert mine.machine == ARCH and mine.needed == needed
        assert sorted((v.library, v.version) for v in mine.versions) == theirs
        assert sorted(s for v in mine.versions for s in v.symbols) == sorted(s for names in by_ver.values() for s in names)


def test_not_an_elf_file_is_refused():
    with pytest.raises(ElfError, match="not an ELF file"):
        parse_elf_deps(b"#!/bin/sh\n" + b"\0" * 80)
    with pytest.raises(ElfError, match="truncated"):
        parse_elf_deps(b"\x7fELF\x02\x01\x01" + b"\0" * 33 + b"\xff" * 30)


def _glibc(lib: Path) -> dict:
    return {s: v.version for v in read_elf_deps(lib).versions if v.namespace == "GLIBC" for s in v.symbols}


def test_glibc_compat_binds_dl_and_pthread_once_to_their_old_versions(libs):
    plain, compat = libs
    base = {"x86_64": "GLIBC_2.2.5", "aarch64": "GLIBC_2.17"}.get(ARCH) or pytest.skip(f"no pinned versions for {ARCH}")
    versions = _glibc(compat)
    assert {versions[s] for s in ("dlopen", "dlsym", "dlerror", "pthread_once")} == {base}
    assert max(map(version_key, versions.values())) < (2, 34)
    assert {"libdl.so.2", "libpthread.so.0"} <= set(read_elf_deps(compat).needed)  # where glibc < 2.34 has them
    if max(map(version_key, _glibc(plain).values())) >= (2, 34):  # this glibc moved them: the plain build needs 2.34
        assert _glibc(plain)["dlopen"] == "GLIBC_2.34"
        assert check_files({"p/libplain.so": plain.read_bytes()}).platform == f"manylinux_2_34_{ARCH}"
    assert version_key(check_files({"p/libcompat.so": compat.read_bytes()}).platform.split("_" + ARCH)[0]) < (2, 34)


def _wheel(tmp_path: Path, files: dict, plat: str = f"linux_{ARCH}") -> Path:
    dist = "demo-1.0.dist-info"
    files = {**files, f"{dist}/METADATA": b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"}
    files[f"{dist}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: py3-none-{plat}\n".encode()
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    path = tmp_path / f"demo-1.0-py3-none-{plat}.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{dist}/RECORD", "\n".join([*record, f"{dist}/RECORD,,"]) + "\n")
    return path


@pytest.mark.parametrize("vendored", ["demo/libtvm_ffi.so", "demo.libs/libtvm_ffi-bb2bb475.so"])  # as is / as auditwheel names it
def test_a_vendored_libtvm_ffi_is_refused_with_the_reason(libs, tmp_path, vendored):
    wheel = _wheel(tmp_path, {"demo/libk.so": libs[1].read_bytes(), vendored: libs[1].read_bytes()})
    with pytest.raises(WheelCheckError) as e:
        check_wheel(wheel)
    assert f"vendors {vendored}" in str(e.value)
    assert "aborts the process on import" in str(e.value) and "--exclude libtvm_ffi.so" in str(e.value)


def test_a_tag_the_libraries_exceed_is_refused_naming_the_symbol(libs):
    report = check_files({"demo/libplain.so": libs[0].read_bytes()})
    newest = report.newest("GLIBC")
    if version_key(newest) < (2, 18):
        pytest.skip(f"this toolchain's libraries fit manylinux2014 ({newest})")
    with pytest.raises(WheelCheckError) as e:
        check_claim(report, f"manylinux_2_17_{ARCH}.manylinux2014_{ARCH}")
    text = str(e.value)
    assert f"do not fit manylinux_2_17_{ARCH} (the oldest true tag is {report.platform})" in text
    assert re.search(r"demo/libplain.so needs GLIBC_[\d.]+ \(needed by \w+\) from libc.so.6; manylinux_2_17 allows GLIBC up to 2\.17", text)
    check_claim(report, report.platform)  # the true one passes
    check_claim(report, f"linux_{ARCH}")  # and so does a plain linux tag


def test_a_library_outside_the_policy_and_the_wheel_is_named(libs, tmp_path):
    data = libs[1].read_bytes().replace(b"libpthread.so.0", b"libpthreaX.so.0")  # same length: still a valid ELF
    with pytest.raises(WheelCheckError, match=r"demo/libk.so needs libpthreaX.so.0, which is neither a manylinux_2_\d+ system library"):
        check_files({"demo/libk.so": data})


def test_retag_rewrites_name_wheel_and_record(libs, tmp_path):
    wheel = _wheel(tmp_path, {"demo/__init__.py": b"", "demo/libk.so": libs[1].read_bytes()})
    report = check_wheel(wheel)
    new = retag_wheel(wheel, report.platform)
    assert new.name == f"demo-1.0-py3-none-{report.platform}.whl" and not wheel.exists()
    with zipfile.ZipFile(new) as z:
        assert f"Tag: py3-none-{report.platform}\n" in z.read("demo-1.0.dist-info/WHEEL").decode()
        for line in z.read("demo-1.0.dist-info/RECORD").decode().splitlines():
            name, digest, size = line.split(",")
            if digest:
                data = z.read(name)
                assert digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode(), name
                assert int(size) == len(data)
        assert z.namelist()[-1] == "demo-1.0.dist-info/RECORD"


def test_check_wheel_command_reports_and_retags(libs, tmp_path):
    from tl_aot.frontends.cli import main

    wheel = _wheel(tmp_path, {"demo/libk.so": libs[1].read_bytes()})
    assert main(["check-wheel", "--retag", "-w", tmp_path / "out", wheel]) == 0
    (new,) = (tmp_path / "out").glob("*.whl")
    assert re.fullmatch(rf"demo-1\.0-py3-none-manylinux_2_\d+_{ARCH}\.whl", new.name)
    bad = _wheel(tmp_path, {"demo/libk.so": libs[1].read_bytes(), "demo/libtvm_ffi.so": b"\x7fELF"})
    assert main(["check-wheel", bad]) == 1


def test_check_wheel_names_the_wheel_it_refuses_and_skips_apache_tvm_ffis_own(tmp_path):
    """`pip wheel .` without --no-deps puts apache-tvm-ffi's wheel in dist/: check-wheel skips it, saying so."""
    import zipfile

    from tl_aot.frontends.cli import main

    theirs = tmp_path / "apache_tvm_ffi-0.1.12-cp312-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(theirs, "w") as z:
        z.writestr("tvm_ffi/lib/libtvm_ffi.so", b"\x7fELF")
    vendoring = tmp_path / "mine-0.1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(vendoring, "w") as z:
        z.writestr("mine/libtvm_ffi.so", b"\x7fELF")
    pure = tmp_path / "pure-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(pure, "w") as z:
        z.writestr("pure/__init__.py", "")
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["check-wheel", str(theirs), str(pure)]) == 0
        assert main(["check-wheel", str(vendoring)]) == 1
    assert f"{theirs.name}: skipped: apache-tvm-ffi's own wheel" in out.getvalue()
    assert f"{pure.name}: no native libraries (a pure-Python wheel)" in out.getvalue() and "see below" not in out.getvalue()
    assert f"tl_aot: error: {vendoring.name}: the wheel vendors mine/libtvm_ffi.so" in err.getvalue()


def test_a_wheel_tagged_any_that_holds_libraries_is_refused_and_retagged(libs, tmp_path):
    """A plain setuptools project packaging a built library as package data gets `py3-none-any`: pip would install it anywhere."""
    from tl_aot.frontends.cli import main

    wheel = _wheel(tmp_path, {"demo/__init__.py": b"", "demo/libk.so": libs[1].read_bytes()}, plat="any")
    report = check_wheel(wheel)
    with pytest.raises(WheelCheckError) as e:
        check_claim(report, "any")
    assert "tagged 'any' but holds shared libraries (demo/libk.so)" in str(e.value)
    assert f"its true tag is {report.platform}" in str(e.value)
    assert main(["check-wheel", wheel]) == 1
    assert main(["check-wheel", "--retag", wheel]) == 0
    assert not wheel.exists() and (tmp_path / f"demo-1.0-py3-none-{report.platform}.whl").is_file()
