"""Semantic analysis of Tile programs: static checks, then binding to concrete shapes.

Two stages, so that shape-independent mistakes are reported once, with a
source location, before any array is seen:

* :func:`check` validates a :class:`~polytile.ir.Program` on its own and
  raises :class:`~polytile.errors.TileSemanticError` (or its subclass
  :class:`~polytile.errors.NonAffineError`) pointing at the offending node.
* :func:`bind` specialises a checked program to input shapes and dtypes and
  returns an immutable :class:`Bound`: every dimension's value and every
  tensor's shape, dtype and kind.  Mismatched arrays raise
  :class:`~polytile.errors.ShapeError`.

Example::

    >>> from polytile import ir
    >>> p = ir.Program(
    ...     inputs=(ir.Input("A", ("M", "K")), ir.Input("B", ("K", "N"))), outputs=("C",),
    ...     body=(ir.Contraction("C", (ir.Index("i"), ir.Index("j")), (ir.Ref("M"), ir.Ref("N")), "+", "*",
    ...           (ir.Access("A", (ir.Index("i"), ir.Index("k"))), ir.Access("B", (ir.Index("k"), ir.Index("j"))))),))
    >>> b = bind(p, [(2, 3), (3, 4)], ["float32", "int32"])
    >>> b.dims["K"], b.tensors["C"].shape, b.tensors["C"].dtype
    (3, (2, 4), dtype('float64'))

Semantics pinned down here (the reference interpreter and the compilers follow them)
-----------------------------------------------------------------------------------

Names and definitions (:func:`check`)
    Every name is used after its definition: an input, a dimension (bound by
    an input's header, or by an earlier ``DimDef`` statement) or the target of
    an earlier statement.  A name is one thing only: a tensor or a dimension.
    Each tensor is assigned once, inputs never; every header output is
    assigned, and is a tensor (not a dimension).  Input and output names are
    unique.  Index variables appear only in index polynomials and contraction
    constraints' left sides, never in sizes, constraint bounds, dimension
    definitions or elementwise expressions.  Contraction operands and
    ``default`` name tensors.  Where a tensor's rank is known statically
    (inputs declared with dimensions, contraction outputs, elementwise
    results whose operands all have known ranks) every access must use that
    many indices; otherwise the check happens in :func:`bind`.

Index polynomials
    Built from integers, index variables, dimension names, ``+ - *``, unary
    ``-`` and ``/``.  They must be affine in the index variables: a product
    of two sub-expressions that both contain index variables (``i * j``) or a
    division whose divisor contains one (``i / j``) raises
    :class:`NonAffineError`; dimension names are constants, so ``t * S + i``
    and ``i / S`` are fine.  Float literals are errors.  A division whose
    numerator contains index variables is *exact*: ``O[i / 2]`` only includes
    even ``i``.  A division whose numerator has no index variable is a
    constant and is computed like a size (floor division), so ``KH / 2`` with
    ``KH = 3`` is ``1``.

Sizes and dimension definitions
    Integer expressions of integers and dimension names with ``+ - * /`` and
    unary ``-``; ``/`` is floor division (Python's ``//``).  A ``DimDef``
    (``HO = (H + 1) / 2``) names a new dimension usable as a size, an offset
    in an index, or a value.  Its value may be negative (it can be an
    offset); an output *size* must not be (zero is allowed).

Builtins
    :data:`BUILTINS` is the single table of builtin semantics (numpy
    implementations).  ``as_float(X, bits)`` takes bits 16, 32 or 64 in
    :func:`check`, but float16 is rejected by :func:`bind` because no
    backend computes in half precision; ``as_int(X, bits)`` takes 8, 16, 32
    or 64; ``index(T, axis)`` takes an integer literal ``axis < rank(T)``.

Element types
    Inputs are float32, float64, int32 or int64 (:data:`SUPPORTED_DTYPES`).
    Elementwise expressions follow NumPy 2 (NEP 50) exactly, evaluated as
    Python would with numpy arrays: tensors are arrays (a scalar tensor is a
    0-d array, so it is *strongly* typed), while integer/float literals and
    dimension names used as values are Python scalars (*weak*), and
    operators on two Python scalars stay Python scalars (``N / 2`` is a
    Python float).  ``/`` is true division, comparisons give bool,
    ``c ? t : e`` is ``np.where(c, t, e)``.  :meth:`Bound.expr_type`
    computes the type by running the same evaluator as the reference on
    zero-size arrays, so the two always agree.

Contractions (:func:`contraction_dtype`)
    One operand: its dtype.  ``+``/``*`` combinations:
    ``np.result_type(A, B)``.  ``==``: ``np.result_type(A, B)`` holding 1 or
    0.  ``A == B ? C``: C's dtype; where ``A != B`` the point contributes the
    aggregation's :func:`identity` (for ``=``, which has none, it writes 0).
    Unreached output cells are 0 or the ``default`` tensor (cast to the
    output dtype; its shape must equal the output's).
"""
from __future__ import annotations

from fractions import Fraction

import hashlib
import json
import operator
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import ir
from .errors import InternalError, NonAffineError, ShapeError, SourceLocation, TileSemanticError
from .ir import (
    Access,
    Assign,
    Binary,
    Call,
    Cond,
    Contraction,
    DimDef,
    Float,
    Index,
    Int,
    Program,
    Ref,
    Unary,
    format_expr,
)

