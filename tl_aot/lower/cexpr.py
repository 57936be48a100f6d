"""Spell TIR expressions from TileLang's lowered host IR as C++ over the launcher's local names.

Naming in the generated launcher: ``p_<tensor>`` a tensor's data pointer, ``s_<sym>`` a dynamic
shape symbol (int64_t), ``a_<scalar>`` a scalar argument. Integer arithmetic is done in int64_t;
bit operations (shifts, and/or/xor/not, clz, popcount) are done in the width of their TIR dtype,
as TileLang's host code does them (``rt::shl<int32_t>`` ...: tl_aot/include/tl_aot/runtime/expr.h).
"""

from __future__ import annotations

from ..common.errors import LoweringError

__all__ = ["CppExprPrinter", "ctype_of"]

_CTYPES = {
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint8": "uint8_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
    "float16": "rt::f16",  # two bytes, converted from double as TileLang does: tl_aot/runtime/half.h
    "float32": "float",
    "float64": "double",
    "bool": "bool",
    "handle": "void*",
}


def ctype_of(dtype: str, what: str) -> str:
    """C++ type of a scalar of TileLang dtype ``dtype`` (kernel or entry argument)."""
    try:
        return _CTYPES[str(dtype)]
    except KeyError:
        takes = ", ".join(t for t in _CTYPES if t != "handle")
        msg = (
            f"{what}: scalar dtype {dtype} cannot be passed to a kernel (TileLang's packed call and tl_aot launchers"
            f" take scalars of {takes}); pass it as float32 and cast it in the kernel"
        )
        raise LoweringError(msg) from None


_BINARY = {
    "Add": "+",
    "Sub": "-",
    "Mul": "*",
    "EQ": "==",
    "NE": "!=",
    "LT": "<",
    "LE": "<=",
    "GT": ">",
    "GE": ">=",
    "And": "&&",
    "Or": "||",
}


#: TIR bit intrinsics -> launcher runtime helpers templated on the C++ type of the call's dtype.
_BIT_CALLS = {
    "shift_left": "shl",
    "shift_right": "shr",
    "bitwise_and": "bit_and",
    "bitwise_or": "bit_or",
    "bitwise_xor": "bit_xor",
    "bitwise_not": "bit_not",
    "clz": "clz",
    "popcount": "popcount",
}
#: TIR math intrinsics -> <cmath> (what TileLang's C host code calls for them).
_MATH_CALLS = {
    name: f"std::{name}"
    for name in ("exp", "exp2", "log", "log2", "log10", "sqrt", "pow", "fabs", "floor", "ceil", "round", "trunc", "nearbyint")
    + ("sin", "cos", "tan", "tanh", "sinh", "cosh", "atan", "asin", "acos", "atan2", "fmod", "hypot", "copysign", "erf")
}


class CppExprPrinter:
    """Translate a PrimExpr to C++; ``names`` maps TIR variable names to C++ spellings, ``lets`` inlines host lets."""

    def __init__(self, names: dict[str, str], lets: dict[str, object] | None = None, where: str = "") -> None:
        self.names = names
        self.lets = lets or {}
        self.where = where

    def __call__(self, expr) -> str:
        return self.visit(expr, 0)

    def _fail(self, expr, why: str):
        msg = f"{self.where}: cannot express {why} `{expr}` ({type(expr).__name__}) in the launcher"
        raise LoweringError(msg)

    def visit(self, e, depth: int) -> str:
        if depth > 64:
            self._fail(e, "a too deeply nested expression")
        if isinstance(e, bool):
            return "true" if e else "false"
        if isinstance(e, int):
            return f"int64_t({e})" if abs(e) >= 2**31 else str(e)
        if isinstance(e, float):
            return repr(e)
        kind = type(e).__name__
        d = depth + 1
        if kind == "IntImm":
            if str(e.dtype) == "bool":
                return "true" if e.value else "false"
            v = int(e.value)
            return f"int64_t({v})" if abs(v) >= 2**31 else str(v)
        if kind == "FloatImm":
            return repr(float(e.value))
        if kind == "StringImm":
            self._fail(e, "a string")
        if kind in ("Var", "SizeVar"):
            name = e.name
            if name in self.names:
                return self.names[name]
            if name in self.lets:
                return "(" + self.visit(self.lets[name], d) + ")"
            self._fail(e, "the host variable")
        if kind in _BINARY:
            return f"({self.visit(e.a, d)} {_BINARY[kind]} {self.visit(e.b, d)})"
        if kind == "FloorDiv":
            return f"rt::floordiv({self.visit(e.a, d)}, {self.visit(e.b, d)})"
        if kind == "FloorMod":
            return f"rt::floormod({self.visit(e.a, d)}, {self.visit(e.b, d)})"
        if kind in ("Div", "Mod"):  # TIR's Div / Mod of integers truncate, like C++'s / and %
            return f"({self.visit(e.a, d)} {'/' if kind == 'Div' else '%'} {self.visit(e.b, d)})"
        if kind in ("Min", "Max"):
            carrier = "int64_t" if _is_int(e) else "double"
            return f"rt::{kind.lower()}<{carrier}>({self.visit(e.a, d)}, {self.visit(e.b, d)})"
        if kind == "Not":
            return f"(!{self.visit(e.a, d)})"
        if kind == "Select":
            return f"({self.visit(e.condition, d)} ? {self.visit(e.true_value, d)} : {self.visit(e.false_value, d)})"
        if kind == "Cast":
            dt = str(e.dtype)
            inner = self.visit(e.value, d)
            if dt.startswith(("int", "uint")):  # all integer arithmetic is int64_t; the use site narrows
                return inner if _is_int(e.value) or str(e.value.dtype) == "bool" else f"static_cast<int64_t>({inner})"
            return f"static_cast<{ctype_of(dt, self.where)}>({inner})"
        if kind == "Call":
            return self._call(e, d)
        if kind == "Let":
            lets = dict(self.lets)
            lets[e.var.name] = e.value
            return CppExprPrinter(self.names, lets, self.where).visit(e.body, d)
        self._fail(e, "the expression")
        return ""  # unreachable

    def _call(self, e, d: int) -> str:
        """A TIR intrinsic call: conditionals, bit operations in their dtype's width, <cmath> functions."""
        op = getattr(e.op, "name", "")
        name = op.split(".", 1)[1] if op.startswith(("tirx.", "tir.")) else op
        if name not in ("if_then_else", "likely") and name not in _BIT_CALLS and name not in _MATH_CALLS:
            self._fail(e, f"the call to {op}")
        args = [self.visit(a, d) for a in e.args]
        if name == "if_then_else":
            return f"({args[0]} ? {args[1]} : {args[2]})"
        if name == "likely":
            return args[0]
        if name in _BIT_CALLS:
            if not _is_int(e):
                self._fail(e, f"{name} of dtype {e.dtype}")
            return f"rt::{_BIT_CALLS[name]}<{ctype_of(str(e.dtype), self.where)}>({', '.join(args)})"
        if name in _MATH_CALLS and str(e.dtype).startswith("float"):
            ctype = ctype_of(str(e.dtype), f"{self.where}: {name}")
            return f"{_MATH_CALLS[name]}({', '.join(f'static_cast<{ctype}>({a})' for a in args)})"
        self._fail(e, f"the call to {op}")
        return ""  # unreachable


def _is_int(e) -> bool:
    return str(e.dtype).startswith(("int", "uint"))
