"""KernelSpec: which function of which file to build, with which arguments, for which archs.

Specs come from the CLI (``kernels.py:matmul --arg M=4096``), a TOML/JSON spec file listing
several entries, ``TileLangExtension`` in setup.py, or CMake's ``add_tilelang_kernel``.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import json
import keyword
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .arch import Arch, parse_arch_list
from .cpp_spelling import CPP_RESERVED, cpp_macros, cpp_name, cpp_reserved
from .entry_keys import ENTRY_KEYS, create_keywords
from .errors import SpecError
from .keycheck import check_keys, expect, expect_str, expect_str_list, expect_table
from .values import from_spec_value

__all__ = [
    "KernelSpec",
    "LibrarySpec",
    "parse_target",
    "parse_arg",
    "check_identifier",
    "check_library_name",
    "check_entry_name",
    "CPP_RESERVED",
    "RESERVED_ENTRY_NAMES",
    "cpp_name",
    "load_spec_file",
    "archs_from_env",
    "BACKENDS",
    "check_backend",
]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Entry keys whose tables may spell values as ``{_expr_ = "..."}`` / ``{_target_ = "..."}``.
_VALUE_KEYS = frozenset({"args", "factory_args", "jit_args", "specialisations", "specializations"})
#: Names the library exports itself; an entry may not take them.
RESERVED_EXPORTS = frozenset({"cleanup_module", "tl_aot_manifest", "tl_aot_prepare"})
#: Names an entry may not take: the exports above, what :func:`tl_aot.load`'s Library defines
#: (``lib.cleanup``), what a wheel's generated loader module defines, and its torch helper module.
RESERVED_ENTRY_NAMES = RESERVED_EXPORTS | frozenset(
    """cleanup prepare path manifest entries signature specialisations register_torch_ops torch_companion LIBRARY_PATH
    _tl_aot_torch""".split()
)
#: Libraries a tl_aot library loads by file name (``lib<name>.so``): a library named after one would shadow it.
DEPENDENCY_LIBRARIES = frozenset("tvm_ffi tvm_ffi_testing cuda cudart nvrtc c m dl pthread rt gcc_s stdc util resolv".split())


def check_identifier(name: str, what: str) -> str:
    """Return ``name`` if it can name an entry or a parameter, else raise a clear :class:`SpecError`.

    Any Python identifier TileLang accepts is allowed, C++ keywords included (``new``, ``this``):
    generated C++ never spells a user name bare. Python keywords and ``__`` names are refused for
    entries, which become attributes of the generated Python loader.
    """
    if not isinstance(name, str) or not _IDENT.match(name):
        msg = f"{what} {name!r} is not a valid identifier: use letters, digits and '_' (not starting with a digit)"
        raise SpecError(msg)
    if name.startswith("__") or keyword.iskeyword(name):
        msg = f"{what} {name!r} is reserved in Python; choose another name"
        raise SpecError(msg)
    if len(name) > 120:
        msg = f"{what} {name!r} is longer than 120 characters"
        raise SpecError(msg)
    return name


def check_library_name(name: str, what: str = "library name") -> str:
    """A library name is also a C++ namespace (``tl_aot::<name>``) and a file name (``lib<name>.so``).

    C++ keywords and macros (it would not compile) and the file names of the libraries it loads
    (``tvm_ffi``: the dynamic loader would find it instead of theirs) are refused.
    """
    check_identifier(name, what)
    if cpp_reserved(name):
        kind = "a C/C++ macro of the headers the generated code includes" if name in cpp_macros() else "reserved in C++"
        msg = f"{what} {name!r} is {kind} (it names the C++ API's namespace); choose another name, e.g. {name.lower() + '_kernels'!r}"
        raise SpecError(msg)
    if name in DEPENDENCY_LIBRARIES or re.fullmatch(r"python\d*", name):
        msg = (
            f"{what} {name!r} would make lib{name}.so, the file name of a library tl_aot's libraries load: "
            f"the loader would find one in place of the other; choose another name, e.g. {name + '_kernels'!r}"
        )
        raise SpecError(msg)
    return name


def check_entry_name(name: str, library: str) -> str:
    """An entry's (exported) name must not be one tl_aot's loaders define for themselves."""
    if name in RESERVED_ENTRY_NAMES:
        msg = (
            f"library {library!r}: entry name {name!r} is reserved by tl_aot (the loaders define it: lib.{name}, "
            f"or the library exports it); rename the entry, e.g. {name.strip('_') + '_kernel'!r}"
        )
        raise SpecError(msg)
    return name


def parse_arg(text: str, flag: str = "--arg") -> tuple[str, object]:
    """Parse ``NAME=VALUE``: a Python literal, a bare word (a string), or an expression (:class:`~tl_aot.values.Expr`).

    ``M=4096``, ``dtype=float16``, ``dtype=torch.float16``, ``cfg=GemmConfig(block_m=128)``,
    ``eps=float('inf')``: expressions are evaluated in the kernel module when it is built.
    """
    from .values import parse_value_text

    if "=" not in text:
        msg = f"{flag} {text!r}: expected NAME=VALUE, e.g. M=4096 or dtype='float16'"
        raise SpecError(msg)
    name, _, raw = text.partition("=")
    name = name.strip()
    if not name.isidentifier():
        msg = f"{flag} {text!r}: {name!r} is not a Python identifier"
        raise SpecError(msg)
    return name, parse_value_text(raw, f"{flag} {text!r}")


def parse_pass_config(text: str) -> tuple[str, object]:
    """Parse ``--pass-config KEY=VALUE`` with a dotted TileLang key (``tl.disable_tma_lower``).

    ``true`` / ``false`` are booleans, as in a spec file; other values parse as ``--arg`` values.
    """
    from .values import parse_value_text

    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not all(part.isidentifier() for part in key.split(".")):
        msg = f"--pass-config {text!r}: expected KEY=VALUE with a TileLang pass config key, e.g. tl.disable_tma_lower=true"
        raise SpecError(msg)
    word = raw.strip().lower()
    if word in ("true", "false"):
        return key, word == "true"
    return key, parse_value_text(raw, f"--pass-config {text!r}")


def parse_target(text: str) -> tuple[Path, str]:
    """Split ``path/kernels.py:function`` into the file and the function name."""
    path, sep, func = str(text).rpartition(":")
    if not sep or not path or not func:
        msg = f"kernel {text!r}: expected FILE.py:FUNCTION, e.g. kernels.py:matmul"
        raise SpecError(msg)
    if not func.isidentifier():
        msg = f"kernel {text!r}: {func!r} is not a Python function name"
        raise SpecError(msg)
    return Path(path), func


def archs_from_env(default=None) -> tuple[Arch, ...] | None:
    """Archs from ``TL_AOT_ARCHS`` (``"80;90a"``), which overrides what the build asked for, else ``default``."""
    env = os.environ.get("TL_AOT_ARCHS", "").strip()
    if env:
        return parse_arch_list(env)
    return None if default is None else _as_archs(default)


def _as_archs(archs) -> tuple:
    """Archs given as Arch objects are kept; any spelling (list or "80;90a" string) is parsed."""
    if archs and isinstance(archs, (list, tuple)) and all(isinstance(a, Arch) for a in archs):
        return tuple(archs)
    return parse_arch_list(archs or ())


@dataclass(frozen=True)
class KernelSpec:
    """One entry of a library: ``function(**args)`` from ``source``, built for ``archs``, exported as ``name``."""

    name: str
    source: Path
    function: str
    args: tuple = ()  # (name, value) pairs, in the order given
    archs: tuple = ()  # Arch
    pass_configs: tuple = ()  # extra TileLang pass configs as (key, value) pairs
    compile_flags: tuple = ()  # extra nvcc flags
    device: str = ""  # GPU profile answering device queries while lowering (tl_aot.device); "" = per-arch default
    out_idx: tuple | None = None  # outputs (indices, negative from the end, or names); None: the kernel's own out_idx
    export: str = ""  # the exported function this is one specialisation of ("": the entry is exported as itself)
    when: tuple = ()  # (symbol, lo, hi): dynamic dims this specialisation covers (inclusive)
    fallback: bool = False  # tried after every other specialisation of its export
    tune: tuple = ()  # candidate configs ((name, value) pairs each) of a plain factory, for python -m tl_aot tune
    tuned: tuple = ()  # (arch, ((name, repr), ...), note) from a tuning record: the config built per arch
    factory_args: tuple = ()  # (name, value): only for the function named (level 0), never routed further
    jit_args: tuple = ()  # (name, value): only for the @tilelang.jit function the factory returns
    select: str = ""  # which kernel, when the factory gives several (a tuple index or dict key)
    imports: tuple = ()  # modules imported before the kernel file (registries they fill)
    capture: tuple = ()  # (record path, key, jit function, its args, proof): a kernel from a capture record, lowered from its IR
    backend: str = ""  # "cuda" (CUDA C++ through nvcc), "cutedsl" (TileLang's CuTeDSL backend); "": as the kernel file asks

    def __post_init__(self) -> None:
        if self.export:  # a specialisation: '<export>__s<i>' (no user name holds '__')
            check_identifier(self.export, "entry name")
        else:
            check_identifier(self.name, "entry name")
        if not isinstance(self.function, str) or not self.function.isidentifier() or keyword.iskeyword(self.function):
            msg = f"entry {self.name!r}: function {self.function!r} is not a Python function name"
            raise SpecError(msg)
        if not self.archs:
            msg = f"entry {self.name!r}: no arch given"
            raise SpecError(msg)

    @property
    def kwargs(self) -> dict:
        return dict(self.args)

    def tuned_config(self, arch: str) -> tuple[dict, str] | None:
        """The recorded config for ``arch`` (``sm_90a``) and where it came from, if a tuning record has one."""
        for a, chosen, note in self.tuned:
            if a == arch:
                return {k: ast.literal_eval(v) for k, v in chosen}, note
        return None

    @property
    def exported(self) -> str:
        """The library function this spec is called through."""
        return self.export or self.name

    def keywords(self) -> dict:
        """The :meth:`create` keywords that make this spec again: every key an entry declares (archs included).

        ``export``, ``when`` and ``fallback`` (a specialisation's), ``tuned`` (from a tuning record) and
        ``capture`` (from a capture record) are not declared by an entry's keys.
        """
        return {
            "name": self.name,
            "source": self.source,
            "function": self.function,
            "args": dict(self.args),
            "factory_args": dict(self.factory_args),
            "jit_args": dict(self.jit_args),
            "select": self.select or None,
            "imports": list(self.imports) or None,
            "archs": self.archs,
            "pass_configs": dict(self.pass_configs),
            "compile_flags": list(self.compile_flags),
            "device": self.device or None,
            "out_idx": self.out_idx,
            "tune": [dict(c) for c in self.tune] or None,
            "backend": self.backend or None,
        }

    @classmethod
    def create(
        cls,
        *,
        name,
        source,
        function,
        args=None,
        archs,
        pass_configs=None,
        compile_flags=None,
        device=None,
        out_idx=None,
        specialisations=None,
        tune=None,
        factory_args=None,
        jit_args=None,
        select=None,
        imports=None,
        backend=None,
    ):
        """Build a spec from loose user values (dicts, arch strings), validating each.

        With ``specialisations`` (a list of ``{"args": {...}, "when": {...}, "fallback": bool}``)
        the result is a tuple of specs, one per specialisation, all exported as ``name``: their
        ``args`` update the shared ``args``. Without, a single :class:`KernelSpec`.
        """
        levels = _check_levels(name, factory_args, jit_args, select, imports)
        if specialisations is not None:
            made = _specialised(name, source, function, args, archs, pass_configs, compile_flags, device, out_idx, specialisations, levels)
            shared = check_backend(backend, f"entry {name!r}")
            return tuple(dataclasses.replace(m, tune=_check_tune(tune, name), backend=m.backend or shared) for m in made)
        args = _check_args(args, name, "args")
        check_identifier(name, "entry name")
        source, pass_configs, compile_flags = _check_loose(name, source, pass_configs, compile_flags)
        try:
            parsed_archs = _as_archs(archs)
        except SpecError as e:
            msg = f"entry {name!r} ({source}): {e}"
            raise SpecError(msg) from None
        return cls(
            name=name,
            source=Path(source),
            function=function,
            args=tuple(args or ()),
            archs=parsed_archs,
            pass_configs=tuple(sorted((pass_configs or {}).items())),
            compile_flags=tuple(compile_flags or ()),
            device=_check_device(device, parsed_archs, name),
            out_idx=check_out_idx(out_idx, name),
            tune=_check_tune(tune, name),
            backend=check_backend(backend, f"entry {name!r}"),
            **levels,
        )


def _check_loose(entry: str, source, pass_configs, compile_flags) -> tuple:
    """``source``, ``pass_configs`` and ``compile_flags`` of entry ``entry`` checked for type (they came from a file or setup.py)."""
    where = f"entry {entry!r}"
    if not isinstance(source, (str, os.PathLike)):
        expect_str(source, "source", where, '"kernels.py"')
    pass_configs = expect_table(pass_configs or {}, "pass_configs", where, '{"tl.disable_tma_lower" = true}')
    flags = expect_str_list(compile_flags or (), "compile_flags", where, '["-lineinfo"]')
    return source, pass_configs, flags


#: The code generators an entry may be built with: TileLang's CUDA C++ (the default) or its CuTeDSL backend.
BACKENDS = ("cuda", "cutedsl")


def check_backend(backend, where: str) -> str:
    """``backend`` validated: "cuda", "cutedsl", or "" (None) for what the kernel file asks (CUDA C++ by default)."""
    if backend is None or backend == "":
        return ""
    if backend not in BACKENDS:
        msg = f"{where}: backend {backend!r} is not one of {', '.join(map(repr, BACKENDS))}"
        raise SpecError(msg)
    return backend


def _check_args(args, entry: str, key: str) -> tuple:
    """An args table (dict or pairs) as (name, value) pairs with identifier names and spellable values."""
    from .values import as_spec_value, spell

    if args is None:
        return ()
    if isinstance(args, dict):
        args = tuple(args.items())
    if not isinstance(args, (tuple, list)) or not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in args):
        msg = f"entry {entry!r}: {key} must be a table of NAME = VALUE, got {type(args).__name__}"
        raise SpecError(msg)
    for k, v in args:
        if not isinstance(k, str) or not k.isidentifier():
            msg = f"entry {entry!r}: {key} name {k!r} is not a Python identifier"
            raise SpecError(msg)
        try:
            spell(v)
        except SpecError as e:
            msg = f"entry {entry!r}: {key}.{k}: {e}"
            raise SpecError(msg) from None
    return tuple((k, as_spec_value(v)) for k, v in args)


def _check_levels(entry: str, factory_args, jit_args, select, imports) -> dict:
    """The per-level keys of an entry (``factory_args``, ``jit_args``, ``select``, ``imports``), validated."""
    if select is not None and not isinstance(select, (str, int)) or isinstance(select, bool):
        msg = f"entry {entry!r}: select must be a kernel's key or index, got {select!r}"
        raise SpecError(msg)
    if imports is not None and (not isinstance(imports, (list, tuple)) or not all(isinstance(m, str) and m for m in imports)):
        msg = f'entry {entry!r}: imports must be a list of module names, e.g. ["mypkg.ops"]'
        raise SpecError(msg)
    for m in imports or ():
        if not all(part.isidentifier() for part in m.split(".")):
            msg = f"entry {entry!r}: imports names {m!r}, which is not a module name"
            raise SpecError(msg)
    return {
        "factory_args": _check_args(factory_args, entry, "factory_args"),
        "jit_args": _check_args(jit_args, entry, "jit_args"),
        "select": "" if select is None else str(select),
        "imports": tuple(imports or ()),
    }


def _check_tune(tune, entry: str) -> tuple:
    """A spec's ``tune`` table (candidate configs of a plain factory) as a tuple of (name, value) tuples."""
    if tune is None:
        return ()
    if not isinstance(tune, (list, tuple)) or not tune or not all(isinstance(c, dict) and c for c in tune):
        msg = f"entry {entry!r}: tune must be a non-empty list of configs, e.g. [{{block_M = 64}}, {{block_M = 128}}]"
        raise SpecError(msg)
    return tuple(tuple(c.items()) for c in tune)


_SPECIALISATION_KEYS = frozenset({"args", "when", "fallback", "factory_args", "jit_args", "backend"})


def _specialised(name, source, function, args, archs, pass_configs, compile_flags, device, out_idx, items, levels) -> tuple:
    """One :class:`KernelSpec` per specialisation of entry ``name``, exported under that one name."""
    check_identifier(name, "entry name")
    if isinstance(items, dict) or not isinstance(items, (list, tuple)) or not items:
        msg = f"entry {name!r}: specialisations must be a non-empty list of tables ({{args = {{...}}, when = {{...}}, fallback = true}})"
        raise SpecError(msg)
    if len(items) > 64:
        msg = f"entry {name!r}: {len(items)} specialisations; at most 64 per entry"
        raise SpecError(msg)
    base = dict(args.items() if isinstance(args, dict) else (args or ()))
    out = []
    for i, item in enumerate(items):
        where = f"entry {name!r}: specialisation #{i + 1}"
        if not isinstance(item, dict) or set(item) - _SPECIALISATION_KEYS:
            extra = sorted(set(item) - _SPECIALISATION_KEYS) if isinstance(item, dict) else [type(item).__name__]
            msg = f"{where}: expected a table with args, factory_args, jit_args, backend, when, fallback; got {', '.join(map(str, extra))}"
            raise SpecError(msg)
        own = item.get("args") or {}
        if not isinstance(own, dict):
            msg = f"{where}: args must be a table"
            raise SpecError(msg)
        own_levels = {key: {**dict(levels[key]), **dict(_check_args(item.get(key), name, key))} for key in ("factory_args", "jit_args")}
        spec = KernelSpec.create(
            name=f"{name}__s{i}",
            source=source,
            function=function,
            args={**base, **own},
            archs=archs,
            pass_configs=pass_configs,
            compile_flags=compile_flags,
            device=device,
            out_idx=out_idx,
            select=levels["select"] or None,
            imports=levels["imports"],
            backend=check_backend(item.get("backend"), where) or None,
            **own_levels,
        )
        fallback = item.get("fallback", False)
        if not isinstance(fallback, bool):
            msg = f"{where}: fallback must be true or false"
            raise SpecError(msg)
        out.append(dataclasses.replace(spec, export=name, when=_check_when(item.get("when"), where), fallback=fallback))
    return tuple(out)


def _check_when(when, where: str) -> tuple:
    """``{m = [1, 64], n = 128}`` → ``(("m", 1, 64), ("n", 128, 128))``: the dynamic dims a specialisation covers."""
    if when is None:
        return ()
    if not isinstance(when, dict):
        msg = f"{where}: when must be a table of dynamic dim names to a value or a [lo, hi] range"
        raise SpecError(msg)
    out = []
    for sym, rng in sorted(when.items()):
        if isinstance(rng, (list, tuple)) and len(rng) == 2:
            lo, hi = rng
        else:
            lo = hi = rng
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi)) or not 1 <= lo <= hi:
            msg = f"{where}: when.{sym} = {rng!r}: expected a positive int or a [lo, hi] range with 1 <= lo <= hi"
            raise SpecError(msg)
        out.append((str(sym), lo, hi))
    return tuple(out)


