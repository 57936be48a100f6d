"""Edits of the CUDA source TileLang generates, and checks of it against the lowered kernels.

The only place tl_aot reads generated C++ as text: parameters and locals named after C++ keywords
or macros are renamed (nvcc refuses them), and every lowered kernel must be a ``__global__`` of the source with the
parameters the launcher passes.
"""

from __future__ import annotations

import re

from ..common.errors import LoweringError

__all__ = ["check_source_kernels", "rename_reserved_names", "shadowed_names", "static_shared_bytes"]

_GLOBAL_RE = re.compile(r'(?:extern\s+"C"\s+)?__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(([^)]*)\)')


def check_source_kernels(kernels, source: str, where: str) -> None:
    """A hand-written ``__global__`` (T.CUDASourceCodeKernel) must take exactly the arguments passed."""
    decls = {m.group(1): m.group(2) for m in _GLOBAL_RE.finditer(source)}
    for k in kernels:
        decl = decls.get(k.name)
        if decl is None:
            continue
        arity = 0 if not decl.strip() or decl.strip() == "void" else decl.count(",") + 1
        if arity != len(k.args):
            passed = ", ".join(a.name for a in k.args) or "nothing"
            msg = (
                f"{where}: CUDA kernel {k.name} declares {arity} parameter(s) ({decl.strip()}) but the "
                f"prim_func passes {len(k.args)} ({passed}); TileLang passes only the prim_func parameters "
                "the launch uses, in order: make the __global__ signature match"
            )
            raise LoweringError(msg)


_KERNEL_DECL = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?\w+\s*\(([^)]*)\)")
#: A local declared at the start of a statement: ``float EOF[4];``, ``half_t* NULL = ...``.
_LOCAL_DECL = re.compile(
    r"(?:^|[;{])\s*(?:(?:const|volatile|static|extern|__shared__|__align__\(\d+\))\s+)*"
    r"([A-Za-z_][\w:]*)(?:<[^;{}]*?>)?\s*[*&]*\s*(?:__restrict__\s+)?([A-Za-z_]\w*)\s*(?=[\[=;])",
    re.M,
)
#: Words that start a statement but are not a type: ``return NULL;`` declares nothing.
_NOT_TYPES = frozenset({"return", "goto", "case", "else", "throw", "delete", "co_return", "co_yield", "do"})


def rename_reserved_names(source: str) -> str:
    """Rename parameters and locals named after C++ keywords, macros or compiler words (``new``, ``__LINE__``) in TileLang's source.

    TileLang accepts such names (parameters, dynamic dims, buffers) and spells them verbatim, which
    nvcc refuses or the preprocessor replaces. The rename is confined to each kernel's own
    declaration and body; the launcher passes arguments by position, so nothing else changes.
    """
    from ..common.cpp_spelling import device_reserved

    out, pos = [], 0
    for m in _KERNEL_DECL.finditer(source):
        if m.start() < pos:
            continue
        end = _function_end(source, m.end())
        span = source[m.start() : end]
        names = {re.findall(r"\w+", p)[-1] for p in m.group(1).split(",") if re.findall(r"\w+", p)}
        names |= {d.group(2) for d in _LOCAL_DECL.finditer(span) if d.group(1) not in _NOT_TYPES}
        bad = sorted(n for n in names if device_reserved(n))
        if not bad:
            continue
        for n in bad:
            new = f"{n}_"
            while re.search(rf"\b{new}\b", source):
                new += "_"
            span = re.sub(rf"\b{n}\b", new, span)
        out.append(source[pos : m.start()] + span)
        pos = end
    out.append(source[pos:])
    return "".join(out)


#: A declaration starting a statement, its type set apart from its name by a space or a ``*``/``&`` (``uint4 v;``,
#: ``half_t* p =``, ``for (int i = 0``): never the two halves of one word, as :data:`_LOCAL_DECL` may split ``mx[i]``
#: into ``m x``, nor a product inside an expression (``(alpha * X[i])``).
_TYPED_DECL = re.compile(
    r"(?:^|[;{]|\bfor\s*\()\s*(?:(?:const|volatile|static|extern|__shared__|__align__\(\d+\))\s+)*"
    r"([A-Za-z_][\w:]*)(?:<[^;{}]*?>)?(?:\s+|\s*[*&]+\s*)(?:__restrict__\s+)?([A-Za-z_]\w*)\s*(?=[\[=;,)])",
    re.M,
)
#: CUDA's built-in variables TileLang's code reads as ``blockIdx.x``: a parameter or local of that name hides them.
CUDA_BUILTINS = frozenset({"blockIdx", "threadIdx", "blockDim", "gridDim"})
#: A C-style cast, ``(half_t)x``: a parenthesised name followed by an operand (not after ``if``/``while``/...).
_CAST = re.compile(r"\(\s*([A-Za-z_]\w*)\s*\)\s*(?=[\w(])")
_CONDITION_BEFORE = re.compile(r"\b(?:if|while|switch|for|return|sizeof)\s*\($")


