"""Render the generated files (launcher, C++ header, manifest unit, Python loader) from ``tl_aot/templates/*.j2``.

Templates substitute and loop; what they substitute for the launcher and header, with every
decision and C++ spelling, is built by :mod:`tl_aot.codegen.launcher_context` (C++ spelling of values: :mod:`tl_aot.common.cpp_spelling`).
User text reaches every template spelled by :mod:`tl_aot.common.escaping`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from dataclasses import dataclass
from typing import Any

from ..common.arch import parse_arch
from ..common.cpp_spelling import DLPACK_DTYPES, c_comment, c_string_body, image_symbol
from ..common.escaping import py_comment, py_doc_line, py_str
from ..common.manifest_index import index_text
from ..common.metadata import ABI_VERSION, Manifest
from ..common.metadata_json import ManifestJson, manifest_json
from . import launcher_units
from .launcher_context import LibraryCode, library_code, units_of

__all__ = [
    "render_launcher",
    "render_launcher_units",
    "render_launcher_sources",
    "LauncherUnit",
    "render_manifest",
    "render_header",
    "render_loader",
    "image_symbol",
    "c_comment",
    "c_string_body",
    "DLPACK_DTYPES",
]


@functools.lru_cache(maxsize=1)
def _env():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("tl_aot.codegen", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def _raw_string(text: str) -> tuple[str, str]:
    """``text`` and a delimiter that lets it sit verbatim in a C++ raw string literal."""
    delim = "tlaot"
    while f'){delim}"' in text:
        delim += "x"
    return text, delim


def _fields(obj: Any) -> dict[str, Any]:
    """A dataclass's fields as template variables (one level: nested pieces stay typed)."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def render_launcher(manifest: Manifest, *, header_name: str) -> str:
    """The launcher of every entry of ``manifest`` as one translation unit (what a small library compiles)."""
    return render_launcher_units(manifest, header_name=header_name, target=0)[0]


@dataclass(frozen=True)
class LauncherUnit:
    """One translation unit of a launcher: its C++ and the header it includes, by name and text.

    The library-wide unit (and a launcher of one unit) includes the library's header; every other
    unit a header of its own exports' declarations (``<lib>.unit<k>.h``), the very blocks the
    library's header holds for them. A unit's object is keyed by these two texts
    (:mod:`tl_aot.cuda.host_objects`), so a change to one entry's signature, or an entry added,
    recompiles its unit and the library-wide one, never every unit of the library.
    """

    text: str
    header_name: str
    header_text: str


def render_launcher_units(
    manifest: Manifest, *, header_name: str, target: int | None = None, code: LibraryCode | None = None
) -> tuple[str, ...]:
    """The launcher's translation units' C++ (:func:`render_launcher_sources` without their headers)."""
    return tuple(u.text for u in render_launcher_sources(manifest, header_name=header_name, target=target, code=code))


def render_launcher_sources(
    manifest: Manifest, *, header_name: str, target: int | None = None, code: LibraryCode | None = None
) -> tuple[LauncherUnit, ...]:
    """The launcher's translation units: the one that defines the library first, then those of the entries.

    One unit (the text of :func:`render_launcher`) for a library under one and a half units' worth
    (:mod:`tl_aot.codegen.launcher_units`), else the library-wide unit (entry table, library
    exports) and one unit per cut of whole exports, compiled apart and linked together, each
    including a header of its own exports (:class:`LauncherUnit`).
    ``target``: the weight a unit holds (0: never cut; default
    :data:`~tl_aot.codegen.launcher_units.UNIT_WEIGHT`). ``code``: ``manifest``'s
    :func:`~tl_aot.codegen.launcher_context.library_code` when the caller has it already.
    """
    code = code or library_code(manifest, header_name)
    target = launcher_units.UNIT_WEIGHT if target is None else target
    plans = launcher_units.unit_plans(manifest, target) if target else ()
    template = _env().get_template("launcher.cc.j2")
    header = _env().get_template("launcher.h.j2")
    whole = header.render(**_fields(code))
    stem = header_name.removesuffix(".h")
    made = []
    for k, unit in enumerate(units_of(code, plans)):
        if unit.defines_library:
            name, text = header_name, whole
        else:  # its own exports' declarations: the same blocks as the library's header, rendered by the same template
            name = f"{stem}.unit{k}.h"
            text = header.render(**{**_fields(code), "exports": unit.exports, "sources": unit.sources, "archs": unit.archs})
        made.append(LauncherUnit(template.render({**_fields(code), **_fields(unit), "header_name": name}), name, text))
    return tuple(made)


