"""Elementwise expressions: PlaidML's typing and folding, walked once for every consumer.

One walker (:func:`walk`) gives every elementwise expression its meaning;
*what* it builds is up to an :class:`Ops` backend.  :class:`NumpyOps`
computes with numpy (the reference interpreter, and typing on empty arrays);
the polyhedral lowering builds statement-body nodes with the same walker, so
the oracle and the compiled code cannot disagree about a type.

The rules (PlaidML 0.7.0's ``TypeCheck``; see :mod:`polytile.dtypes`):

* literals and dimensions are bind-time constants (:class:`Lit`): integers
  are ``int32``, floats ``float32``; an operation on constants only is
  folded (in double precision, integer results truncated toward zero);
* otherwise the result type is :func:`polytile.dtypes.promote` of the
  operands' types, left to right; operands are converted to it first (C's
  conversions), comparisons convert both sides to their promoted type and
  give ``bool``; ``c ? t : e`` promotes ``t`` then ``e``;
* integer ``/`` truncates toward zero, and dividing by zero gives 0 (C leaves
  it undefined; polytile pins it down so the oracle and the kernel agree);
  shift counts are taken modulo the operand width;
* ``max(a, b)`` is ``a < b ? b : a`` and ``min(a, b)`` is ``a < b ? a : b``
  (typed ``promote(b, a)`` / ``promote(a, b)`` as PlaidML's inline
  definitions are); ``relu(x)`` is ``x < 0 ? 0.0 : x`` (so an integer
  tensor's relu is ``float32``); ``sigmoid(x)`` is ``1.0 / (1.0 + exp(-x))``;
  math functions of an integer compute in double and truncate.

Example::

    >>> import numpy as np
    >>> from polytile.ir import Binary, Ref, Int, Float
    >>> walk(Binary("/", Ref("X"), Int(2)), NumpyOps({"X": np.array([-7, 7], np.int32)}))
    array([-3,  3], dtype=int32)
    >>> walk(Binary("*", Ref("X"), Float(0.5)), NumpyOps({"X": np.array([1, 2], np.int8)}))
    array([0.5, 1. ], dtype=float32)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import dtypes as D
from . import ir
from .errors import InternalError, ShapeError

__all__ = ["Lit", "Ops", "NumpyOps", "walk", "MATH", "FUNCTIONS", "CASTS", "SPECIAL", "lit_type"]


def _round_half_away(x):
    """C's ``round()`` on a float array: ``x - trunc(x)`` is exact, so the half is seen exactly
    (``floor(x + 0.5)`` rounds 0.49999997 up: the sum is 1.0 in float32).

    >>> _round_half_away(np.array([0.49999997, -2.5, 2.5, 8388609.0], np.float32)).tolist()
    [0.0, -3.0, 3.0, 8388609.0]
    """
    t = np.trunc(x)
    with np.errstate(invalid="ignore"):  # inf - inf: a NaN that fails the test, leaving t
        return np.where(np.abs(x - t) >= 0.5, t + np.copysign(np.ones_like(t), x), t).astype(x.dtype, copy=False)


#: Math functions (one argument unless noted) with their float implementation.
MATH: Mapping[str, Callable[..., Any]] = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "floor": np.floor, "ceil": np.ceil, "erf": None, "pow": np.power, "recip": None,
    # PlaidML (OpenCL/C) round() rounds half away from zero, not to even.
    "round": _round_half_away,
}

#: Every elementwise function and its arity (None: any).
FUNCTIONS: Mapping[str, int] = {
    **{name: 1 for name in MATH if name != "pow"}, "pow": 2,
    "abs": 1, "max": 2, "min": 2, "relu": 1, "sigmoid": 1,
    "as_float": 2, "as_int": 2, "as_uint": 2, "as_bool": 2, "index": 2, "reverse_grad": 2,
}

#: Casting builtins: name -> (family, allowed bit widths).
CASTS: Mapping[str, Tuple[str, Tuple[int, ...]]] = {
    "as_float": ("float", (16, 32, 64)), "as_int": ("int", (8, 16, 32, 64)), "as_uint": ("uint", (8, 16, 32, 64)),
}

#: Statement-level builtins: they make a whole tensor of their own shape (see polytile.special).
SPECIAL = ("reshape", "gather", "shape", "prng_step", "prng_state", "prng_value")


@dataclass(frozen=True)
class Lit:
    """A bind-time constant: a literal, a dimension's value, or a folded operation.

    ``dtype`` is PlaidML's type for it: ``int32`` for integers, ``float32`` for floats.
    """

    value: Union[int, float]
    dtype: str

    @property
    def is_float(self) -> bool:
        return self.dtype in D.FLOATS


def lit_type(value) -> str:
    """PlaidML's type of a literal value: ``int32`` or ``float32``."""
    return D.FLOAT_LITERAL if isinstance(value, float) else D.INT_LITERAL


