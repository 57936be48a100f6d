"""The tools a variant's bytes depend on, as one comparable value: what machines must agree on.

A cluster worker, a build shard and the machine that links the shards each report a
:class:`Toolset`; a worker or part whose toolset differs from the driver's is refused before it is
used, and the message names each difference (``tl_aot 0.1.0 here, 0.2.0 there``). The versions are
read from the installed distributions, never by importing TileLang.

Test hook: ``TL_AOT_TEST_REPORT_VERSION`` makes this process report that tl_aot version instead of
its own (the tests start a mismatched cluster worker with it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from ..common.versions import __version__, package_version

__all__ = ["Toolset", "local_toolset", "differences"]

#: The environment variable of the test hook above.
TEST_VERSION_ENV = "TL_AOT_TEST_REPORT_VERSION"


@dataclass(frozen=True)
class Toolset:
    """Versions that change a lowered variant or its image (plain strings: sent between machines as is)."""

    tl_aot: str
    tilelang: str
    nvcc: str
    tvm_ffi: str
    cutedsl: str  # "" where the cutedsl extra is not installed
    python: str  # major.minor: tasks travel as pickles
    cache_schema: str
    host_compiler: str  # the launcher's and runtime's compiler, by name and version (cuda/host_identity.py)
    nvcc_host_compiler: str  # the host compiler nvcc preprocesses CUDA with ("" where nvcc is not asked)

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    def describe(self) -> str:
        """``tl_aot 0.1.0, TileLang 0.1.15, nvcc 13.0.88, tvm-ffi 0.1.11``: the versions a log line shows."""
        return f"tl_aot {self.tl_aot}, TileLang {self.tilelang or 'missing'}, nvcc {self.nvcc or 'missing'}, tvm-ffi {self.tvm_ffi}"


_LABELS = {
    "tl_aot": "tl_aot",
    "tilelang": "TileLang",
    "nvcc": "nvcc",
    "tvm_ffi": "apache-tvm-ffi",
    "cutedsl": "nvidia-cutlass-dsl",
    "python": "Python",
    "cache_schema": "tl_aot's cache schema",
    "host_compiler": "host C++ compiler",
    "nvcc_host_compiler": "nvcc's host compiler",
}


def local_toolset(*, nvcc: bool = True) -> Toolset:
    """The toolset of this process; ``nvcc=False`` leaves nvcc's version and host compiler out (a machine that only links)."""
    from ..common.errors import TlAotError
    from ..cuda.host_identity import host_compiler, nvcc_host_compiler
    from ..cuda.toolchain import nvcc_version
    from .cache import CACHE_SCHEMA

    version = ""
    if nvcc:
        try:
            version = nvcc_version()
        except TlAotError:
            version = ""
    return Toolset(
        tl_aot=os.environ.get(TEST_VERSION_ENV) or __version__,
        tilelang=package_version("tilelang"),
        nvcc=version,
        tvm_ffi=package_version("apache-tvm-ffi"),
        cutedsl=package_version("nvidia-cutlass-dsl"),
        python=f"{sys.version_info[0]}.{sys.version_info[1]}",
        cache_schema=str(CACHE_SCHEMA),
        host_compiler=host_compiler(),
        nvcc_host_compiler=nvcc_host_compiler() if nvcc else "",
    )


def differences(
    here: Toolset | Mapping[str, str], there: Toolset | Mapping[str, str], *, here_name: str = "here", there_name: str = "there"
) -> list[str]:
    """Each field that differs, worded ``TileLang 0.1.15 here, 0.1.12 there``; empty when they agree."""
    a = here.as_dict() if isinstance(here, Toolset) else dict(here)
    b = there.as_dict() if isinstance(there, Toolset) else dict(there)
    out = []
    for field, label in _LABELS.items():
        if a.get(field, "") != b.get(field, ""):
            out.append(f"{label} {a.get(field) or 'missing'} {here_name}, {b.get(field) or 'missing'} {there_name}")
    return out
