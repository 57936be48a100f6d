"""Check a wheel's shared libraries against the manylinux policies: the oldest true tag, or why none is.

PyPI takes only manylinux (or musllinux) Linux wheels. A wheel of tl_aot libraries needs nothing
from the system beyond glibc/libstdc++ and libtvm_ffi.so, which apache-tvm-ffi provides at run time
(the libraries' RUNPATH finds it). So the tag can be computed from the libraries' symbol versions
with no repair step. A vendored copy of libtvm_ffi.so is refused: a second copy registers tvm-ffi's
types again and aborts the process on import.
"""

from __future__ import annotations

import hashlib
import os
import re
import zipfile
from base64 import urlsafe_b64encode
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import WheelCheckError
from .elf_deps import ElfDeps, ElfError, is_elf, parse_elf_deps
from .manylinux import CHECKED_NAMESPACES, Policy, policies_for, version_key

__all__ = [
    "WheelCheckError",
    "LibraryReport",
    "WheelReport",
    "check_files",
    "check_folder",
    "check_wheel",
    "check_claim",
    "retag_wheel",
    "TVM_FFI_LIB",
]

#: Provided at run time by the apache-tvm-ffi package, never by the wheel.
TVM_FFI_LIB = "libtvm_ffi.so"
_ALIASES = {"manylinux1": "manylinux_2_5", "manylinux2010": "manylinux_2_12", "manylinux2014": "manylinux_2_17"}


@dataclass(frozen=True)
class LibraryReport:
    """One shared library of the wheel: where it is and what it needs."""

    path: str
    deps: ElfDeps

    def newest(self, namespace: str):
        """The newest ``namespace`` version (``GLIBC_2.14``) the library needs, or None."""
        found = [v for v in self.deps.versions if v.namespace == namespace and re.fullmatch(r"[A-Z]+_[\d.]+", v.version)]
        return max(found, key=lambda v: version_key(v.version), default=None)


@dataclass(frozen=True)
class WheelReport:
    """Every library of a wheel, its architecture and the oldest manylinux policy all of them fit."""

    libraries: tuple[LibraryReport, ...]
    arch: str | None
    oldest: Policy | None

    @property
    def platform(self) -> str | None:
        """The oldest true platform tag (``manylinux_2_24_x86_64``), or None without libraries or policy."""
        return self.oldest.platform if self.oldest else None

    def newest(self, namespace: str) -> str | None:
        """The newest ``namespace`` version any library needs (``GLIBC_2.14``)."""
        found = [v for lib in self.libraries if (v := lib.newest(namespace))]
        return max(found, key=lambda v: version_key(v.version)).version if found else None

    def blockers(self, policy: Policy) -> list[str]:
        """Why ``policy`` does not fit: each library's symbol version beyond it (with a symbol) or library it lacks."""
        shipped = {Path(lib.path).name for lib in self.libraries}
        out = []
        for lib in self.libraries:
            for v in lib.deps.versions:
                if not policy.allows(v.version):
                    sym = f" (needed by {v.symbols[0]})" if v.symbols else ""
                    newest = dict(policy.newest).get(v.namespace)
                    out.append(f"{lib.path} needs {v.version}{sym} from {v.library}; {policy.tag} allows {v.namespace} up to {newest}")
            for name in lib.deps.needed:
                if name not in policy.system_libs and name != TVM_FFI_LIB and name not in shipped:
                    out.append(f"{lib.path} needs {name}, which is neither a {policy.tag} system library nor in the wheel")
        return out

    def summary(self) -> str:
        """A few lines for people: the tag and each library's newest GLIBC/GLIBCXX/CXXABI."""
        if not self.libraries:
            return "no native libraries (a pure-Python wheel): no platform tag to check; its tag stays as it is"
        lines = [f"oldest true tag: {self.platform}"]
        for lib in self.libraries:
            newest = [lib.newest(ns) for ns in CHECKED_NAMESPACES]
            need = ", ".join(f"{v.version} ({v.symbols[0] if v.symbols else '-'})" for v in newest if v)
            lines.append(f"  {lib.path}: {need or 'no versioned symbols'}")
        return "\n".join(lines)


def _vendored_tvm_ffi(names) -> list[str]:
    """Copies of libtvm_ffi among ``names``, also as auditwheel renames them (``libtvm_ffi-bb2bb475.so``)."""
    return [n for n in names if re.fullmatch(r"libtvm_ffi(-[0-9a-f]+)?\.so(\.[\d.]+)*", Path(n).name)]