def check_out_idx(out_idx, entry: str) -> tuple | None:
    """``out_idx`` as given (an int, a name, or a list of them; ``[]`` means no outputs), validated in form only."""
    if out_idx is None:
        return None
    items = [out_idx] if isinstance(out_idx, (int, str)) else out_idx
    try:
        items = list(items)
    except TypeError:
        items = [None]
    for it in items:
        if isinstance(it, bool) or not isinstance(it, (int, str)) or (isinstance(it, str) and not it.isidentifier()):
            msg = f"entry {entry!r}: out_idx {out_idx!r} must be parameter indices (negative from the end) or names"
            raise SpecError(msg)
    if len(set(items)) != len(items):
        msg = f"entry {entry!r}: out_idx {out_idx!r} names a parameter twice"
        raise SpecError(msg)
    return tuple(items)


def _check_device(device, archs, entry: str) -> str:
    """``device`` (a profile name) validated against the archs it will answer for."""
    if not device:
        return ""
    from .device import find_profile

    try:
        find_profile(str(device))  # a name no profile has
    except SpecError as e:
        msg = f"entry {entry!r}: {e}"
        raise SpecError(msg, entry=entry) from None
    fits = []
    for arch in archs:
        with contextlib.suppress(SpecError):  # a known device of another arch
            fits.append(find_profile(str(device), arch).name)
    if not fits:
        msg = f"entry {entry!r}: device {device!r} fits none of its archs ({', '.join(str(a) for a in archs)})"
        raise SpecError(msg, entry=entry)
    return fits[0]


