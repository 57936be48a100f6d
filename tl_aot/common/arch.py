"""Parse CUDA architecture names (``sm_90a``, ``90a``, ``9.0a``, ``80+PTX``) into one canonical form."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import SpecError

__all__ = ["Arch", "parse_arch", "parse_arch_list"]

_ARCH_RE = re.compile(r"^(?:sm_|compute_)?(?P<major>\d{1,2})(?:\.)?(?P<minor>\d)(?P<suffix>[af]?)(?P<ptx>\+ptx)?$", re.I)


@dataclass(frozen=True, order=True)
class Arch:
    """One build target: compute capability, an arch-specific suffix (``a``/``f``) and a PTX fallback flag."""

    major: int
    minor: int
    suffix: str = ""
    ptx: bool = False

    @property
    def sm(self) -> str:
        """``sm_90a``: the name nvcc and TileLang's target use."""
        return f"sm_{self.major}{self.minor}{self.suffix}"

    @property
    def compute(self) -> str:
        return f"compute_{self.major}{self.minor}{self.suffix}"

    @property
    def number(self) -> int:
        return self.major * 10 + self.minor

    def __str__(self) -> str:
        return self.sm + ("+PTX" if self.ptx else "")


def parse_arch(text: str) -> Arch:
    """Parse one arch spelling; raise :class:`SpecError` naming the accepted forms."""
    raw = str(text).strip()
    m = _ARCH_RE.match(raw.replace(" ", ""))
    if not m:
        msg = f"unsupported arch name {raw!r}: expected forms like 'sm_90a', '90a', '9.0a', 'sm_80' or '80+PTX'"
        raise SpecError(msg, arch=raw)
    major, minor = int(m["major"]), int(m["minor"])
    suffix = m["suffix"].lower()
    ptx = bool(m["ptx"])
    if major < 7 or (major == 7 and minor < 5):
        msg = f"unsupported arch {raw!r}: tl_aot builds for sm_75 and newer (TileLang's CUDA backend)"
        raise SpecError(msg, arch=raw)
    if suffix and ptx:
        msg = (
            f"arch {raw!r}: '+PTX' cannot be combined with the arch-specific suffix '{suffix}'; "
            f"PTX for sm_{major}{minor}{suffix} is not forward compatible. Use '{major}{minor}+PTX' instead"
        )
        raise SpecError(msg, arch=raw)
    return Arch(major, minor, suffix, ptx)


def parse_arch_list(values: object) -> tuple[Arch, ...]:
    """Parse a list or a ``;``/``,``/space separated string of archs, dropping duplicates in order."""
    if isinstance(values, str):
        values = re.split(r"[;,\s]+", values)
    if not isinstance(values, (list, tuple)):
        msg = f'archs must be a list of archs such as ["90a", "80"] (or a string "90a;80"), got {type(values).__name__} {values!r}'
        raise SpecError(msg)
    out: list[Arch] = []
    for v in values:
        if str(v).strip() == "":
            continue
        a = parse_arch(v)
        if a not in out:
            out.append(a)
    if not out:
        msg = "no architecture given: pass at least one arch such as 'sm_90a' or '80'"
        raise SpecError(msg)
    return tuple(out)