def check_files(files: Mapping[str, bytes]) -> WheelReport:
    """The :class:`WheelReport` of a wheel's contents (path -> bytes); non-ELF files are skipped.

    Raises :class:`WheelCheckError` for a vendored libtvm_ffi.so, for libraries of different
    architectures, and when no manylinux policy fits (naming the symbols and libraries in the way).
    """
    vendored = _vendored_tvm_ffi(files)
    if vendored:
        msg = (
            f"the wheel vendors {', '.join(vendored)}: libtvm_ffi.so must come from the apache-tvm-ffi package at run "
            "time. A second copy registers tvm-ffi's types a second time and aborts the process on import "
            "('... is already registered'). Do not run `auditwheel repair` without `--exclude libtvm_ffi.so`."
        )
        raise WheelCheckError(msg)
    libs = []
    for path, data in sorted(files.items()):
        if is_elf(data):
            try:
                libs.append(LibraryReport(path, parse_elf_deps(data)))
            except ElfError as e:
                msg = f"{path}: {e}"
                raise WheelCheckError(msg) from None
    arches = sorted({lib.deps.machine for lib in libs})
    if len(arches) > 1:
        msg = f"the wheel mixes architectures: {', '.join(arches)}"
        raise WheelCheckError(msg)
    arch = arches[0] if arches else None
    report = WheelReport(tuple(libs), arch, None)
    if not libs:
        return report
    policies = policies_for(arches[0])  # libs: one arch
    if not policies:
        msg = f"no manylinux policy for {arch}"
        raise WheelCheckError(msg)
    fits = [p for p in policies if not report.blockers(p)]
    if not fits:
        reasons = "\n  ".join(report.blockers(policies[-1]))
        msg = f"no manylinux tag fits this wheel's libraries; even {policies[-1].tag}:\n  {reasons}"
        raise WheelCheckError(msg)
    return WheelReport(tuple(libs), arch, fits[0])


def check_wheel(wheel: str | os.PathLike) -> WheelReport:
    """:func:`check_files` of a ``.whl`` file."""
    try:
        with zipfile.ZipFile(wheel) as z:
            files = {n: z.read(n) for n in z.namelist() if not n.endswith("/")}
    except (OSError, zipfile.BadZipFile) as e:
        msg = f"cannot read the wheel {wheel}: {e}"
        raise WheelCheckError(msg) from None
    return check_files(files)


def check_folder(folder: str | os.PathLike) -> WheelReport:
    """:func:`check_files` of a folder laid out as a wheel (``bdist_wheel``'s staging folder); paths are relative."""
    folder = Path(folder)
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as f:
                head = f.read(4)
            if is_elf(head) or _vendored_tvm_ffi([path.name]):
                files[path.relative_to(folder).as_posix()] = path.read_bytes()
    return check_files(files)


def _policy_tag(platform: str, arch: str) -> str | None:
    """``manylinux_2_17`` of ``manylinux2014_x86_64`` / ``manylinux_2_17_x86_64``; None if not a manylinux tag."""
    if not platform.endswith("_" + arch):
        return None
    head = platform[: -len(arch) - 1]
    head = _ALIASES.get(head, head)
    return head if re.fullmatch(r"manylinux_\d+_\d+", head) else None


def check_claim(report: WheelReport, platform: str) -> None:
    """Refuse a platform tag (``manylinux_2_17_x86_64``, compressed sets too) the wheel's libraries exceed."""
    if report.arch is None:
        return
    if platform == "any":  # setuptools' tag for a wheel it thinks is pure: pip would install it on any OS and CPU
        libs = ", ".join(lib.path for lib in report.libraries)
        msg = (
            f"the wheel is tagged 'any' but holds shared libraries ({libs}): pip would install it where they cannot load; "
            f"its true tag is {report.platform} (`check-wheel --retag` writes it)"
        )
        raise WheelCheckError(msg)
    for tag in platform.split("."):
        if tag.startswith(("manylinux", "musllinux")) and not tag.endswith("_" + report.arch):
            msg = f"--plat-name {tag} is not for {report.arch}, the architecture of the wheel's libraries"
            raise WheelCheckError(msg)
        name = _policy_tag(tag, report.arch)
        if name is None:
            continue
        claimed = next((p for p in policies_for(report.arch) if p.tag == name), None)
        if claimed is None:
            msg = f"{tag}: no such manylinux policy for {report.arch}"
            raise WheelCheckError(msg)
        blockers = report.blockers(claimed)
        if blockers:
            msg = f"the wheel's libraries do not fit {tag} (the oldest true tag is {report.platform}):\n  " + "\n  ".join(blockers)
            raise WheelCheckError(msg)


def _record_line(name: str, data: bytes) -> str:
    digest = urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def retag_wheel(wheel: str | os.PathLike, platform: str, out_dir: str | os.PathLike | None = None) -> Path:
    """Write ``wheel`` again with platform tag ``platform`` (file name, WHEEL tags, RECORD); returns the new path.

    Into ``out_dir`` (default: beside the wheel, replacing it). The write is atomic.
    """
    wheel = Path(wheel)
    name, ver, *tags = wheel.stem.split("-")
    new_name = "-".join([name, ver, *tags[:-1], platform]) + ".whl"
    dest = Path(out_dir or wheel.parent) / new_name
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
        infos = src.infolist()
        wheel_meta = next(i.filename for i in infos if i.filename.endswith(".dist-info/WHEEL"))
        record = next(i.filename for i in infos if i.filename.endswith(".dist-info/RECORD"))
        text = src.read(wheel_meta).decode()
        text = re.sub(r"^(Tag: [^-\n]+-[^-\n]+-).*$", lambda m: m.group(1) + platform, text, flags=re.M)
        for info in infos:
            if info.filename == record:
                continue
            data = text.encode() if info.filename == wheel_meta else src.read(info)
            out.writestr(info, data)
        lines = [ln for ln in src.read(record).decode().splitlines() if ln and not ln.startswith(wheel_meta + ",")]
        lines.insert(
            len(lines) - 1 if lines and lines[-1].startswith(record + ",") else len(lines), _record_line(wheel_meta, text.encode())
        )
        out.writestr(src.getinfo(record), "\n".join(lines) + "\n")
    os.replace(tmp, dest)
    if dest != wheel and dest.parent == wheel.parent:
        wheel.unlink()
    return dest