@dataclass(frozen=True)
class LibrarySpec:
    """A shared library to build: its name, its entries, and whether it gets native torch ops (a companion)."""

    name: str
    entries: tuple = field(default=())
    torch_ops: bool = False  # also build lib<name>_torch.so: the entries as native torch operators

    @property
    def exports(self) -> tuple:
        """The library's function names, in order (specialisations of one entry share one)."""
        return tuple(dict.fromkeys(e.exported for e in self.entries))

    def __post_init__(self) -> None:
        check_library_name(self.name)
        seen = set()
        exports: dict[str, bool] = {}  # exported name -> is it specialised
        for e in self.entries:
            check_entry_name(e.exported, self.name)
            if e.name in seen or (e.exported in exports and not (e.export and exports[e.exported])):
                msg = f"library {self.name!r}: entry {e.exported!r} is listed twice"
                raise SpecError(msg)
            seen.add(e.name)
            exports[e.exported] = bool(e.export)
        if not self.entries:
            msg = f"library {self.name!r} has no entries"
            raise SpecError(msg)


def load_spec_file(path: str | os.PathLike, *, archs=None, name: str | None = None, device: str | None = None) -> LibrarySpec:
    """Read a TOML or JSON spec file listing entries (paths in it are relative to the file).

    ``[library] name / archs`` set defaults; each ``[[entry]]`` has ``name``, ``source``,
    ``function``, optional ``args`` (a table), ``archs``, ``pass_configs``, ``compile_flags`` and
    ``device`` (the GPU profile device queries see while lowering; also a ``[library]`` default).
    ``archs`` (from the command line) and ``TL_AOT_ARCHS`` override the file, as ``device`` does.
    ``[library] torch_ops = true`` also builds the native torch companion (:mod:`tl_aot.torch_native`).
    """
    path = Path(path)
    data = _read_spec_data(path)
    lib, entries_data, captures = _spec_tables(path, data)
    if not entries_data and not captures:
        msg = f"{path}: no [[entry]] tables (and no [library] capture records)"
        raise SpecError(msg)
    lib_archs = parse_arch_list(archs) if archs else archs_from_env(None)  # an explicit --arch beats TL_AOT_ARCHS
    entries = []
    for i, ed in enumerate(entries_data):
        entries.extend(_spec_entry(path, i, ed, lib, lib_archs, device))
    if captures:
        from .captured import specs_from_record

        c_archs = lib_archs or lib.get("archs")
        if not c_archs:
            msg = f"{path}: [library] capture needs archs ([library] archs, --arch or TL_AOT_ARCHS)"
            raise SpecError(msg)
        for record in captures:
            entries.extend(specs_from_record(path.parent / str(record), c_archs, device=device or lib.get("device", "")))
    torch_ops = lib.get("torch_ops", False)
    if not isinstance(torch_ops, bool):
        msg = f"{path}: [library] torch_ops must be true or false, got {torch_ops!r}"
        raise SpecError(msg)
    return LibrarySpec(name=name or lib.get("name") or path.stem, entries=tuple(entries), torch_ops=torch_ops)