__all__ = [
    "BUILTINS",
    "Builtin",
    "Bound",
    "SUPPORTED_DTYPES",
    "TensorInfo",
    "bind",
    "check",
    "contraction_dtype",
    "eval_elementwise",
    "identity",
]

SUPPORTED_DTYPES: Tuple[np.dtype, ...] = (
    np.dtype(np.float32),
    np.dtype(np.float64),
    np.dtype(np.int32),
    np.dtype(np.int64),
)


# ---------------------------------------------------------------------------
# Builtins
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Builtin:
    """One builtin function: its name, arity and numpy implementation.

    ``int_arg`` is the position of an argument that must be an integer
    literal (``bits`` of ``as_float``/``as_int``, ``axis`` of ``index``);
    ``int_choices`` lists its allowed values (empty: any axis below the rank).

        >>> BUILTINS["relu"].impl(np.array([-1.0, 2.0]))
        array([0., 2.])
    """

    name: str
    arity: int
    impl: Callable[..., Any]
    int_arg: Optional[int] = None
    int_choices: Tuple[int, ...] = ()


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _recip(x):
    return np.true_divide(1, x)


def _relu(x):
    return np.maximum(x, 0)


def _as_float(x, bits):
    return np.asarray(x).astype(f"float{int(bits)}")


def _as_int(x, bits):
    return np.asarray(x).astype(f"int{int(bits)}")


def _index(t, axis):
    shape = np.shape(t)
    axis = int(axis)
    if not 0 <= axis < len(shape):
        raise ValueError(f"index axis {axis} out of range for rank {len(shape)}")
    view = [1] * len(shape)
    view[axis] = shape[axis]
    coords = np.arange(shape[axis], dtype=np.int64).reshape(view)
    # A real array, not a broadcast view: callers may write into results.
    return np.broadcast_to(coords, shape).copy()


def _table() -> Dict[str, Builtin]:
    t: Dict[str, Builtin] = {}
    for name in ("exp", "log", "sqrt", "tanh", "sin", "cos", "tan", "floor", "ceil", "abs"):
        t[name] = Builtin(name, 1, getattr(np, name))
    t["round"] = Builtin("round", 1, np.round)
    t["pow"] = Builtin("pow", 2, np.power)
    t["sigmoid"] = Builtin("sigmoid", 1, _sigmoid)
    t["recip"] = Builtin("recip", 1, _recip)
    t["max"] = Builtin("max", 2, np.maximum)
    t["min"] = Builtin("min", 2, np.minimum)
    t["relu"] = Builtin("relu", 1, _relu)
    t["as_float"] = Builtin("as_float", 2, _as_float, int_arg=1, int_choices=(16, 32, 64))
    t["as_int"] = Builtin("as_int", 2, _as_int, int_arg=1, int_choices=(8, 16, 32, 64))
    t["index"] = Builtin("index", 2, _index, int_arg=1)
    return t


BUILTINS: Mapping[str, Builtin] = MappingProxyType(_table())


def identity(agg: str, dtype) -> Any:
    """The starting value of a reached output cell for aggregation ``agg``.

    0 for ``+``, 1 for ``*``, -inf/+inf for ``>``/``<`` (integers: the
    dtype's min/max; bool: False/True).  ``=`` has no identity: ``None``.

        >>> identity(">", "int32"), identity("<", "float32"), identity("=", "float64")
        (np.int32(-2147483648), np.float32(inf), None)
    """
    dt = np.dtype(dtype)
    if agg == "=":
        return None
    if agg == "+":
        return dt.type(0)
    if agg == "*":
        return dt.type(1)
    if agg in (">", "<"):
        low = agg == ">"
        if dt.kind == "f":
            return dt.type(-np.inf if low else np.inf)
        if dt.kind in "iu":
            info = np.iinfo(dt)
            return dt.type(info.min if low else info.max)
        if dt.kind == "b":
            return dt.type(not low)
        raise ValueError(f"no identity for {agg!r} over {dt}")
    raise ValueError(f"unknown aggregation {agg!r}")


# ---------------------------------------------------------------------------
# Elementwise evaluation, shared by typing and the reference interpreter
# ---------------------------------------------------------------------------

_PY_SCALARS = (bool, int, float)


def _is_py(x) -> bool:
    return isinstance(x, _PY_SCALARS)


def _divide(a, b):
    if _is_py(a) and _is_py(b):
        # Two Python scalars stay a (weak) Python float, as in Python itself;
        # a zero divisor gives numpy's inf/nan rather than ZeroDivisionError.
        if b == 0:
            with np.errstate(all="ignore"):
                return float(np.true_divide(a, b))
        return a / b
    return np.true_divide(a, b)


_BINOPS: Dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _divide,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
}