def render_manifest(manifest: Manifest, *, spelled: ManifestJson | None = None) -> str:
    """The manifest translation unit: the JSON of ``manifest`` as the launcher's ``tl_aot_manifest_json``, and its index.

    Kept apart from the launcher, whose text never depends on image sizes: the launcher can be
    rendered and compiled as soon as lowering is done, the manifest only once nvcc is. The index
    (:mod:`tl_aot.common.manifest_index`) is what loading reads; its digest is the one the ELF
    section carries. ``spelled``: the manifest's JSON when the caller has it
    (:func:`~tl_aot.common.metadata_json.manifest_json`: the link stage spells a whole library's once).
    """
    spelled = spelled or manifest_json(manifest)
    json_text = spelled.text
    index = index_text(manifest, json_text, spelled.entries)
    left_out = left_out_lines(manifest)
    _, delim = _raw_string(json_text + index + left_out)
    return (
        _env()
        .get_template("manifest.cc.j2")
        .render(
            lib=manifest.library,
            entries=[e.name for e in manifest.entries],
            abi_version=ABI_VERSION,
            tl_aot_version=manifest.tl_aot_version,
            manifest_json=json_text,
            index_json=index,
            left_out=left_out,
            manifest_delim=delim,
            index_sha256=hashlib.sha256(index.encode()).hexdigest(),
        )
    )


def left_out_lines(manifest: Manifest) -> str:
    r"""The variants a ``--keep-going`` build left out, as the runtime reads them: ``<entry>\t<arch>\t<error>\n`` each.

    The arch is spelled as a pack's label and ``tl_aot_check_images`` take it (``sm_80``,
    ``sm_80_ptx``); tabs and line breaks inside a field become spaces, so each variant is one line.
    A call on a GPU that only a left-out variant would fit says why there is no image
    (``src/modules.cc``), rather than to rebuild for an arch the build was given.
    """

    def field(text: str) -> str:
        return " ".join(text.replace("\t", " ").splitlines())

    lines = []
    for lo in manifest.left_out:
        arch = parse_arch(lo.arch)
        lines.append(f"{field(lo.entry)}\t{arch.sm + ('_ptx' if arch.ptx else '')}\t{field(lo.error)}\n")
    return "".join(lines)


def render_header(manifest: Manifest, *, code: LibraryCode | None = None) -> str:
    """The C++ API header (``<lib>.h``) matching :func:`render_launcher` (``code``: as :func:`render_launcher_units` takes it)."""
    return _env().get_template("launcher.h.j2").render(**_fields(code or library_code(manifest, f"{manifest.library}.h")))


#: The package shipped next to a generated loader: a copy of :mod:`tl_aot.runtime.torch_ops` (its ``__init__.py``) and
#: :mod:`tl_aot.runtime.torch_fakes`.
TORCH_GLUE_MODULE = "_tl_aot_torch"


def render_loader(manifest: Manifest, *, module: str, library_file: str, torch_ops: bool | str = False) -> str:
    """A pure-Python module that loads ``library_file`` from its own folder and exposes each entry.

    ``module`` is the dotted name it is imported as (``tl_gemm._kernels``). The module needs only
    ``tvm_ffi`` (not tl_aot), so a package shipping it depends on apache-tvm-ffi alone; its
    ``register_torch_ops()`` uses the copy of :mod:`tl_aot.runtime.torch_ops` placed beside it
    (the package ``_tl_aot_torch``). ``torch_ops`` (True or a namespace) registers them on import when
    torch is installed; the default namespace is the package's name.
    """
    package = module.rpartition(".")[0] or module
    namespace = torch_ops if isinstance(torch_ops, str) else package.replace(".", "_").lstrip("_") or manifest.library.lstrip("_")
    glue = f"from . import {TORCH_GLUE_MODULE}" if "." in module else f"import {TORCH_GLUE_MODULE}"

    entries = []
    for name, ms in manifest.exports().items():
        raw = f"__tl_aot_module[{py_str(name)}]"
        several = len(ms[0].outputs) > 1  # returned as a tuple, like the JIT's list, not a tvm_ffi.Array
        entries.append(
            {
                "name": name,
                "name_repr": py_str(name),
                "signatures": [py_doc_line(m.signature()) for m in ms],
                "tuple": several,
                "function": f"__tl_aot_tuple({raw})" if several else raw,
                "tensorless": bool(ms[0].outputs) and not any(p.is_tensor for p in ms[0].inputs),
            }
        )
    archs = sorted({py_comment(str(v.arch)) for e in manifest.entries for v in e.variants})
    companion_file = library_file.removesuffix(".so") + "_torch.so"  # as tl_aot.codegen.torch_native.companion_path names it
    return (
        _env()
        .get_template("loader.py.j2")
        .render(
            package=py_doc_line(package),
            library_file=py_comment(library_file),
            library_file_repr=py_str(library_file),
            missing_tvm_ffi_msg=py_str(f"{module} needs apache-tvm-ffi: pip install apache-tvm-ffi"),
            entries=entries,
            any_tuple=any(e["tuple"] for e in entries),
            any_tensorless=any(e["tensorless"] for e in entries),
            namespace_repr=py_str(namespace),
            torch_glue_import=glue,
            companion_file=py_doc_line(companion_file),
            companion_file_repr=py_str(companion_file),
            torch_ops=bool(torch_ops),
            archs=archs,
            sources=sorted({py_comment(e.source) for e in manifest.entries}),
            tl_aot_version=py_comment(manifest.tl_aot_version),
            tilelang_version=py_comment(manifest.tilelang_version),
            nvcc_version=py_comment(manifest.nvcc_version),
        )
    )