#: Keys of a spec file's top level and of its ``[library]`` table.
TOP_KEYS = ("library", "entry", "entries")
LIBRARY_KEYS = ("name", "archs", "device", "capture", "torch_ops")


def _spec_tables(path: Path, data) -> tuple:
    """The ``[library]`` table, the entry tables and the capture records of a spec file, each checked for type and keys."""
    if not isinstance(data, dict):
        msg = f"{path}: the top level must be a table holding [library] and [[entry]] tables, got {type(data).__name__}"
        raise SpecError(msg)
    check_keys(data, TOP_KEYS, str(path))
    lib = expect_table(data.get("library", {}), "[library]", str(path), '[library] name = "mylib"')
    check_keys(lib, LIBRARY_KEYS, f"{path}: [library]")
    where = f"{path}: [library]"
    if "name" in lib:
        expect_str(lib["name"], "name", where, '"mylib"')
    if "archs" in lib:
        lib = {**lib, "archs": archs_at(lib["archs"], where)}
    if lib.get("device") is not None:
        expect_str(lib["device"], "device", where, '"H100-SXM"')
    captures = expect_str_list(lib.get("capture", ()), "capture", where, '["ops.capture.json"]')
    key = "entries" if "entries" in data and "entry" not in data else "entry"
    entries = data.get(key, [])
    if isinstance(entries, dict):
        entries = [entries]
    expect(entries, list, f"[[{key}]]", str(path), "a list of tables ([[entry]] blocks)")
    for i, ed in enumerate(entries):
        expect_table(ed, "each entry", f"{path}: entry #{i + 1}", '{name = "add", source = "k.py", function = "add"}')
    return lib, entries, captures