def eval_elementwise(expr: ir.Expr, env: Mapping[str, Any]) -> Any:
    """Evaluate an elementwise expression with numpy, the way the reference does.

    ``env`` maps tensor names to arrays and dimension names to Python ints.
    Literals stay Python scalars, so NEP 50 treats them as weak.

        >>> eval_elementwise(Binary("*", Ref("X"), Float(2.5)), {"X": np.ones(2, np.float32)})
        array([2.5, 2.5], dtype=float32)
    """
    if isinstance(expr, Int):
        return int(expr.value)
    if isinstance(expr, Float):
        return float(expr.value)
    if isinstance(expr, Ref):
        return env[expr.name]
    if isinstance(expr, Unary):
        v = eval_elementwise(expr.operand, env)
        if expr.op == "-":
            return -v
        raise InternalError(f"unknown unary operator {expr.op!r}")
    if isinstance(expr, Binary):
        return _BINOPS[expr.op](eval_elementwise(expr.lhs, env), eval_elementwise(expr.rhs, env))
    if isinstance(expr, Call):
        b = BUILTINS[expr.func]
        return b.impl(*(eval_elementwise(a, env) for a in expr.args))
    if isinstance(expr, Cond):
        return np.where(
            eval_elementwise(expr.cond, env), eval_elementwise(expr.then, env), eval_elementwise(expr.else_, env)
        )
    raise InternalError(f"cannot evaluate {expr!r} elementwise")


# ---------------------------------------------------------------------------
# check()
# ---------------------------------------------------------------------------

_INPUT, _DIM, _TENSOR = "input", "dim", "tensor"


def _where(node, fallback) -> Optional[SourceLocation]:
    loc = getattr(node, "loc", None)
    return loc if loc is not None else getattr(fallback, "loc", None)


def _at(loc: Optional[SourceLocation], what: str = "") -> str:
    if loc is None:
        return ""
    return f" ({what} at {loc.line}:{loc.col})" if what else f" (at {loc.line}:{loc.col})"


