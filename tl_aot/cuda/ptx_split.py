"""One variant's kernels out of a PTX module that holds several, in a form that does not depend on the others.

A batch of variants is compiled to PTX in one nvcc run (:mod:`tl_aot.nvcc_batch`): the CUDA/CuTe
headers every TileLang kernel includes are parsed once instead of once per variant. Each variant's
image is then made by ptxas from *its* PTX alone: its ``.entry`` functions, the module-scope
declarations they use, and the ``.file`` / ``.debug_str`` records their line info names,
renumbered in order of first use. The same variant compiled alone goes through the same
function, so its PTX, and so its image, is byte-identical whatever it was batched with.

A variant whose kernels use a module-scope *definition* (a ``.func`` left out of line, a
``.global`` / ``.const`` such as a ``printf`` string) is not split: such names are numbered or
hashed per module, and the caller compiles it alone instead.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

__all__ = ["Split", "split_variant", "split_variants", "kernel_prefix", "entry_names"]

_HEADER = re.compile(r"^\s*\.(version|target|address_size)\b")
_FILE = re.compile(r"^\s*\.file\s+(\d+)\s+(.*)$")
_NAME_CALLABLE = re.compile(r"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)")
_TOKEN = re.compile(r"[A-Za-z_$][\w$]*")
_LOC = re.compile(r"(\.loc\s+|inlined_at\s+)(\d+)")
_INFO = re.compile(r"\$L__info_string(\d+)\b")
_INTERNAL = re.compile(r"(\d+)(_INTERNAL_[0-9a-f]+_)")
_BLOCK = re.compile(r"\$L__BB(\d+)_")


def kernel_prefix(index: int) -> str:
    """The prefix a batch gives the kernels of its ``index``-th variant so that names cannot collide."""
    return f"tl_aot_b{index}_"


def entry_names(ptx: str) -> list[str]:
    """The names of the module's ``.entry`` functions (its kernels), in order."""
    return [it.name for it in _items(ptx)[1] if it.entry]


@dataclass(frozen=True)
class Split:
    """A variant's PTX (``text``), or why it cannot be split out of its module (``problem``, text empty)."""

    text: str = ""
    problem: str = ""


@dataclass(frozen=True)
class _Item:
    name: str
    text: str
    entry: bool
    extern: bool


def _items(ptx: str) -> tuple[list[str], list[_Item], dict[str, str], dict[str, str], list[str]]:
    """(header lines, top-level items, .file number -> rest, debug string label -> data, unknown sections)."""
    header: list[str] = []
    items: list[_Item] = []
    files: dict[str, str] = {}
    strings: dict[str, str] = {}
    unknown: list[str] = []
    lines = ptx.split("\n")
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        s = line.strip()
        if not s or s.startswith("//"):
            i += 1
            continue
        if _HEADER.match(line):
            header.append(s)
            i += 1
            continue
        m = _FILE.match(line)
        if m:
            files[m.group(1)] = m.group(2)
            i += 1
            continue
        if s.startswith(".section"):
            i = _section(lines, i, s, strings, unknown)
            continue
        chunk, depth, opened = [], 0, False
        while i < n:
            chunk.append(lines[i])
            depth += lines[i].count("{") - lines[i].count("}")
            opened = opened or "{" in lines[i]
            t = lines[i].strip()
            i += 1
            if (opened and depth == 0) or (not opened and t.endswith(";")):
                break
        items.append(_item("\n".join(chunk)))
    return header, items, files, strings, unknown


def _section(lines: list[str], i: int, s: str, strings: dict[str, str], unknown: list[str]) -> int:
    """Read the ``.section`` starting at line ``i`` (its ``.debug_str`` labels into ``strings``); the line after it."""
    name = s.split()[1] if len(s.split()) > 1 else ""
    depth, label, j = 0, None, i
    while j < len(lines):
        t = lines[j].strip()
        depth += t.count("{") - t.count("}")
        j += 1
        if name == ".debug_str" and t.endswith(":") and t.startswith("$L__info_string"):
            label = t[:-1]
            strings[label] = ""
        elif name == ".debug_str" and label and t and t not in ("{", "}"):
            strings[label] += t + "\n"
        if depth == 0 and "}" in t:
            break
    if name != ".debug_str":
        unknown.append(name)
    return j


def _item(text: str) -> _Item:
    first = text.lstrip().split("\n", 1)[0]
    m = _NAME_CALLABLE.search(text)
    if m and (".entry" in first or ".func" in first):
        name = m.group(1)
    else:
        decl = text.split("=", 1)[0].rstrip().rstrip(";").rstrip()
        decl = re.sub(r"\[[^\]]*\]\s*$", "", decl)
        tokens = _TOKEN.findall(decl)
        name = tokens[-1] if tokens else ""
    words = first.split()
    return _Item(name, text, ".entry" in words, ".extern" in words or (".func" in words and "{" not in text))


def split_variant(ptx: str, prefix: str = "") -> Split:
    """The PTX of the entries whose names start with ``prefix`` (every entry for ``""``), with ``prefix`` removed.

    Only the entries named, the declarations they reach and the line-info records they name are
    kept, renumbered in order of first use; comments are dropped. ``problem`` says why not where
    the kernels use a module-scope definition or the module has sections other than ``.debug_str``.
    """
    return split_variants(ptx, [prefix])[0]