class Ops:
    """What a backend provides to :func:`walk`; values are whatever the backend builds."""

    def dtype(self, v) -> str:
        raise NotImplementedError

    def tensor(self, name: str):
        raise NotImplementedError

    def const(self, value, dtype: str):
        raise NotImplementedError

    def cast(self, v, dtype: str):
        raise NotImplementedError

    def unary(self, op: str, v, dtype: str):
        raise NotImplementedError

    def binary(self, op: str, a, b, dtype: str):
        raise NotImplementedError

    def compare(self, op: str, a, b, dtype: str):
        raise NotImplementedError

    def select(self, c, t, e, dtype: str):
        raise NotImplementedError

    def call(self, name: str, args: Sequence, dtype: str):
        raise NotImplementedError

    def index(self, tensor: str, axis: int):
        raise NotImplementedError


_ARITH = ("+", "-", "*", "/")
_BITS = ("&", "|", "^", "<<", ">>")


def _type(v, ops: Ops) -> str:
    return v.dtype if isinstance(v, Lit) else ops.dtype(v)


def _as(v, dtype: str, ops: Ops):
    if isinstance(v, Lit):
        return ops.const(v.value, dtype)
    return v if ops.dtype(v) == dtype else ops.cast(v, dtype)


def _fractional(v) -> bool:
    return isinstance(v, Lit) and isinstance(v.value, float) and not v.is_float


