"""Which archs a build targets, decided once for every front end.

The precedence is declared here and nowhere else: archs given **explicitly** for this build
(``--arch``, ``build_ext --archs``, CMake's ``ARCHS``) beat the **environment** (``TL_AOT_ARCHS``),
which beats what the project **declared** (an entry's ``archs``, then its library's or
extension's), which beats the **default** (:func:`tl_aot.cuda.toolchain.default_archs`, called only
when needed: it asks nvcc). Each level is a :class:`Given`, a value with the place it came from,
so a wrong value is refused naming that place (``TL_AOT_ARCHS: unsupported arch name '9z' ...``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..common.arch import Arch, parse_arch_list
from ..common.errors import SpecError

__all__ = ["ENV_VAR", "Given", "ArchChoice", "env_archs", "parse_given", "resolve_archs", "cmake_spelling"]

#: The environment variable that overrides every declared arch.
ENV_VAR = "TL_AOT_ARCHS"


@dataclass(frozen=True)
class Given:
    """Archs as one source gives them (a ``"80;90a"`` string, a list of spellings, or Arch objects) and where from."""

    origin: str  # named in errors and the log: "--arch", "TL_AOT_ARCHS", "spec.toml: entry #1 (gemm)", ...
    value: object = None  # None, "" or an empty list: this source gives no archs

    @property
    def given(self) -> bool:
        """Whether this source names any arch (an empty or blank value counts as not given)."""
        if self.value is None:
            return False
        if isinstance(self.value, str):
            return bool(self.value.strip())
        return not isinstance(self.value, (list, tuple)) or len(self.value) > 0


@dataclass(frozen=True)
class ArchChoice:
    """The archs a build targets and where they came from (``archs`` empty: no source gave any and no default)."""

    archs: tuple[Arch, ...]
    origin: str = ""

    @property
    def display(self) -> str:
        """``sm_80, sm_90a+PTX``: the archs as build logs and CMake's comment show them."""
        return ", ".join(str(a) for a in self.archs)


def env_archs(environ: Mapping[str, str] | None = None) -> Given:
    """The environment level: ``TL_AOT_ARCHS`` (``"80;90a"``) of ``environ`` (default: this process's)."""
    return Given(ENV_VAR, (os.environ if environ is None else environ).get(ENV_VAR))


def parse_given(given: Given) -> tuple[Arch, ...]:
    """The archs of one source, parsed; Arch objects pass through as they are; errors name ``given.origin``."""
    value = given.value
    if isinstance(value, (list, tuple)) and value and all(isinstance(a, Arch) for a in value):
        return tuple(dict.fromkeys(value))
    try:
        return parse_arch_list(value)
    except SpecError as e:
        msg = f"{given.origin}: {e}"
        raise SpecError(msg, **e.fields()) from None


def resolve_archs(
    explicit: Given | Sequence[Given] | None = None,
    env: Given | Sequence[Given] | None = None,
    declared: Given | Sequence[Given] | None = None,
    default: Callable[[], tuple[Arch, ...]] | tuple[Arch, ...] | None = None,
    *,
    log: Callable[[str], None] | None = None,
) -> ArchChoice:
    """The archs of a build: the first source given of ``explicit``, ``env``, ``declared`` (each one or several), else ``default``.

    Only the winning source is parsed (a lower one is checked where it is declared). ``default``
    is a tuple of archs or a function returning them, called only when no source gives any;
    without one the result may be empty and the caller says what to set. ``log`` is told when the
    environment decides (``archs sm_80 from TL_AOT_ARCHS (no --arch given)``), which a user may
    not expect.
    """
    levels = [_sources(explicit), _sources(env), _sources(declared)]
    for rank, sources in enumerate(levels):
        for given in sources:
            if given.given:
                choice = ArchChoice(parse_given(given), given.origin)
                if rank == 1 and log is not None:
                    passed = " or ".join(g.origin for g in levels[0]) or "explicit arch"
                    log(f"archs {choice.display} from {given.origin} (no {passed} given)")
                return choice
    if default is None:
        return ArchChoice(())
    archs = default() if callable(default) else default
    return ArchChoice(parse_given(Given("the default archs", archs)), "")


def cmake_spelling(values: Sequence[str], origin: str) -> Given:
    """CMake's arch spellings as tl_aot's: ``80-real`` is ``80``, ``80-virtual`` is ``80+PTX``; ``all``/``native`` refused.

    ``CMAKE_CUDA_ARCHITECTURES`` and ``add_tilelang_kernel(ARCHS ...)`` take these forms.
    """
    out = []
    for raw in values:
        a = str(raw).strip()
        if a in ("all", "all-major", "native"):
            msg = f"{origin}: arch {a!r} is not supported: name the archs, e.g. ARCHS 80 90a (or set {ENV_VAR})"
            raise SpecError(msg)
        if a.endswith("-real"):
            a = a.removesuffix("-real")
        elif a.endswith("-virtual"):
            a = a.removesuffix("-virtual") + "+PTX"
        out.append(a)
    return Given(origin, [a for a in out if a])


def _sources(level: Given | Sequence[Given] | None) -> tuple[Given, ...]:
    if level is None:
        return ()
    return (level,) if isinstance(level, Given) else tuple(level)