class _Checker:
    def __init__(self, program: Program):
        self.p = program
        self.kind: Dict[str, str] = {}
        self.defined_at: Dict[str, Optional[SourceLocation]] = {}
        self.rank: Dict[str, Optional[int]] = {}
        # Names defined by any statement, to tell "used before defined" from "unknown".
        self.later: Dict[str, Optional[SourceLocation]] = {}
        for s in program.body:
            self.later.setdefault(s.target, s.loc)

    def header_loc(self, name: str, second: bool = False) -> Optional[SourceLocation]:
        """Where output ``name`` appears in the header (outputs carry no location of their own)."""
        locs = [i.loc for i in self.p.inputs if i.loc is not None]
        locs += [s.loc for s in self.p.body if s.loc is not None]
        if not locs:
            return None
        base = locs[0]
        # The header is usually one line, and every input's location carries its text.
        for loc in locs:
            arrow = loc.text.find("->")
            if arrow < 0:
                continue
            hits = [m.start() for m in re.finditer(rf"(?<![\w#$])#?{re.escape(name)}(?!\w)", loc.text[arrow:])]
            if hits:
                k = hits[1] if second and len(hits) > 1 else hits[0]
                return SourceLocation(loc.file, loc.line, arrow + k + 1, loc.text)
        return base

    def err(self, msg: str, node, stmt=None, cls=TileSemanticError):
        raise cls(msg, _where(node, stmt))

    def define(self, name: str, kind: str, rank: Optional[int], node, stmt=None):
        if name in self.kind:
            old = self.kind[name]
            loc = _where(node, stmt)
            if old == _INPUT:
                raise TileSemanticError(f"input '{name}' cannot be assigned", loc)
            if old == _DIM and kind == _DIM:
                raise TileSemanticError(
                    f"dimension '{name}' is defined twice{_at(self.defined_at[name], 'first')}", loc
                )
            if old == _DIM:
                raise TileSemanticError(f"'{name}' is a dimension; it cannot also name a tensor", loc)
            if kind == _DIM:
                raise TileSemanticError(f"'{name}' is a tensor; it cannot also name a dimension", loc)
            raise TileSemanticError(
                f"tensor '{name}' is assigned twice{_at(self.defined_at[name], 'first')}", loc
            )
        self.kind[name] = kind
        self.defined_at[name] = _where(node, stmt)
        self.rank[name] = rank

    def lookup(self, ref: Ref, stmt, want: str, role: str) -> str:
        """Kind of a used name; ``want`` is 'dim', 'tensor' or 'any'."""
        name = ref.name
        if name not in self.kind:
            if name in self.later:
                self.err(f"'{name}' is used before it is defined{_at(self.later[name])}", ref, stmt)
            self.err(f"unknown name '{name}'", ref, stmt)
        k = self.kind[name]
        if want == _DIM and k != _DIM:
            self.err(f"'{name}' is a tensor, not a dimension: {role} may only use dimension names", ref, stmt)
        if want == _TENSOR and k == _DIM:
            self.err(f"'{name}' is a dimension, not a tensor: {role} must name tensors", ref, stmt)
        return k

    def lookup_tensor(self, name: str, node, stmt, role: str) -> Optional[int]:
        self.lookup(Ref(name, _where(node, stmt)), stmt, _TENSOR, role)
        return self.rank[name]

    # -- expression roles -------------------------------------------------

    def size_expr(self, e: ir.Expr, stmt, role: str) -> None:
        """Integers and dimension names with + - * / and unary minus."""
        if isinstance(e, Int):
            return
        if isinstance(e, Float):
            self.err(f"float literal {format_expr(e)} in {role}: only integers and dimension names", e, stmt)
        if isinstance(e, Index):
            self.err(f"index variable '{e.name}' in {role}: only integers and dimension names", e, stmt)
        if isinstance(e, Ref):
            self.lookup(e, stmt, _DIM, role)
            return
        if isinstance(e, Unary) and e.op == "-":
            self.size_expr(e.operand, stmt, role)
            return
        if isinstance(e, Binary) and e.op in ("+", "-", "*", "/"):
            self.size_expr(e.lhs, stmt, role)
            self.size_expr(e.rhs, stmt, role)
            return
        self.err(f"'{format_expr(e)}' is not allowed in {role}: only + - * / of integers and dimensions", e, stmt)

    def index_expr(self, e: ir.Expr, stmt) -> bool:
        """Check an index polynomial; return whether it contains index variables."""
        if isinstance(e, Int):
            return False
        if isinstance(e, Float):
            self.err(f"float literal {format_expr(e)} in an index expression", e, stmt)
        if isinstance(e, Index):
            return True
        if isinstance(e, Ref):
            self.lookup(e, stmt, _DIM, "index expressions")
            return False
        if isinstance(e, Unary) and e.op == "-":
            return self.index_expr(e.operand, stmt)
        if isinstance(e, Binary) and e.op in ("+", "-", "*", "/"):
            lhs = self.index_expr(e.lhs, stmt)
            rhs = self.index_expr(e.rhs, stmt)
            if e.op == "*" and lhs and rhs:
                self.err(
                    f"index expression '{format_expr(e)}' is not affine: both factors contain index variables",
                    e, stmt, NonAffineError,
                )
            if e.op == "/" and rhs:
                self.err(
                    f"index expression '{format_expr(e)}' is not affine: the divisor contains index variables",
                    e, stmt, NonAffineError,
                )
            return lhs or rhs
        self.err(f"'{format_expr(e)}' is not allowed in an index expression", e, stmt)
        return False  # unreachable

    def elementwise(self, e: ir.Expr, stmt) -> Optional[int]:
        """Check an elementwise expression; return its rank if statically known."""
        if isinstance(e, (Int, Float)):
            return 0
        if isinstance(e, Index):
            self.err(
                f"index variable '{e.name}' in an elementwise expression (tensors and dimensions start uppercase)",
                e, stmt,
            )
        if isinstance(e, Ref):
            k = self.lookup(e, stmt, "any", "elementwise expressions")
            return 0 if k == _DIM else self.rank[e.name]
        if isinstance(e, Unary):
            if e.op != "-":
                self.err(f"unknown unary operator '{e.op}'", e, stmt)
            return self.elementwise(e.operand, stmt)
        if isinstance(e, Binary):
            if e.op not in ir.BINARY_OPS:
                self.err(f"unknown operator '{e.op}'", e, stmt)
            return _max_rank(self.elementwise(e.lhs, stmt), self.elementwise(e.rhs, stmt))
        if isinstance(e, Cond):
            ranks = [self.elementwise(x, stmt) for x in (e.cond, e.then, e.else_)]
            return _max_rank(*ranks)
        if isinstance(e, Call):
            b = BUILTINS.get(e.func)
            if b is None:
                self.err(f"unknown function '{e.func}' (builtins: {', '.join(sorted(BUILTINS))})", e, stmt)
            if len(e.args) != b.arity:
                plural = "s" if b.arity != 1 else ""
                self.err(f"{b.name} takes {b.arity} argument{plural}, got {len(e.args)}", e, stmt)
            ranks = []
            for pos, a in enumerate(e.args):
                if pos == b.int_arg:
                    if not isinstance(a, Int):
                        self.err(f"{b.name}: argument {pos + 1} must be an integer literal, got '{format_expr(a)}'",
                                 a, stmt)
                    if b.int_choices and a.value not in b.int_choices:
                        choices = ", ".join(map(str, b.int_choices))
                        self.err(f"{b.name}: bits must be one of {choices}, got {a.value}", a, stmt)
                else:
                    ranks.append(self.elementwise(a, stmt))
            if b.name == "index":
                rank, axis = ranks[0], e.args[1].value
                if axis < 0 or (rank is not None and axis >= rank):
                    shown = f"rank {rank}" if rank is not None else "a tensor"
                    self.err(f"index: axis {axis} is out of range for {shown}", e.args[1], stmt)
                return rank
            return _max_rank(*ranks)
        self.err(f"'{format_expr(e)}' is not an elementwise expression", e, stmt)
        return None

    # -- statements -------------------------------------------------------

    def header(self) -> None:
        seen_in: Dict[str, Any] = {}
        for inp in self.p.inputs:
            if inp.name in seen_in:
                raise TileSemanticError(f"duplicate input name '{inp.name}'", inp.loc)
            seen_in[inp.name] = inp
            rank = None if inp.dims is None else len(inp.dims)
            self.define(inp.name, _INPUT, rank, inp)
        for inp in self.p.inputs:
            for d in inp.dims or ():
                if isinstance(d, str):
                    if self.kind.get(d, _DIM) != _DIM:
                        raise TileSemanticError(f"'{d}' names both an input tensor and a dimension", inp.loc)
                    if d not in self.kind:
                        self.define(d, _DIM, None, inp)
                elif not isinstance(d, int) or d < 0:
                    raise TileSemanticError(f"input '{inp.name}': fixed size {d!r} must be a non-negative integer",
                                            inp.loc)
        seen_out = set()
        for o in self.p.outputs:
            if o in seen_out:
                raise TileSemanticError(f"duplicate output name '{o}'", self.header_loc(o, second=True))
            seen_out.add(o)

    def statement(self, s) -> None:
        if isinstance(s, DimDef):
            self.size_expr(s.expr, s, "a dimension definition")
            self.define(s.target, _DIM, None, s)
        elif isinstance(s, Assign):
            rank = self.elementwise(s.expr, s)
            self.define(s.target, _TENSOR, rank, s)
        elif isinstance(s, Contraction):
            self.contraction(s)
            self.define(s.output, _TENSOR, len(s.indices), s)
        else:
            raise InternalError(f"unknown statement {s!r}")

    def contraction(self, s: Contraction) -> None:
        if s.agg not in ir.AGGREGATIONS:
            self.err(f"unknown aggregation '{s.agg}' (expected one of + * > < =)", s)
        want = {None: 1, "+": 2, "*": 2, "==": 2, "?": 3}
        if s.combo not in want:
            self.err(f"unknown combination '{s.combo}' (expected + * == or a ?: ternary)", s)
        if len(s.operands) != want[s.combo]:
            self.err(f"combination '{s.combo}' takes {want[s.combo]} operands, got {len(s.operands)}", s)
        if len(s.sizes) != len(s.indices):
            self.err(f"'{s.output}' has {len(s.indices)} indices but {len(s.sizes)} sizes", s)
        for e in s.indices:
            self.index_expr(e, s)
        for z in s.sizes:
            self.size_expr(z, s, "an output size")
        for op in s.operands:
            rank = self.lookup_tensor(op.tensor, op, s, "contraction operands")
            if rank is not None and rank != len(op.indices):
                self.err(f"'{op.tensor}' has rank {rank} but is indexed with {len(op.indices)} indices", op, s)
            for e in op.indices:
                self.index_expr(e, s)
        for c in s.constraints:
            self.index_expr(c.expr, s)
            self.size_expr(c.bound, c if c.loc is not None else s, "a constraint bound")
        if s.default is not None:
            rank = self.lookup_tensor(s.default, s, s, "'default'")
            if rank is not None and rank != len(s.indices):
                self.err(f"default '{s.default}' has rank {rank} but '{s.output}' has rank {len(s.indices)}", s)

    def run(self) -> None:
        self.header()
        for s in self.p.body:
            self.statement(s)
        for o in self.p.outputs:
            k = self.kind.get(o)
            if k == _INPUT:
                raise TileSemanticError(f"output '{o}' is an input; outputs must be assigned in the body",
                                        self.header_loc(o))
            if k == _DIM:
                raise TileSemanticError(f"output '{o}' is a dimension, not a tensor", self.defined_at[o])
            if k is None:
                raise TileSemanticError(f"output '{o}' is never assigned", self.header_loc(o))