def _fold_binary(op: str, a: Lit, b: Lit, where) -> Lit:
    if (_fractional(a) or _fractional(b)) and op not in _BITS:
        ty = D.promote([a.dtype, b.dtype])
        r = _fold_binary(op, Lit(float(a.value), D.FLOAT_LITERAL), Lit(float(b.value), D.FLOAT_LITERAL), where)
        if op in ir.COMPARISONS or D.is_float(ty):
            return r
        return Lit(int(math.trunc(r.value)) if math.isfinite(r.value) else 0, ty)
    if op in ir.COMPARISONS:
        x, y = a.value, b.value
        r = {"==": x == y, "!=": x != y, "<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y}[op]
        return Lit(int(r), D.INT_LITERAL)
    if op in _BITS:
        if a.is_float or b.is_float:
            raise ShapeError(f"'{op}' needs integers, got {a.value!r} and {b.value!r}", where)
        x, y = int(a.value), int(b.value)
        if op in ("<<", ">>"):
            y &= 63
        return Lit({"&": x & y, "|": x | y, "^": x ^ y, "<<": x << y, ">>": x >> y}[op], D.INT_LITERAL)
    if a.is_float or b.is_float:
        x, y = float(a.value), float(b.value)
        if op == "/":
            with np.errstate(all="ignore"):
                return Lit(float(np.float64(x) / np.float64(y)), D.FLOAT_LITERAL)
        return Lit({"+": x + y, "-": x - y, "*": x * y}[op], D.FLOAT_LITERAL)
    x, y = int(a.value), int(b.value)
    if op == "/":
        if y == 0:
            raise ShapeError(f"division by zero ({x} / 0)", where)
        q = abs(x) // abs(y)
        return Lit(q if (x < 0) == (y < 0) else -q, D.INT_LITERAL)
    return Lit({"+": x + y, "-": x - y, "*": x * y}[op], D.INT_LITERAL)


def _fold_call(name: str, args: Sequence[Lit], where) -> Lit:
    ty = D.promote([a.dtype for a in args])
    arr = [np.float64(a.value) for a in args]
    with np.errstate(all="ignore"):
        if name == "max":
            r = arr[1] if arr[0] < arr[1] else arr[0]
        elif name == "min":
            r = arr[0] if arr[0] < arr[1] else arr[1]
        elif name == "abs":
            r = -arr[0] if arr[0] < 0 else arr[0]
        elif name == "relu":
            return Lit(0.0 if arr[0] < 0 else float(arr[0]), D.FLOAT_LITERAL)
        elif name == "sigmoid":
            return Lit(float(1.0 / (1.0 + np.exp(-arr[0]))), D.FLOAT_LITERAL)
        elif name == "recip":
            r = np.float64(1.0) / arr[0]
        elif name == "pow":
            r = np.power(arr[0], arr[1])
        elif name == "erf":
            r = np.float64(math.erf(arr[0]))
        else:
            r = MATH[name](arr[0])
    if D.is_float(ty):
        return Lit(float(r), D.FLOAT_LITERAL)
    if not np.isfinite(r):
        raise ShapeError(f"{name}() of constant arguments is not a finite integer", where)
    return Lit(int(r), D.INT_LITERAL)


def walk(expr: ir.Expr, ops: Ops, dims: Optional[Mapping[str, int]] = None):
    """Evaluate ``expr`` with ``ops``; return a backend value or a :class:`Lit` (all constants).

    ``dims`` maps dimension names to their values; other names are tensors.
    """
    dims = dims or {}

    def go(e: ir.Expr):
        if isinstance(e, ir.Int):
            return Lit(int(e.value), D.INT_LITERAL)
        if isinstance(e, ir.Float):
            return Lit(float(e.value), D.FLOAT_LITERAL)
        if isinstance(e, ir.Ref):
            if e.name in dims:  # a dimension, or a constant passed at call time (PlaidML's Integer/Real)
                # PlaidML types every scalar passed at call time (Integer or Real) as int32, but
                # computes with its exact value: int32 tensor * 1.5 is int32 (4 * 1.5 -> 6).
                v = dims[e.name]
                return Lit(float(v), D.INT_LITERAL) if isinstance(v, float) else Lit(int(v), D.INT_LITERAL)
            return ops.tensor(e.name)
        if isinstance(e, ir.Unary):
            v = go(e.operand)
            if isinstance(v, Lit):
                if e.op == "-":
                    return Lit(-v.value, v.dtype)
                if v.is_float:
                    raise ShapeError(f"'~' needs an integer, got {v.value!r}", e.loc)
                return Lit(~int(v.value), v.dtype)
            ty = ops.dtype(v)
            if e.op == "~" and D.is_float(ty):
                raise ShapeError(f"'~' needs an integer operand, got {ty} in '{ir.format_expr(e)}'", e.loc)
            return ops.unary(e.op, v, ty)
        if isinstance(e, ir.Binary):
            a, b = go(e.lhs), go(e.rhs)
            if isinstance(a, Lit) and isinstance(b, Lit):
                return _fold_binary(e.op, a, b, e.loc)
            ty = D.promote([_type(a, ops), _type(b, ops)])
            if not D.is_float(ty) and any(_fractional(x) for x in (a, b)):
                # An int32-typed scalar holding a fraction: C computes in double, then converts.
                a64, b64 = _as(a, "float64", ops), _as(b, "float64", ops)
                if e.op in ir.COMPARISONS:
                    return ops.compare(e.op, a64, b64, "float64")
                return ops.cast(ops.binary(e.op, a64, b64, "float64"), ty)
            if e.op in ir.COMPARISONS:
                return ops.compare(e.op, _as(a, ty, ops), _as(b, ty, ops), ty)
            if e.op in _BITS and D.is_float(ty):
                raise ShapeError(f"'{e.op}' needs integer operands, got {ty} in '{ir.format_expr(e)}'", e.loc)
            return ops.binary(e.op, _as(a, ty, ops), _as(b, ty, ops), ty)
        if isinstance(e, ir.Cond):
            c, t, f = go(e.cond), go(e.then), go(e.else_)
            ty = D.promote([_type(t, ops), _type(f, ops)])
            if isinstance(c, Lit):
                pick = t if c.value != 0 else f
                if isinstance(t, Lit) and isinstance(f, Lit):
                    return Lit(float(pick.value), D.FLOAT_LITERAL) if D.is_float(ty) else Lit(int(pick.value), ty)
                return _as(pick, ty, ops)
            return ops.select(_as(c, "bool", ops), _as(t, ty, ops), _as(f, ty, ops), ty)
        if isinstance(e, ir.Call):
            return call(e)
        raise InternalError(f"cannot evaluate {e!r} elementwise")

    def call(e: ir.Call):
        name = e.func
        if name == "reverse_grad":
            return go(e.args[0])  # identity in the forward pass
        if name in CASTS:
            family, _ = CASTS[name]
            bits = e.args[1]
            if not isinstance(bits, ir.Int):
                raise InternalError("cast width checked by sema")
            ty = D.from_bits(family, bits.value)
            v = go(e.args[0])
            return _as(v, ty, ops)
        if name == "as_bool":
            # From an integer PlaidML keeps the lowest bit (as_bool(2) is false, as_bool(-5) true);
            # from a float it truncates and tests for zero (as_bool(0.5) is false, as_bool(4.7) true).
            v = go(e.args[0])
            if isinstance(v, Lit):
                return Lit(int(int(math.trunc(v.value)) != 0 if v.is_float else int(v.value) & 1), D.INT_LITERAL)
            wide = _as(v, "int64", ops)
            if not D.is_float(_type(v, ops)):
                wide = ops.binary("&", wide, ops.const(1, "int64"), "int64")
            return ops.compare("!=", wide, ops.const(0, "int64"), "int64")
        if name == "index":
            t = e.args[0]
            if not isinstance(t, ir.Ref) or t.name in dims:
                raise ShapeError("index() needs a tensor as its first argument", e.loc)
            return ops.index(t.name, int(e.args[1].value))
        args = [go(a) for a in e.args]
        if all(isinstance(a, Lit) for a in args):
            return _fold_call(name, args, e.loc)
        types = [_type(a, ops) for a in args]
        if name == "max":
            ty = D.promote([types[1], types[0]])
        elif name in ("relu", "sigmoid"):
            ty = D.promote([D.FLOAT_LITERAL] + types)
        else:
            ty = D.promote(types)
        return ops.call(name, [_as(a, ty, ops) for a in args], ty)

    return go(expr)


# ---------------------------------------------------------------------------
# numpy backend
# ---------------------------------------------------------------------------


def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's integer division (toward zero), with x / 0 == 0."""
    zero = b == 0
    safe = np.where(zero, 1, b).astype(b.dtype, copy=False)
    q = np.floor_divide(a, safe)
    if np.dtype(a.dtype).kind == "i":
        r = a - q * safe
        q = q + ((r != 0) & ((a < 0) != (safe < 0))).astype(q.dtype)
    return np.where(zero, np.zeros((), a.dtype), q).astype(a.dtype, copy=False)


def _int_math(fn, x: np.ndarray, dtype: str) -> np.ndarray:
    r = fn(x.astype(np.float64))
    r = np.where(np.isfinite(r), np.trunc(r), 0)
    return r.astype(dtype)


class NumpyOps(Ops):
    """Compute with numpy on the arrays of ``env`` (name -> array)."""

    def __init__(self, env: Mapping[str, Any]):
        self.env = env

    def dtype(self, v) -> str:
        return v.dtype.name

    def tensor(self, name: str):
        return np.asarray(self.env[name])

    def const(self, value, dtype: str):
        if D.is_float(dtype) or dtype == "bool":
            return np.array(value).astype(dtype)
        if isinstance(value, float):
            value = int(math.trunc(value)) if math.isfinite(value) else 0
        bits = D.width(dtype)
        value = int(value) & ((1 << bits) - 1)  # C's conversion: modulo 2^bits
        if not D.is_unsigned(dtype) and value >= 1 << (bits - 1):
            value -= 1 << bits
        return np.array(value, dtype=dtype)

    def cast(self, v, dtype: str):
        if D.is_integer(dtype) and D.is_float(v.dtype):
            # As PlaidML's kernels convert: truncate toward zero to a 64-bit integer, then keep the low
            # bits (-3.0 -> uint8 253).  NaN and values beyond 64 bits (undefined in C) give 0.
            ok = np.isfinite(v) & (np.abs(v) < 2.0 ** 63)
            wide = np.where(ok, np.trunc(v), 0).astype(np.int64)
            return wide.astype(dtype)
        if dtype == "bool":
            return v != 0
        return v.astype(dtype)

    def unary(self, op: str, v, dtype: str):
        if op == "-":
            return v.copy() if dtype == "bool" else np.negative(v)
        return np.invert(v)

    def binary(self, op: str, a, b, dtype: str):
        if op == "/":
            if D.is_float(dtype):
                return np.true_divide(a, b)
            if dtype == "bool":
                return np.logical_and(a, b)
            return _trunc_div(a, b)
        if op in ("<<", ">>"):
            if dtype == "bool":
                a, b = a.astype(np.uint8), b.astype(np.uint8)
                return ((np.left_shift if op == "<<" else np.right_shift)(a, b & 7) & 1).astype(bool)
            count = (b & (D.width(dtype) - 1)).astype(dtype)
            return (np.left_shift if op == "<<" else np.right_shift)(a, count).astype(dtype)
        if dtype == "bool" and op in ("+", "-", "*"):
            fn = {"+": np.logical_or, "-": np.logical_xor, "*": np.logical_and}[op]
            return fn(a, b)
        fn = {"+": np.add, "-": np.subtract, "*": np.multiply, "&": np.bitwise_and, "|": np.bitwise_or,
              "^": np.bitwise_xor}[op]
        return fn(a, b).astype(dtype, copy=False)

    def compare(self, op: str, a, b, dtype: str):
        fn = {"==": np.equal, "!=": np.not_equal, "<": np.less, ">": np.greater, "<=": np.less_equal,
              ">=": np.greater_equal}[op]
        return fn(a, b)

    def select(self, c, t, e, dtype: str):
        return np.where(c, t, e).astype(dtype, copy=False)

    def call(self, name: str, args: Sequence, dtype: str):
        x = args[0]
        if name == "max":
            return np.where(x < args[1], args[1], x).astype(dtype, copy=False)
        if name == "min":
            return np.where(x < args[1], x, args[1]).astype(dtype, copy=False)
        if name == "abs":
            return np.where(x < 0, -x, x).astype(dtype, copy=False)
        if name == "relu":
            return np.where(x < 0, np.zeros((), dtype), x).astype(dtype, copy=False)
        if name == "sigmoid":
            one = np.ones((), dtype)
            return (one / (one + np.exp(-x))).astype(dtype, copy=False)
        if name == "recip":
            if D.is_float(dtype):
                return np.true_divide(np.ones((), dtype), x)
            return _trunc_div(np.ones(np.shape(x), dtype), x)
        if name == "erf":
            fn = np.vectorize(math.erf, otypes=[np.float64])
        elif name == "pow":
            if D.is_float(dtype):
                return np.power(x, args[1])
            r = np.power(x.astype(np.float64), args[1].astype(np.float64))
            return np.where(np.isfinite(r), np.trunc(r), 0).astype(dtype)
        else:
            fn = MATH[name]
        if not D.is_float(dtype):
            return _int_math(fn, x, dtype)
        return np.asarray(fn(x)).astype(dtype, copy=False)

    def index(self, tensor: str, axis: int):
        shape = np.shape(self.env[tensor])
        view = [1] * len(shape)
        view[axis] = shape[axis]
        coords = np.arange(shape[axis], dtype=np.int32).reshape(view)
        return np.broadcast_to(coords, shape).copy()


def evaluate(expr: ir.Expr, env: Mapping[str, Any], dims: Optional[Mapping[str, int]] = None) -> np.ndarray:
    """An elementwise expression as a numpy array (a constant becomes a 0-d array of its type).

        >>> evaluate(ir.Binary("<", ir.Ref("X"), ir.Int(1)), {"X": np.array([0.5, 2.0], np.float32)})
        array([ True, False])
    """
    with np.errstate(all="ignore"):
        v = walk(expr, NumpyOps(env), dims)
    if isinstance(v, Lit):
        return NumpyOps(env).const(v.value, v.dtype)
    return v
