"""What the C frontend knows about a declared name: its :class:`_Sym` (kind, dtype, extents, qualifiers).

Declarations at file scope, function parameters, locals and declarations
inside a region all become :class:`_Sym` records: an arithmetic scalar, an
array (with its extents, and whether it is reached through a pointer,
``restrict``), a function, or something the frontend does not model.
Element types are numpy dtype names (:func:`_dtype`).
:data:`PURE_FUNCTIONS` are the functions a statement may call without the
file declaring them pure.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence, Tuple

from pycparser import c_ast


_TYPEDEF_DTYPES = {
    "size_t": "uint64", "ssize_t": "int64", "ptrdiff_t": "int64", "intptr_t": "int64", "uintptr_t": "uint64",
    "int8_t": "int8", "int16_t": "int16", "int32_t": "int32", "int64_t": "int64", "uint8_t": "uint8",
    "uint16_t": "uint16", "uint32_t": "uint32", "uint64_t": "uint64", "bool": "bool", "_Bool": "bool",
}


def _dtype(names: Sequence[str], typedefs: Mapping[str, Sequence[str]]) -> Optional[str]:
    """numpy dtype name of a C arithmetic type (``double`` -> float64, ``int`` -> int32, ...)."""
    ws = list(names)
    if len(ws) == 1 and ws[0] in typedefs:
        return _dtype(typedefs[ws[0]], typedefs)
    if len(ws) == 1 and ws[0] in _TYPEDEF_DTYPES:
        return _TYPEDEF_DTYPES[ws[0]]
    unsigned = "unsigned" in ws
    if "double" in ws:
        return "longdouble" if "long" in ws else "float64"
    if "float" in ws:
        return "float32"
    if "_Bool" in ws:
        return "bool"
    if "char" in ws:
        return "uint8" if unsigned else "int8"
    if "short" in ws:
        return "uint16" if unsigned else "int16"
    if "long" in ws:
        return "uint64" if unsigned else "int64"
    if set(ws) <= {"int", "signed", "unsigned"} and ws:
        return "uint32" if unsigned else "int32"
    return None


def _is_integer(dtype: Optional[str]) -> bool:
    return bool(dtype) and (dtype.startswith(("int", "uint")) or dtype == "bool")


@dataclass
class _Sym:
    """What the frontend knows about a declared name."""

    name: str
    kind: str  # "scalar" | "array" | "func" | "other"
    dtype: Optional[str]
    dims: Tuple[Optional[c_ast.Node], ...] = ()  # extents of an array; None where unknown
    restrict: bool = False
    pointer: bool = False  # reached through a pointer (array parameter or pointer variable): may alias
    ptrptr: bool = False  # double **: its rows are pointers too
    origin: str = "local"  # "param" | "global" | "local" | "region"
    decl: Optional[c_ast.Node] = None
    volatile: bool = False  # every access must happen, in program order: never modelled

    def describe(self) -> str:
        if self.kind == "array":
            return f"{'pointer' if self.pointer else 'array'} of {self.dtype or 'unknown type'}"
        if self.kind == "scalar":
            return f"{self.dtype} variable"
        return {"func": "function", "other": "variable of a type the frontend does not model"}[self.kind]


def _is_volatile(decl: c_ast.Decl) -> bool:
    """``volatile`` anywhere in the declaration (the object, its elements, or what a pointer points to)."""
    t: Optional[c_ast.Node] = decl
    while t is not None:
        if "volatile" in (getattr(t, "quals", None) or []) or "volatile" in (getattr(t, "dim_quals", None) or []):
            return True
        t = getattr(t, "type", None)
        if not isinstance(t, c_ast.Node):
            return False
    return False


def _sym_from_decl(decl: c_ast.Decl, origin: str, typedefs: Mapping[str, Sequence[str]]) -> _Sym:
    sym = _sym_from_type(decl, origin, typedefs)
    sym.volatile = _is_volatile(decl)
    return sym


def _sym_from_type(decl: c_ast.Decl, origin: str, typedefs: Mapping[str, Sequence[str]]) -> _Sym:
    t = decl.type
    if isinstance(t, c_ast.FuncDecl):
        return _Sym(decl.name, "func", None, origin=origin, decl=decl)
    dims: List[Optional[c_ast.Node]] = []
    restrict = pointer = ptrptr = False
    if isinstance(t, c_ast.PtrDecl):
        pointer, restrict = True, "restrict" in (t.quals or [])
        dims.append(None)
        t = t.type
        if isinstance(t, c_ast.PtrDecl):
            ptrptr = True
            dims.append(None)
            t = t.type
    first = True
    while isinstance(t, c_ast.ArrayDecl):
        if first and origin == "param" and not pointer:
            # An array parameter is a pointer (C adjusts its type); restrict goes inside its brackets.
            pointer, restrict = True, "restrict" in (t.dim_quals or [])
        dims.append(t.dim)
        t = t.type
        first = False
    dtype = None
    if isinstance(t, c_ast.TypeDecl):
        if isinstance(t.type, c_ast.IdentifierType):
            dtype = _dtype(t.type.names, typedefs)
        elif isinstance(t.type, c_ast.Enum):
            dtype = "int32"
    if dims:
        return _Sym(decl.name, "array", dtype, tuple(dims), restrict, pointer, ptrptr, origin, decl)
    return _Sym(decl.name, "scalar" if dtype else "other", dtype, origin=origin, decl=decl)


#: Functions a scop statement may call without a declaration saying so: C's math.h functions
#: (double and float versions) and stdlib.h's integer ``abs``.  Their results depend on their
#: arguments only; the one thing they may change, ``errno``, is not treated as an output.
_MATH = ("sqrt cbrt exp exp2 expm1 log log2 log10 log1p logb pow sin cos tan asin acos atan atan2 sinh cosh tanh "
         "asinh acosh atanh fabs floor ceil round trunc rint nearbyint lround llround lrint llrint fmod remainder "
         "fmin fmax fdim fma hypot erf erfc tgamma lgamma copysign nextafter ldexp scalbn ilogb").split()
PURE_FUNCTIONS = frozenset([*_MATH, *(f + "f" for f in _MATH), *(f + "l" for f in _MATH),
                            "abs", "labs", "llabs", "isnan", "isinf", "isfinite", "signbit"])


def typename_dtype(typename: c_ast.Node, typedefs: Mapping[str, Sequence[str]]) -> Optional[str]:
    """numpy dtype name of a cast's or ``sizeof``'s type (a ``c_ast.Typename``), None for pointers,
    arrays and what the frontend does not model.

    >>> from pycparser import c_parser
    >>> cast = c_parser.CParser().parse("int f(int x) { return (unsigned long)x; }").ext[0].body.block_items[0].expr
    >>> typename_dtype(cast.to_type, {})
    'uint64'
    """
    t = getattr(typename, "type", None)
    if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
        return _dtype(t.type.names, typedefs)
    return None


def promoted(dtype: Optional[str]) -> Tuple[int, bool]:
    """``(bits, unsigned)`` of a value of numpy dtype ``dtype`` after C's integer promotions (types narrower
    than int, unsigned ones too, become int); an unknown type counts as int.

    >>> promoted("uint16"), promoted("uint32"), promoted("int64")
    ((32, False), (32, True), (64, False))
    """
    if dtype in ("int64", "uint64"):
        return (64, dtype == "uint64")
    return (32, dtype == "uint32")


def converted(x: Tuple[int, bool], y: Tuple[int, bool]) -> Tuple[int, bool]:
    """C's usual arithmetic conversions of two promoted integer types (LP64: long holds every unsigned int).

    >>> converted((32, False), (32, True)), converted((64, False), (32, True)), converted((32, False), (64, True))
    ((32, True), (64, False), (64, True))
    """
    if x[1] == y[1]:
        return (max(x[0], y[0]), x[1])
    u, s = (x, y) if x[1] else (y, x)
    return (u[0], True) if u[0] >= s[0] else (s[0], False)


def constant_type(node: c_ast.Constant) -> Tuple[int, bool]:
    """``(bits, unsigned)`` of an integer constant as C types it (LP64): its suffix, then the first type
    its value fits -- int, long for a decimal; int, unsigned int, long, unsigned long for hex and octal.
    A character constant is an int; anything else (a float) counts as int here.

    >>> from pycparser import c_ast
    >>> [constant_type(c_ast.Constant(t, v)) for t, v in (("int", "7"), ("int", "0x80000000"),
    ...  ("int", "3000000000"), ("unsigned int", "5u"), ("char", "'u'"), ("long int", "1l"))]
    [(32, False), (32, True), (64, False), (32, True), (32, False), (64, False)]
    """
    if not node.type.endswith("int"):
        return (32, False)
    text = node.value.lower()
    digits = text.rstrip("ul")
    suffix = text[len(digits):]
    try:
        value = int(digits, 16 if digits.startswith("0x") else 8 if digits.startswith("0") and digits != "0" else 10)
    except ValueError:
        value = 0
    decimal = not digits.startswith("0") or digits == "0"
    unsigned, wide = "u" in suffix, "l" in suffix
    for bits, uns in ((32, False), (32, True), (64, False), (64, True)):
        if (wide and bits == 32) or (unsigned and not uns) or (decimal and uns and not unsigned):
            continue
        if value < (1 << (bits - (0 if uns else 1))):
            return (bits, uns)
    return (64, True)