def _max_rank(*ranks: Optional[int]) -> Optional[int]:
    if any(r is None for r in ranks):
        return None
    return max(ranks, default=0)


def check(program: Program) -> None:
    """Shape-independent checks; raise TileSemanticError/NonAffineError with a location.

        >>> bad = Program((ir.Input("A", ("N",)),), ("O",), (Assign("O", Ref("Q")),))
        >>> check(bad)
        Traceback (most recent call last):
        ...
        polytile.errors.TileSemanticError: unknown name 'Q'
    """
    _Checker(program).run()


# ---------------------------------------------------------------------------
# bind()
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorInfo:
    """A tensor of a bound program: ``kind`` is 'input', 'output' or 'temp'."""

    name: str
    shape: Tuple[int, ...]
    dtype: np.dtype
    kind: str


def _dims_text(dims) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


class Bound:
    """A program specialised to concrete input shapes and dtypes (immutable).

    Build it with :func:`bind`.  ``dims`` holds every dimension (header and
    ``DimDef``), ``tensors`` every tensor: inputs first, then statement
    targets in program order.

        >>> b = bind(Program((ir.Input("X", ("N",)),), ("Y",), (Assign("Y", Binary("/", Ref("X"), Ref("N"))),)),
        ...          [(4,)], ["int32"])
        >>> b.tensors["Y"].dtype, b.size(Binary("*", Ref("N"), Int(2)))
        (dtype('float64'), 8)
    """

    __slots__ = ("program", "dims", "tensors", "shapes", "dtypes", "_dims", "_tensors", "_frozen")

    def __init__(self, program: Program, shapes: Tuple[Tuple[int, ...], ...], dtypes: Tuple[np.dtype, ...]):
        object.__setattr__(self, "_frozen", False)
        self.program = program
        self.shapes = shapes
        self.dtypes = dtypes
        self._dims: Dict[str, int] = {}
        self._tensors: Dict[str, TensorInfo] = {}
        self.dims: Mapping[str, int] = MappingProxyType(self._dims)
        self.tensors: Mapping[str, TensorInfo] = MappingProxyType(self._tensors)

    def __setattr__(self, name, value):
        if self._frozen:
            raise AttributeError("Bound is immutable")
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        ts = ", ".join(f"{t.name}{list(t.shape)}:{t.dtype}" for t in self._tensors.values())
        return f"<Bound {ts}>"

    # -- queries ------------------------------------------------------------

    def size(self, expr: ir.Expr) -> int:
        """Evaluate a size/dimension expression (``/`` is floor division).

            >>> b = bind(Program((ir.Input("X", ("N",)),), ("Y",), (Assign("Y", Ref("X")),)), [(7,)], ["float32"])
            >>> b.size(Binary("/", Binary("+", Ref("N"), Int(1)), Int(2)))
            4
        """
        if isinstance(expr, Int):
            return int(expr.value)
        if isinstance(expr, Ref):
            if expr.name not in self._dims:
                raise TileSemanticError(f"'{expr.name}' is not a dimension", expr.loc)
            return self._dims[expr.name]
        if isinstance(expr, Unary) and expr.op == "-":
            return -self.size(expr.operand)
        if isinstance(expr, Binary) and expr.op in ("+", "-", "*", "/"):
            a, b = self.size(expr.lhs), self.size(expr.rhs)
            if expr.op == "+":
                return a + b
            if expr.op == "-":
                return a - b
            if expr.op == "*":
                return a * b
            if b == 0:
                why = "" if isinstance(expr.rhs, Int) else f" ({format_expr(expr.rhs)} = 0)"
                raise ShapeError(f"division by zero in '{format_expr(expr)}'{why}", expr.loc)
            return a // b
        raise TileSemanticError(f"'{format_expr(expr)}' is not an integer size expression", getattr(expr, "loc", None))

    def _shape_of(self, e: ir.Expr, stmt) -> Tuple[int, ...]:
        if isinstance(e, (Int, Float)):
            return ()
        if isinstance(e, Ref):
            if e.name in self._tensors:
                return self._tensors[e.name].shape
            if e.name in self._dims:
                return ()
            raise TileSemanticError(f"unknown name '{e.name}'", e.loc)
        if isinstance(e, Unary):
            return self._shape_of(e.operand, stmt)
        if isinstance(e, Binary):
            return self._broadcast(e, stmt, self._shape_of(e.lhs, stmt), self._shape_of(e.rhs, stmt))
        if isinstance(e, Cond):
            s = self._broadcast(e, stmt, self._shape_of(e.cond, stmt), self._shape_of(e.then, stmt))
            return self._broadcast(e, stmt, s, self._shape_of(e.else_, stmt))
        if isinstance(e, Call):
            b = BUILTINS[e.func]
            shapes = [self._shape_of(a, stmt) for pos, a in enumerate(e.args) if pos != b.int_arg]
            if b.name == "index":
                axis = e.args[1].value
                if axis >= len(shapes[0]):
                    raise ShapeError(
                        f"index: axis {axis} is out of range for shape {shapes[0]} in '{format_expr(e)}'",
                        _where(e, stmt),
                    )
            if b.name == "as_float" and e.args[1].value == 16:
                raise TileSemanticError("as_float(X, 16): float16 is not supported by polytile's backends; "
                                        "use 32 or 64", _where(e, stmt))
            out: Tuple[int, ...] = ()
            for s in shapes:
                out = self._broadcast(e, stmt, out, s)
            return out
        raise TileSemanticError(f"'{format_expr(e)}' is not an elementwise expression", _where(e, stmt))

    def _broadcast(self, e, stmt, a: Tuple[int, ...], b: Tuple[int, ...]) -> Tuple[int, ...]:
        try:
            return tuple(np.broadcast_shapes(a, b))
        except ValueError:
            who = f"{stmt.target}: " if stmt is not None else ""
            raise ShapeError(
                f"{who}cannot broadcast shapes {a} and {b} in '{format_expr(e)}'", _where(e, stmt)
            ) from None

    def _dtype_of(self, e: ir.Expr, stmt) -> np.dtype:
        # Same evaluator as the reference, on zero-size arrays of the same
        # ranks: NEP 50 types never depend on values or sizes, so this is
        # exactly the dtype the reference will produce.
        env: Dict[str, Any] = dict(self._dims)
        for name, t in self._tensors.items():
            env[name] = np.empty((0,) * len(t.shape), dtype=t.dtype)
        try:
            with np.errstate(all="ignore"):
                return np.asarray(eval_elementwise(e, env)).dtype
        except (TypeError, ValueError, OverflowError) as exc:
            who = f"{stmt.target}: " if stmt is not None else ""
            raise TileSemanticError(f"{who}cannot compute '{format_expr(e)}': {exc}", _where(e, stmt)) from None

    def expr_type(self, expr: ir.Expr, stmt=None) -> Tuple[Tuple[int, ...], np.dtype]:
        """(broadcast shape, dtype) of an elementwise expression, as the reference computes it.

            >>> b = bind(Program((ir.Input("X", ("N",)),), ("Y",), (Assign("Y", Ref("X")),)), [(3,)], ["float32"])
            >>> b.expr_type(Binary("*", Ref("X"), Float(2.5)))
            ((3,), dtype('float32'))
        """
        return self._shape_of(expr, stmt), self._dtype_of(expr, stmt)

    def contraction_dtype(self, stmt: Contraction) -> np.dtype:
        """Same as the module-level :func:`contraction_dtype`."""
        return contraction_dtype(self, stmt)

    def key(self) -> str:
        """A stable hash of (program text, input shapes, input dtypes), for caches.

            >>> b = bind(Program((ir.Input("X", ("N",)),), ("Y",), (Assign("Y", Ref("X")),)), [(3,)], ["float32"])
            >>> len(b.key())
            64
        """
        blob = json.dumps(
            [str(self.program), [list(s) for s in self.shapes], [d.str for d in self.dtypes]], separators=(",", ":")
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    # -- construction -------------------------------------------------------

    def _bind_inputs(self) -> None:
        p = self.program
        first: Dict[str, Tuple[str, int, int]] = {}  # dim -> (tensor, axis, value)
        for inp, shape, dtype in zip(p.inputs, self.shapes, self.dtypes):
            if inp.dims is not None:
                if len(shape) != len(inp.dims):
                    raise ShapeError(
                        f"{inp.name}: expected rank {len(inp.dims)} {_dims_text(inp.dims)}, got shape {shape}", inp.loc
                    )
                for axis, (d, n) in enumerate(zip(inp.dims, shape)):
                    if isinstance(d, int):
                        if n != d:
                            raise ShapeError(
                                f"{inp.name}: axis {axis} is fixed to {d} in the header, got {n} (shape {shape})",
                                inp.loc,
                            )
                    elif d in first:
                        t0, a0, n0 = first[d]
                        if n0 != n:
                            raise ShapeError(
                                f"dimension {d}: {t0} axis {a0} has {n0} but {inp.name} axis {axis} has {n}", inp.loc
                            )
                    else:
                        first[d] = (inp.name, axis, n)
                        self._dims[d] = n
            self._tensors[inp.name] = TensorInfo(inp.name, shape, dtype, "input")

    def _bind_statement(self, s) -> None:
        outputs = set(self.program.outputs)
        if isinstance(s, DimDef):
            self._dims[s.target] = self._size_at(s.expr, s)
            return
        kind = "output" if s.target in outputs else "temp"
        if isinstance(s, Assign):
            shape, dtype = self.expr_type(s.expr, s)
            self._tensors[s.target] = TensorInfo(s.target, shape, dtype, kind)
            return
        shape = []
        for axis, z in enumerate(s.sizes):
            n = self._size_at(z, s)
            if n < 0:
                raise ShapeError(f"{s.output}: size of axis {axis} is {format_expr(z)} = {n} < 0", _where(z, s))
            shape.append(n)
        for op in s.operands:
            t = self._tensors[op.tensor]
            if len(t.shape) != len(op.indices):
                raise ShapeError(
                    f"{op.tensor}: indexed with {len(op.indices)} indices in the contraction for {s.output}, "
                    f"but it has rank {len(t.shape)} (shape {t.shape})",
                    _where(op, s),
                )
        for c in s.constraints:
            self._size_at(c.bound, c if c.loc is not None else s)
        self._check_index_divisors(s)
        self._check_bounded(s)
        if s.default is not None:
            d = self._tensors[s.default]
            if d.shape != tuple(shape):
                raise ShapeError(
                    f"{s.output}: default tensor {s.default} has shape {d.shape} but the output has shape {tuple(shape)}",
                    s.loc,
                )
        self._tensors[s.output] = TensorInfo(s.output, tuple(shape), contraction_dtype(self, s), kind)

    def _size_at(self, e: ir.Expr, stmt) -> int:
        try:
            return self.size(e)
        except ShapeError as exc:
            if exc.loc is None:
                raise ShapeError(exc.message, getattr(stmt, "loc", None)) from None
            raise

    def _check_bounded(self, s: Contraction) -> None:
        """Every index variable must be bounded by the program's own index expressions.

        Each index and constraint is two-sided (``0 <= e < size``), so the
        recession cone of the domain is the null space of the linear parts of
        all index expressions (an exact division ``e / c`` adds a variable
        ``q`` with ``c*q = e``).  A variable with a non-zero component in that
        null space can grow without limit.  The test ignores the sizes (they
        only move constant terms), so a program is either always accepted or
        always refused, whatever the shapes, and the compiled path and the
        oracle agree even on domains that happen to be empty.
        """
        names = list(s.index_vars())
        rows: List[Dict[str, Fraction]] = []
        counter = [0]

        def lin(e) -> Dict[str, Fraction]:
            if not any(isinstance(n, Index) for n in ir.walk(e)):
                return {}
            if isinstance(e, Index):
                return {e.name: Fraction(1)}
            if isinstance(e, ir.Unary):
                return {k: -v for k, v in lin(e.operand).items()}
            if isinstance(e, Binary) and e.op in ("+", "-"):
                a, b = lin(e.lhs), lin(e.rhs)
                sign = 1 if e.op == "+" else -1
                for k, v in b.items():
                    a[k] = a.get(k, Fraction(0)) + sign * v
                return a
            if isinstance(e, Binary) and e.op == "*":
                if not any(isinstance(n, Index) for n in ir.walk(e.lhs)):
                    c, f = self.size(e.lhs), lin(e.rhs)
                else:
                    c, f = self.size(e.rhs), lin(e.lhs)
                return {k: c * v for k, v in f.items()}
            if isinstance(e, Binary) and e.op == "/":
                q = f"/q{counter[0]}"
                counter[0] += 1
                c = self.size(e.rhs)
                row = {k: -v for k, v in lin(e.lhs).items()}
                row[q] = Fraction(c)
                rows.append(row)
                return {q: Fraction(1)}
            return {}

        for e in s.indices:
            rows.append(lin(e))
        for op in s.operands:
            for e in op.indices:
                rows.append(lin(e))
        for c in s.constraints:
            rows.append(lin(c.expr))
        cols = names + sorted({k for r in rows for k in r if k not in names})
        free = _null_space_support(rows, cols)
        unbounded = [v for v in names if v in free]
        if unbounded:
            raise TileSemanticError(
                f"index variable '{unbounded[0]}' of {s.output} has no finite range: no tensor index or "
                f"constraint bounds it (it can grow together with {', '.join(x for x in free if x in names and x != unbounded[0]) or 'nothing else'})",
                s.loc,
            )

    def _check_index_divisors(self, s: Contraction) -> None:
        exprs = list(s.indices) + [e for op in s.operands for e in op.indices] + [c.expr for c in s.constraints]
        for e in exprs:
            for n in ir.walk(e):
                if isinstance(n, Binary) and n.op == "/":
                    if self._size_at(n.rhs, s) == 0:
                        raise ShapeError(f"division by zero in index expression '{format_expr(n)}'", _where(n, s))
                    if not ir.index_names(n.lhs):
                        self._size_at(n.lhs, s)


def _as_shape(name: str, s) -> Tuple[int, ...]:
    try:
        shape = tuple(int(n) for n in s)
    except TypeError:
        raise ShapeError(f"{name}: shape must be a sequence of integers, got {s!r}") from None
    if any(n < 0 for n in shape):
        raise ShapeError(f"{name}: negative size in shape {shape}")
    return shape


def _as_dtype(name: str, d) -> np.dtype:
    supported = ", ".join(str(x) for x in SUPPORTED_DTYPES)
    try:
        dt = np.dtype(d)
    except TypeError:
        raise ShapeError(f"{name}: unsupported dtype {d!r} (supported: {supported})") from None
    if dt not in SUPPORTED_DTYPES:
        raise ShapeError(f"{name}: unsupported dtype {dt} (supported: {supported})")
    return np.dtype(dt.name)  # drop byte-order variants: '<f4' and '=f4' bind the same


def _null_space_support(rows: List[Dict[str, Fraction]], cols: List[str]) -> List[str]:
    """Columns that are non-zero in some vector of the null space of ``rows`` (exact arithmetic)."""
    mat = [[r.get(c, Fraction(0)) for c in cols] for r in rows]
    n = len(cols)
    pivots: List[int] = []
    row = 0
    for col in range(n):
        piv = next((r for r in range(row, len(mat)) if mat[r][col] != 0), None)
        if piv is None:
            continue
        mat[row], mat[piv] = mat[piv], mat[row]
        p = mat[row][col]
        mat[row] = [x / p for x in mat[row]]
        for r in range(len(mat)):
            if r != row and mat[r][col] != 0:
                f = mat[r][col]
                mat[r] = [x - f * y for x, y in zip(mat[r], mat[row])]
        pivots.append(col)
        row += 1
        if row == len(mat):
            break
    support = set()
    for fcol in (c for c in range(n) if c not in pivots):
        # Basis vector: free variable = 1, pivot variables = -(their row's coefficient).
        support.add(cols[fcol])
        for r, pcol in enumerate(pivots):
            if mat[r][fcol] != 0:
                support.add(cols[pcol])
    return [c for c in cols if c in support]


def bind(program: Program, shapes: Sequence[Sequence[int]], dtypes: Sequence[Any]) -> Bound:
    """Check ``program`` and specialise it to input ``shapes`` and ``dtypes``.

        >>> p = Program((ir.Input("I", ("H",)),), ("O",),
        ...             (DimDef("HO", Binary("/", Binary("+", Ref("H"), Int(1)), Int(2))),
        ...              Assign("O", Binary("*", Ref("I"), Ref("HO")))))
        >>> b = bind(p, [(5,)], ["int32"])
        >>> b.dims["HO"], b.tensors["O"]
        (3, TensorInfo(name='O', shape=(5,), dtype=dtype('int32'), kind='output'))
    """
    check(program)
    names = program.input_names
    if len(shapes) != len(names):
        raise ShapeError(f"expected {len(names)} inputs ({', '.join(names)}), got {len(shapes)}")
    if len(dtypes) != len(names):
        raise ShapeError(f"expected {len(names)} dtypes ({', '.join(names)}), got {len(dtypes)}")
    shp = tuple(_as_shape(n, s) for n, s in zip(names, shapes))
    dts = tuple(_as_dtype(n, d) for n, d in zip(names, dtypes))
    b = Bound(program, shp, dts)
    b._bind_inputs()
    for s in program.body:
        b._bind_statement(s)
    object.__setattr__(b, "_frozen", True)
    return b


def contraction_dtype(bound: Bound, stmt: Contraction) -> np.dtype:
    """Element type of a contraction's output (also ``Bound.contraction_dtype``).

    One operand: its dtype; ``+ * ==``: ``np.result_type`` of both; ``?``: the third's.

        >>> p = Program((ir.Input("A", ("N",)), ir.Input("B", ("N",))), ("O",),
        ...     (Contraction("O", (), (), "+", "*", (Access("A", (Index("i"),)), Access("B", (Index("i"),)))),))
        >>> b = bind(p, [(3,), (3,)], ["int32", "float32"])
        >>> contraction_dtype(b, p.body[0])
        dtype('float64')
    """
    dts = [bound.tensors[op.tensor].dtype for op in stmt.operands]
    if stmt.combo is None:
        return dts[0]
    if stmt.combo in ("+", "*", "=="):
        return np.result_type(dts[0], dts[1])
    if stmt.combo == "?":
        return dts[2]
    raise InternalError(f"unknown combination {stmt.combo!r}")