def split_variants(ptx: str, prefixes: list[str]) -> list[Split]:
    """:func:`split_variant` of ``ptx`` for each of ``prefixes``, the module read once.

    A batch's PTX holds every variant of the batch: reading it once for all of them keeps the split
    linear in the batch, where one :func:`split_variant` per variant reads it whole each time.
    """
    header, items, files, strings, unknown = _items(ptx)
    module = _Module(header, items, {it.name: it for it in items if it.name}, files, strings, unknown)
    return [_split(module, prefix) for prefix in prefixes]


@dataclass(frozen=True)
class _Module:
    """A PTX module as :func:`_items` reads it."""

    header: list[str]
    items: list[_Item]
    by_name: dict[str, _Item]
    files: dict[str, str]
    strings: dict[str, str]
    unknown: list[str]


def _split(module: _Module, prefix: str) -> Split:
    """One prefix's :func:`split_variant` of an already read module."""
    header, items, files, strings, unknown = module.header, module.items, module.files, module.strings, module.unknown
    if unknown:
        return Split(problem=f"PTX sections {', '.join(unknown)}")
    entries = [it for it in items if it.entry and it.name.startswith(prefix)]
    if not entries:
        return Split(problem=f"no kernel named {prefix}... in the PTX")
    by_name = module.by_name
    kernels = [it.name[len(prefix) :] for it in entries]
    keep = {it.name for it in entries}
    todo = [it.text for it in entries]
    while todo:
        for tok in set(_TOKEN.findall(todo.pop())):
            it = by_name.get(tok)
            if it is not None and tok not in keep:
                if it.entry or not it.extern:
                    return Split(problem=f"the kernels use the module-scope {tok}")
                keep.add(tok)
                todo.append(it.text)
    body = "\n\n".join(it.text for it in items if it.name in keep)
    body, file_lines = _renumber_files(body, files)
    body, string_lines = _renumber_strings(body, strings)
    body = _renumber_blocks(_unprefix(body, prefix, kernels))
    out = [*header, "", body, "", *file_lines]
    if string_lines:
        out += ["", "\t.section\t.debug_str", "\t{", *string_lines, "\t}"]
    return Split(text="\n".join(out) + "\n")


def _renumber_files(body: str, files: dict[str, str]) -> tuple[str, list[str]]:
    order: dict[str, str] = {}

    def repl(m: re.Match) -> str:
        new = order.setdefault(m.group(2), str(len(order) + 1))
        return m.group(1) + new

    body = _LOC.sub(repl, body)
    unknown = '"?"'
    return body, [f"\t.file\t{new} {_normal_path(files.get(old, unknown))}" for old, new in order.items()]


def _normal_path(spelled: str) -> str:
    """A ``.file`` record's ``"path"`` without ``dir/..`` steps: a header reached by two include paths has one name."""
    m = re.fullmatch(r'"([^"]*)"(.*)', spelled)
    if not m or not m.group(1):
        return spelled
    return '"' + posixpath.normpath(m.group(1)) + '"' + m.group(2)


def _renumber_strings(body: str, strings: dict[str, str]) -> tuple[str, list[str]]:
    order: dict[str, str] = {}

    def repl(m: re.Match) -> str:
        return "$L__info_string" + order.setdefault(m.group(1), str(len(order)))

    body = _INFO.sub(repl, body)
    lines = []
    for old, new in order.items():
        lines += [f"$L__info_string{new}:", _canonical_string(strings.get(f"$L__info_string{old}", ".b8 0"))]
    return body, lines


def _canonical_string(data: str) -> str:
    """A ``.debug_str`` string (an inlined function's mangled name) with its ``_INTERNAL_<hash>_<file>`` namespace spelled ``_INTERNAL``.

    cicc names internal-linkage functions after the translation unit (a batch's or the variant's own);
    the name only labels inlined code in line info, so one spelling keeps the image independent of it.
    """
    raw = bytes(int(b) for b in re.findall(r"\d+", data.replace(".b8", " ")))
    text = raw.decode("latin-1")
    out, i = [], 0
    for m in _INTERNAL.finditer(text):
        length = int(m.group(1))
        out.append(text[i : m.start()] + "9_INTERNAL")
        i = m.start(2) + length
    text = "".join(out) + text[i:]
    return ".b8 " + ",".join(str(b) for b in text.encode("latin-1"))


def _unprefix(text: str, prefix: str, names: list[str]) -> str:
    """``text`` with ``prefix`` taken off every name it starts, mangled lengths (``_ZZ22tl_aot_b0_k...``) included."""
    if not prefix:
        return text
    for name in names:
        full = prefix + name
        length = str(len(full))

        def mangled(m: re.Match, length=length, name=name, full=full) -> str:
            digits = m.group(1)
            if digits.endswith(length):
                return digits[: -len(length)] + str(len(name)) + name
            return digits + full

        text = re.sub(r"(\d+)" + re.escape(full), mangled, text)
    return re.sub(r"(?<![\w$])" + re.escape(prefix), "", text)


def _renumber_blocks(body: str) -> str:
    """Basic-block labels (``$L__BB<function>_<n>``) numbered by function in order of appearance."""
    order: dict[str, str] = {}
    return _BLOCK.sub(lambda m: "$L__BB" + order.setdefault(m.group(1), str(len(order))) + "_", body)
