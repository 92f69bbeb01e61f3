"""Element types: the one table of what polytile computes in, and PlaidML's promotion rule.

Tile programs follow PlaidML 0.7.0's type rules (``tile/lang/type.cc``,
``TypeCheck``), which are *not* numpy's:

* An operation's result type is found by walking its operands left to right:
  a floating type beats any non-floating one; between two types of the same
  family (both floating, or both not), the wider wins, and on a tie the
  **first** one stays.  ``bool`` counts as 8 bits wide, signed and unsigned
  integers of one width tie.
* Literals are typed too: an integer literal (and a dimension used as a
  value) is ``int32``, a floating literal ``float32``.  So ``X + 1`` keeps a
  ``float32`` or ``float64`` tensor's type and ``(C ? 1.0 : 0.0)`` is
  ``float32``; but an ``int8`` tensor plus ``1`` is ``int32`` (the literal is
  wider), exactly as in PlaidML.
* Comparisons give ``bool``; ``c ? t : e`` promotes ``t`` then ``e``.
* An operation whose operands are all literals or dimensions is folded at
  bind time in double precision; an integer result is truncated toward zero.

The table of element types, their widths and their C spellings lives here,
so the front end, the oracle and every code generator agree::

    >>> promote(["int8", "int32"]), promote(["float32", "int64"]), promote(["uint32", "int32"])
    ('int32', 'float32', 'uint32')
"""
from __future__ import annotations

from typing import Iterable, Optional

import numpy as np

__all__ = [
    "SUPPORTED", "FLOATS", "INTEGERS", "C_TYPES", "INT_LITERAL", "FLOAT_LITERAL",
    "is_float", "is_integer", "is_unsigned", "width", "promote", "c_type", "from_bits", "as_input",
]

#: Every element type a tensor may have (inputs, outputs, temporaries).
SUPPORTED = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float16", "float32", "float64")
FLOATS = ("float16", "float32", "float64")
INTEGERS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")

#: C spelling of each element type (``<stdint.h>``; ``_Bool`` for bool).
C_TYPES = {
    "bool": "_Bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "float16": "_Float16", "float32": "float", "float64": "double",
}

#: PlaidML's types for literals (and for dimensions used as values).
INT_LITERAL = "int32"
FLOAT_LITERAL = "float32"

_WIDTH = {"bool": 8, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "float16": 16,
          "int32": 32, "uint32": 32, "float32": 32, "int64": 64, "uint64": 64, "float64": 64}


def _name(d) -> str:
    return d if isinstance(d, str) else np.dtype(d).name


def is_float(d) -> bool:
    """``is_float('float32') == True``; bool and integers are not floating."""
    return _name(d) in ("float16", "float32", "float64")


def is_integer(d) -> bool:
    """Signed or unsigned integer (not bool)."""
    return _name(d) in INTEGERS


def is_unsigned(d) -> bool:
    return _name(d).startswith("uint")


def width(d) -> int:
    """Bits, as PlaidML counts them (bool is 8)."""
    return _WIDTH[_name(d)]


def reduction_identity(op: str, d):
    """The value a reduction ``op`` (``+``, ``*``, ``max``, ``min``) starts from in dtype ``d``: 0, 1, and
    -inf/+inf for max/min (integers: the type's min/max; bool: False/True).  One table for the
    language's identities (:func:`polytile.sema.functions.identity`) and the code generators'.

        >>> reduction_identity("max", "int8"), reduction_identity("min", "float32"), reduction_identity("*", "bool")
        (-128, inf, True)
    """
    d = _name(d)
    if op in ("+", "*"):
        return (op == "*") if d == "bool" else int(op == "*")
    if op not in ("max", "min"):
        raise ValueError(f"no identity for reduction {op!r}")
    low = op == "max"
    if d == "bool":
        return not low
    if is_float(d):
        return float("-inf") if low else float("inf")
    info = np.iinfo(d)
    return int(info.min if low else info.max)


def promote(types: Iterable) -> str:
    """PlaidML's result type of an operation over ``types`` (left to right, see the module doc).

        >>> promote(["int32", "float32"]), promote(["float64", "float32"]), promote(["uint8", "int8"])
        ('float32', 'float64', 'uint8')
    """
    out: Optional[str] = None
    for t in types:
        t = _name(t)
        if out is None:
            out = t
        elif is_float(t) != is_float(out):
            if is_float(t):
                out = t
        elif width(t) > width(out):
            out = t
    if out is None:
        raise ValueError("promote() of no types")
    return out


def c_type(d) -> str:
    """The C type of an element type.

        >>> c_type("uint16")
        'uint16_t'
    """
    return C_TYPES[_name(d)]


def from_bits(family: str, bits: int) -> str:
    """``as_float/as_int/as_uint`` targets: ``from_bits('uint', 8) == 'uint8'``.

        >>> from_bits("float", 64)
        'float64'
    """
    return f"{family}{int(bits)}"


def as_input(value) -> np.ndarray:
    """An argument as an input array; Python numbers are typed as PlaidML types ``Integer``/``Real``.

    A Python ``int`` is a 0-d ``int32`` (``int64`` if it does not fit), a ``float`` a 0-d ``float32``,
    a ``bool`` a 0-d ``bool``; anything else goes through ``numpy.asarray``.

        >>> as_input(3).dtype, as_input(2.5).dtype, as_input([1.0, 2.0]).dtype
        (dtype('int32'), dtype('float32'), dtype('float64'))
    """
    if isinstance(value, bool):
        return np.array(value)
    if isinstance(value, int):
        return np.array(value, dtype=np.int32 if -2 ** 31 <= value < 2 ** 31 else np.int64)
    if isinstance(value, float):
        return np.array(value, dtype=np.float32)
    return np.asarray(value)
