"""The manylinux policies: per tag, the newest symbol versions and the system libraries a wheel may use.

Facts transcribed from the PEP 600 policy that auditwheel ships (``manylinux-policy.json``); the
unit tests compare this table with auditwheel's own. A tag's symbol sets are contiguous in each
namespace, so each is held as its newest version (plus the few named, non-numeric versions).
Only the namespaces the policy constrains are checked (GLIBC, GLIBCXX, CXXABI, GCC).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Policy", "POLICIES", "CHECKED_NAMESPACES", "policies_for", "version_key"]

CHECKED_NAMESPACES = ("GLIBC", "GLIBCXX", "CXXABI", "GCC")

#: System libraries every manylinux_2_24+ policy allows; older tags allow fewer (see _MISSING_LIBS).
_SYSTEM_LIBS = frozenset(
    "libatomic.so.1 libgcc_s.so.1 libstdc++.so.6 libm.so.6 libmvec.so.1 libanl.so.1 libdl.so.2 librt.so.1 libc.so.6 "
    "libnsl.so.1 libutil.so.1 libpthread.so.0 libX11.so.6 libXext.so.6 libXrender.so.1 libICE.so.6 libSM.so.6 libGL.so.1 "
    "libgobject-2.0.so.0 libgthread-2.0.so.0 libglib-2.0.so.0 libresolv.so.2 libexpat.so.1 libz.so.1".split()
)
_MISSING_LIBS = {"manylinux_2_5": {"libexpat.so.1", "libmvec.so.1"}, "manylinux_2_12": {"libmvec.so.1"}, "manylinux_2_17": {"libmvec.so.1"}}
#: The dynamic loader is always present (auditwheel does not count it as a dependency).
_LOADERS = frozenset({"ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "ld-linux.so.2"})

#: (tag, newest GLIBC, GLIBCXX, CXXABI, GCC) per architecture.
_X86_64 = (
    ("manylinux_2_5", "2.5", "3.4.8", "1.3.1", "4.2.0"),
    ("manylinux_2_12", "2.12", "3.4.13", "1.3.3", "4.3.0"),
    ("manylinux_2_17", "2.17", "3.4.19", "1.3.7", "4.8.0"),
    ("manylinux_2_24", "2.24", "3.4.22", "1.3.10", "4.8.0"),
    ("manylinux_2_26", "2.26", "3.4.22", "1.3.10", "4.8.0"),
    ("manylinux_2_27", "2.27", "3.4.24", "1.3.11", "7.0.0"),
    ("manylinux_2_28", "2.28", "3.4.24", "1.3.11", "7.0.0"),
    ("manylinux_2_31", "2.31", "3.4.28", "1.3.12", "7.0.0"),
    ("manylinux_2_34", "2.34", "3.4.29", "1.3.13", "7.0.0"),
    ("manylinux_2_35", "2.35", "3.4.30", "1.3.13", "12.0.0"),
    ("manylinux_2_36", "2.36", "3.4.30", "1.3.13", "12.0.0"),
    ("manylinux_2_37", "2.36", "3.4.30", "1.3.13", "12.0.0"),
    ("manylinux_2_38", "2.38", "3.4.30", "1.3.13", "12.0.0"),
    ("manylinux_2_39", "2.39", "3.4.33", "1.3.15", "14.0.0"),
    ("manylinux_2_40", "2.40", "3.4.33", "1.3.15", "14.0.0"),
    ("manylinux_2_41", "2.41", "3.4.33", "1.3.15", "14.0.0"),
)
_AARCH64 = (
    ("manylinux_2_17", "2.18", "3.4.19", "1.3.7", "4.7.0"),
    ("manylinux_2_24", "2.24", "3.4.22", "1.3.10", "4.7.0"),
    ("manylinux_2_26", "2.26", "3.4.24", "1.3.11", "7.0.0"),
    ("manylinux_2_27", "2.27", "3.4.24", "1.3.11", "7.0.0"),
    ("manylinux_2_28", "2.28", "3.4.24", "1.3.11", "7.0.0"),
    ("manylinux_2_31", "2.31", "3.4.28", "1.3.12", "7.0.0"),
    ("manylinux_2_34", "2.34", "3.4.29", "1.3.13", "11.0"),
    ("manylinux_2_35", "2.35", "3.4.30", "1.3.13", "11.0"),
    ("manylinux_2_36", "2.36", "3.4.30", "1.3.13", "11.0"),
    ("manylinux_2_37", "2.36", "3.4.30", "1.3.13", "11.0"),
    ("manylinux_2_38", "2.38", "3.4.30", "1.3.13", "11.0"),
    ("manylinux_2_39", "2.39", "3.4.33", "1.3.15", "14.0.0"),
    ("manylinux_2_40", "2.40", "3.4.33", "1.3.15", "14.0.0"),
    ("manylinux_2_41", "2.41", "3.4.33", "1.3.15", "14.0.0"),
)
#: Non-numeric versions, allowed from the tag named on (CXXABI_FLOAT128 on x86-64 only).
_NAMED: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("CXXABI_TM_1", "manylinux_2_17", ("x86_64", "aarch64")),
    ("CXXABI_FLOAT128", "manylinux_2_24", ("x86_64",)),
)
_NAMED += (("GLIBC_ABI_DT_RELR", "manylinux_2_36", ("x86_64", "aarch64")),)


def version_key(version: str) -> tuple[int, ...]:
    """``(2, 2, 5)`` of ``2.2.5``: numeric order of a symbol version's number part."""
    return tuple(int(p) for p in re.findall(r"\d+", version))


def _glibc(tag: str) -> tuple[int, ...]:
    return version_key(tag.split("_", 1)[1])


@dataclass(frozen=True)
class Policy:
    """One manylinux tag on one architecture: what its libraries may ask of the system."""

    tag: str  # manylinux_2_28
    arch: str  # x86_64
    newest: tuple[tuple[str, str], ...]  # (namespace, newest version) per checked namespace
    named: frozenset[str]  # non-numeric versions allowed (CXXABI_TM_1 ...)
    system_libs: frozenset[str]

    @property
    def platform(self) -> str:
        """The wheel platform tag: ``manylinux_2_28_x86_64``."""
        return f"{self.tag}_{self.arch}"

    def allows(self, version: str) -> bool:
        """Whether a library may need symbol version ``version`` (``GLIBC_2.14``) under this tag."""
        namespace, _, number = version.partition("_")
        if namespace not in CHECKED_NAMESPACES:
            return True
        if not re.fullmatch(r"[\d.]+", number):
            return version in self.named
        return version_key(number) <= version_key(dict(self.newest)[namespace])


def _build(arch: str, rows: tuple[tuple[str, ...], ...]) -> tuple[Policy, ...]:
    out = []
    for tag, *newest in rows:
        named = frozenset(v for v, since, arches in _NAMED if arch in arches and _glibc(tag) >= _glibc(since))
        libs = (_SYSTEM_LIBS - _MISSING_LIBS.get(tag, set())) | _LOADERS
        out.append(Policy(tag, arch, tuple(zip(CHECKED_NAMESPACES, newest)), named, frozenset(libs)))
    return tuple(out)


#: Oldest tag first, per architecture.
POLICIES = {"x86_64": _build("x86_64", _X86_64), "aarch64": _build("aarch64", _AARCH64)}


def policies_for(arch: str) -> tuple[Policy, ...]:
    """The policies of ``arch``, oldest first (empty for an architecture the table does not hold)."""
    return POLICIES.get(arch, ())