def archs_at(value, where: str) -> tuple:
    """Archs parsed now, so a wrong type names where they were given (a file and key, a setup.py argument)."""
    try:
        return parse_arch_list(value)
    except SpecError as e:
        msg = f"{where}: {e}"
        raise SpecError(msg) from None


def _read_spec_data(path: Path) -> dict:
    """The spec file's tables (TOML, or JSON for a ``.json`` file); errors name the file."""
    try:
        text = path.read_text()
    except OSError as e:
        msg = f"cannot read spec file {path}: {e.strerror}"
        raise SpecError(msg) from None
    try:
        if path.suffix == ".json":
            return json.loads(text)
        import tomllib

        return tomllib.loads(text)
    except ValueError as e:  # JSONDecodeError and TOMLDecodeError are ValueErrors
        msg = f"{path}: not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {e}"
        raise SpecError(msg) from None


def _spec_entry(path: Path, i: int, ed: dict, lib: dict, lib_archs, device) -> tuple:
    """The KernelSpec(s) of entry table #``i`` (several for a table with specialisations)."""
    where = f"{path}: entry #{i + 1}"
    check_keys(ed, ENTRY_KEYS, where + (f" ({ed['name']})" if isinstance(ed.get("name"), str) else ""))
    missing = [k for k in ("name", "source", "function") if k not in ed]
    if missing:
        msg = f"{where}: missing key(s) {', '.join(missing)}"
        raise SpecError(msg)
    where = f"{where} ({ed['name']})"
    expect_str(ed["source"], "source", where, '"kernels.py"')
    e_archs = lib_archs or (archs_at(ed["archs"], where) if "archs" in ed else None) or lib.get("archs")
    if not e_archs:
        msg = f"{where}: no archs (set [library] archs, the entry's archs, --arch or TL_AOT_ARCHS)"
        raise SpecError(msg)
    try:
        ed = {k: (from_spec_value(v, k) if k in _VALUE_KEYS else v) for k, v in ed.items()}
        given = create_keywords(ed)
        given["source"] = path.parent / ed["source"]  # relative to the spec file
        given["archs"] = e_archs  # --arch and TL_AOT_ARCHS override the entry's, which overrides [library]
        given["device"] = device or ed.get("device", lib.get("device"))
        made = KernelSpec.create(**given)
    except SpecError as e:
        msg = f"{where}: {e}"
        raise SpecError(msg) from None
    return made if isinstance(made, tuple) else (made,)