def shadowed_names(source: str) -> list[tuple[str, str]]:
    """Parameters and locals of TileLang's kernels that hide a name the same kernel's code needs: ``(name, what)``.

    TileLang spells a parameter, dim or buffer as its user named it. Named ``blockIdx`` it hides
    CUDA's built-in (``blockIdx.x`` then reads an ``int``); named ``half_t`` it hides the type the
    kernel's declarations and casts spell. Keywords and macros are renamed instead
    (:func:`rename_reserved_names`); these cannot be, the one spelling serving both. What is
    returned explains nvcc's error, whose text names neither; TileLang's own JIT fails the same way.
    """
    found: list[tuple[str, str]] = []
    for m in _KERNEL_DECL.finditer(source):
        span = source[m.start() : _function_end(source, m.end())]
        words = [re.findall(r"\w+", p) for p in m.group(1).split(",")]
        names = {w[-1]: "parameter" for w in words if w}
        types = {t for w in words for t in w[:-1]}
        for d in _TYPED_DECL.finditer(span):
            if d.group(1) in _NOT_TYPES:
                continue
            types.add(d.group(1))
            if d.group(1) not in ("dim3", "uint3"):  # TileLang's rasterization declares its own `const dim3 blockIdx`
                names.setdefault(d.group(2), "buffer or local")
        types |= {c.group(1) for c in _CAST.finditer(span) if not _CONDITION_BEFORE.search(span[: c.start() + 1])}
        for name, kind in sorted(names.items()):
            if name in CUDA_BUILTINS and re.search(rf"\b{name}\.[xyz]\b", span):
                what = f"{kind} {name!r} hides CUDA's built-in {name}, which the kernel's code reads ({name}.x)"
            elif name in types:
                what = f"{kind} {name!r} hides the type {name}, which the kernel's code spells"
            else:
                continue
            if (name, what) not in found:
                found.append((name, what))
    return found


def _function_end(source: str, i: int) -> int:
    """End of the declaration (``;``) or body (matching ``}``) that starts right after index ``i``."""
    while i < len(source) and source[i] not in ";{":
        i += 1
    if i >= len(source) or source[i] == ";":
        return min(i + 1, len(source))
    depth = 0
    for j in range(i, len(source)):
        if source[j] == "{":
            depth += 1
        elif source[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(source)


#: Bytes of the element types TileLang declares static ``__shared__`` arrays with.
_TYPE_BYTES = {"char": 1, "signed char": 1, "uchar": 1, "int8_t": 1, "uint8_t": 1, "bool": 1, "half_t": 2, "half": 2,
               "bfloat16_t": 2, "__nv_bfloat16": 2, "short": 2, "int16_t": 2, "uint16_t": 2, "float": 4, "int": 4,
               "uint": 4, "unsigned": 4, "int32_t": 4, "uint32_t": 4, "double": 8, "int64_t": 8, "uint64_t": 8,
               "float2": 8, "int2": 8, "float4": 16, "int4": 16, "uint4": 16}  # fmt: skip
_STATIC_SHARED = re.compile(r"(?<!extern )__shared__\s+(?:__align__\(\d+\)\s+)?([\w ]+?)\s+\w+((?:\[\d+\])+)\s*;")


def static_shared_bytes(source: str) -> dict[str, int]:
    """Bytes of static ``__shared__`` arrays each ``__global__`` of ``source`` declares (types of known size)."""
    out: dict[str, int] = {}
    for m in _GLOBAL_RE.finditer(source):
        body = source[m.end() : _function_end(source, m.end())]
        total = 0
        for d in _STATIC_SHARED.finditer(body):
            count = 1
            for n in re.findall(r"\d+", d.group(2)):
                count *= int(n)
            total += _TYPE_BYTES.get(d.group(1).strip(), 0) * count
        out[m.group(1)] = max(out.get(m.group(1), 0), total)
    return out
