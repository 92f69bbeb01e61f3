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
    :data:`BUILTINS` lists the elementwise functions (their semantics live in
    :mod:`polytile.elemwise`).  ``as_float(X, bits)`` takes bits 16, 32 or
    64 in :func:`check`, but float16 is rejected by :func:`bind` because no
    backend computes in half precision; ``as_int``/``as_uint`` take 8, 16,
    32 or 64; ``index(T, axis)`` takes an integer literal ``axis < rank(T)``.
    Statement-level builtins (``reshape``, ``gather``, ``shape``,
    ``prng_*``) and PlaidML's inline definitions are put in normal form by
    :mod:`polytile.desugar` first.

Sizes
    Dimension statements and sizes fold as PlaidML folds them: ``/``
    truncates toward zero; ``max``, ``min``, ``broadcast`` and
    ``assert_*`` (a false assertion is a located error) are evaluated here.
    A size input's value (see :func:`polytile.desugar.size_inputs`) binds a
    dimension.

Element types
    Inputs may be any of :data:`SUPPORTED_DTYPES` (bool, signed and unsigned
    integers of 8 to 64 bits, float32, float64).  Elementwise expressions
    are typed as PlaidML 0.7.0 types them (:mod:`polytile.dtypes`,
    :mod:`polytile.elemwise`): literals are int32/float32, the result of an
    operation is the first widest operand type with floats beating
    integers, integer ``/`` truncates, comparisons give bool.
    :meth:`Bound.expr_type` runs the same evaluator as the reference on
    zero-size arrays, so the two always agree.

Contractions (:func:`contraction_dtype`)
    The promoted type (as above) of the operands, left to right; ``==``
    gives bool.  ``A == B ? C``: where ``A != B`` the point contributes the
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

from . import desugar, ir
from . import dtypes as D
from . import elemwise
from .errors import InternalError, NonAffineError, ShapeError, SourceLocation, TileSemanticError, recursion_room
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

SUPPORTED_DTYPES: Tuple[np.dtype, ...] = tuple(np.dtype(t) for t in D.SUPPORTED)


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


def _impl(name: str) -> Callable[..., Any]:
    """numpy implementation of builtin ``name`` with PlaidML's typing (see :mod:`polytile.elemwise`)."""

    def run(*args):
        env = {f"A{k}": np.asarray(a) for k, a in enumerate(args)}
        call = Call(name, tuple(Ref(f"A{k}") for k in range(len(args))))
        return elemwise.evaluate(call, env)

    return run


def _table() -> Dict[str, Builtin]:
    t: Dict[str, Builtin] = {}
    for name, arity in elemwise.FUNCTIONS.items():
        if name in elemwise.CASTS:
            t[name] = Builtin(name, arity, None, int_arg=1, int_choices=elemwise.CASTS[name][1])
        elif name == "index":
            t[name] = Builtin(name, arity, None, int_arg=1)
        else:
            t[name] = Builtin(name, arity, _impl(name))
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

def eval_elementwise(expr: ir.Expr, env: Mapping[str, Any]) -> Any:
    """Evaluate an elementwise expression with numpy, the way the reference does.

    ``env`` maps tensor names to arrays and dimension names to Python ints;
    typing follows PlaidML (:mod:`polytile.elemwise`).

        >>> eval_elementwise(Binary("*", Ref("X"), Float(2.5)), {"X": np.ones(2, np.float32)})
        array([2.5, 2.5], dtype=float32)
    """
    dims = {k: v for k, v in env.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return elemwise.evaluate(expr, env, dims)


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
        self.sizes = set(desugar.size_inputs(program))
        self.prng: Dict[str, Tuple[ir.Expr, ...]] = {}
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
            self.explain_not_dim(name, ref)
            self.err(f"'{name}' is a tensor, not a dimension: {role} may only use dimension names", ref, stmt)
        if want == _TENSOR and k == _DIM:
            self.err(f"'{name}' is a dimension, not a tensor: {role} must name tensors", ref, stmt)
        return k

    def explain_not_dim(self, name: str, used: Ref) -> None:
        """``P = max(0, Q - 1);`` read as a tensor because ``Q`` is no dimension: blame that statement."""
        defn = next((s for s in self.p.body if isinstance(s, Assign) and s.target == name), None)
        if defn is None:
            return
        nodes = list(ir.walk(defn.expr))
        dimlike = all(isinstance(n, (Int, Ref, Unary, Binary)) or
                      (isinstance(n, Call) and (n.func in desugar.DIM_FUNCTIONS or n.func.startswith("assert_")))
                      for n in nodes)
        culprits = [n for n in nodes if isinstance(n, Ref) and self.kind.get(n.name) != _DIM]
        if dimlike and culprits:
            bad = culprits[0]
            what = "a tensor" if bad.name in self.kind else "not defined"
            raise TileSemanticError(
                f"'{name}' is used as a dimension{_at(used.loc)}, but its definition uses '{bad.name}', which is "
                f"{what}: a dimension statement may only use integers, dimensions and "
                f"{', '.join(desugar.DIM_FUNCTIONS)}", _where(bad, defn))

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
        if isinstance(e, Binary) and e.op in ir.COMPARISONS and role == "an assertion":
            self.size_expr(e.lhs, stmt, role)
            self.size_expr(e.rhs, stmt, role)
            return
        if isinstance(e, Call) and (e.func in desugar.DIM_FUNCTIONS or e.func.startswith("assert_")):
            want = 1 if e.func.startswith("assert_") else 2
            if len(e.args) != want:
                self.err(f"{e.func} takes {want} argument{'s' if want > 1 else ''} here, got {len(e.args)}", e, stmt)
            for a in e.args:
                self.size_expr(a, stmt, "an assertion" if e.func.startswith("assert_") else role)
            return
        self.err(f"'{format_expr(e)}' is not allowed in {role}: only + - * / of integers and dimensions "
                 f"(and {', '.join(desugar.DIM_FUNCTIONS)})", e, stmt)

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
            if e.op not in ("-", "~"):
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
            if e.func in desugar.SPECIAL:
                return self.special(e, stmt)
            b = BUILTINS.get(e.func)
            if b is None:
                if e.func in desugar.DIM_FUNCTIONS or e.func.startswith("assert_"):
                    self.err(f"{e.func}() is evaluated when shapes are bound: its arguments must be integers and "
                             f"dimensions", e, stmt)
                known = sorted(set(BUILTINS) | set(desugar.SPECIAL) | set(desugar.MACROS))
                self.err(f"unknown function '{e.func}' (builtins: {', '.join(known)})", e, stmt)
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
                elif b.name == "reverse_grad" and pos == 1:
                    continue  # the gradient scale: unused in the forward pass
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

    def special(self, e: Call, stmt) -> Optional[int]:
        """reshape / gather / shape / prng_*: whole right sides (normalize() hoisted nested ones)."""
        if not isinstance(stmt, Assign) or stmt.expr is not e:
            self.err(f"{e.func}() must be the whole right side of a statement", e, stmt)
        want = {"gather": 2, "shape": 1, "prng_state": 1, "prng_value": 1}
        if e.func in want and len(e.args) != want[e.func]:
            self.err(f"{e.func} takes {want[e.func]} argument{'s' if want[e.func] > 1 else ''}, got {len(e.args)}",
                     e, stmt)
        if e.func in ("reshape", "prng_step") and not e.args:
            self.err(f"{e.func} needs a tensor argument", e, stmt)
        tensors = e.args if e.func == "gather" else e.args[:1]
        for a in tensors:
            if not isinstance(a, Ref):
                self.err(f"{e.func}: argument '{format_expr(a)}' must name a tensor", a, stmt)
            self.lookup(a, stmt, _TENSOR, f"{e.func}'s tensor arguments")
        for a in e.args[1:] if e.func in ("reshape", "prng_step") else ():
            self.size_expr(a, stmt, f"a size argument of {e.func}")
        if e.func == "shape" or e.func == "prng_value":
            return 1 if e.func == "shape" else len(self.prng.get(e.args[0].name, ())) or None
        if e.func == "prng_step":
            self.prng[stmt.target] = tuple(e.args[1:])
            return 2
        if e.func == "prng_state":
            return 2
        if e.func == "reshape":
            return len(e.args) - 1
        return None

    # -- statements -------------------------------------------------------

    def header(self) -> None:
        seen_in: Dict[str, Any] = {}
        for inp in self.p.inputs:
            if inp.name in seen_in:
                raise TileSemanticError(f"duplicate input name '{inp.name}'", inp.loc)
            seen_in[inp.name] = inp
            if inp.name in self.sizes:  # a size input: its value binds a dimension
                self.define(inp.name, _DIM, None, inp)
                continue
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
            role = "an assertion" if isinstance(s.expr, Call) and s.expr.func.startswith("assert_") else \
                "a dimension definition"
            self.size_expr(s.expr, s, role)
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

    def literals(self) -> None:
        """Integer literals must fit 64 bits: C would wrap them silently."""
        for stmt in self.p.body:
            exprs = ([stmt.expr] if not isinstance(stmt, Contraction) else
                     list(stmt.indices) + list(stmt.sizes) + [e for op in stmt.operands for e in op.indices]
                     + [e for c in stmt.constraints for e in (c.expr, c.bound)])
            for e in exprs:
                for n in ir.walk(e):
                    if isinstance(n, Int) and not -2 ** 63 <= n.value < 2 ** 63:
                        self.err(f"integer literal {n.value} does not fit in 64 bits", n, stmt)

    def run(self) -> None:
        self.literals()
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
    with recursion_room():
        _Checker(desugar.normalize(program)).run()


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

    __slots__ = ("program", "dims", "tensors", "shapes", "dtypes", "sizes", "prng", "_dims", "_tensors", "_frozen")

    def __init__(self, program: Program, shapes: Tuple[Tuple[int, ...], ...], dtypes: Tuple[np.dtype, ...],
                 sizes: Mapping[str, int] = MappingProxyType({})):
        object.__setattr__(self, "_frozen", False)
        self.program = program
        self.shapes = shapes
        self.dtypes = dtypes
        # Inputs passed as Python numbers (PlaidML's Integer/Real): size inputs and other constants.
        self.sizes = MappingProxyType(dict(sizes))
        self.prng: Dict[str, Tuple[int, ...]] = {}  # prng_step target -> shape of its values
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
        if isinstance(expr, Binary) and expr.op in ("+", "-", "*", "/") + ir.COMPARISONS:
            a, b = self.size(expr.lhs), self.size(expr.rhs)
            if expr.op == "+":
                return a + b
            if expr.op == "-":
                return a - b
            if expr.op == "*":
                return a * b
            if expr.op in ir.COMPARISONS:
                return int({"==": a == b, "!=": a != b, "<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[expr.op])
            if b == 0:
                why = "" if isinstance(expr.rhs, Int) else f" ({format_expr(expr.rhs)} = 0)"
                raise ShapeError(f"division by zero in '{format_expr(expr)}'{why}", expr.loc)
            # PlaidML folds sizes in double precision and truncates toward zero.
            q = abs(a) // abs(b)
            return q if (a < 0) == (b < 0) else -q
        if isinstance(expr, Call) and expr.func in ("max", "min", "broadcast") and len(expr.args) == 2:
            a, b = self.size(expr.args[0]), self.size(expr.args[1])
            if expr.func == "max":
                return b if a < b else a
            if expr.func == "min":
                return a if a < b else b
            if a != b and a != 1 and b != 1:
                raise ShapeError(f"broadcast({a}, {b}): sizes {a} and {b} do not broadcast", expr.loc)
            return b if a == 1 else a
        if isinstance(expr, Call) and expr.func.startswith("assert_") and len(expr.args) == 1:
            v = self.size(expr.args[0])
            if v == 0:
                raise ShapeError(f"assertion {expr.func} failed: '{format_expr(expr.args[0])}' is false "
                                 f"for these shapes ({self._dims_of(expr.args[0])})", expr.loc)
            return v
        raise TileSemanticError(f"'{format_expr(expr)}' is not an integer size expression", getattr(expr, "loc", None))

    def _dims_of(self, e: ir.Expr) -> str:
        names = sorted({n.name for n in ir.walk(e) if isinstance(n, Ref) and n.name in self._dims})
        return ", ".join(f"{n} = {self._dims[n]}" for n in names) or "no dimensions"

    def _shape_of(self, e: ir.Expr, stmt) -> Tuple[int, ...]:
        if isinstance(e, (Int, Float)):
            return ()
        if isinstance(e, Ref):
            if e.name in self._tensors:
                return self._tensors[e.name].shape
            if e.name in self._dims or e.name in self.sizes:
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
            if b.name == "reverse_grad":
                return self._shape_of(e.args[0], stmt)
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
                                        "use 32 or 64 (listed in README's unsupported builtins)", _where(e, stmt))
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
        # ranks: PlaidML's types never depend on values or sizes, so this is
        # exactly the dtype the reference will produce.
        env: Dict[str, Any] = dict(self.sizes)
        env.update(self._dims)
        for name, t in self._tensors.items():
            env[name] = np.empty((0,) * len(t.shape), dtype=t.dtype)
        try:
            with np.errstate(all="ignore"):
                return np.asarray(eval_elementwise(e, env)).dtype
        except ShapeError as exc:
            if exc.loc is None:
                raise ShapeError(exc.message, _where(e, stmt)) from None
            raise
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
            [str(self.program), [list(s) for s in self.shapes], [d.str for d in self.dtypes], sorted(self.sizes.items())],
            separators=(",", ":"),
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    # -- construction -------------------------------------------------------

    def _bind_inputs(self) -> None:
        p = self.program
        first: Dict[str, Tuple[str, int, int]] = {}  # dim -> (tensor, axis, value)
        sized = set(desugar.size_inputs(p)) if self.sizes else set()
        read_as_tensors = _tensor_uses(p) if self.sizes else set()
        for inp, shape, dtype in zip(p.inputs, self.shapes, self.dtypes):
            if inp.name in self.sizes:
                value = self.sizes[inp.name]
                if inp.name in sized:
                    if not isinstance(value, int):
                        raise ShapeError(f"{inp.name} is used as a size: pass one integer, got {value!r}", inp.loc)
                    self._dims[inp.name] = value
                elif inp.name in read_as_tensors:
                    # A constant read as a tensor too (PlaidML's ArgMax and average pooling: ``=(One[])``):
                    # also a 0-d input, int32 as PlaidML types every Integer/Real.
                    self._tensors[inp.name] = TensorInfo(inp.name, (), np.dtype("int32"), "input")
                continue  # a constant (PlaidML's Integer/Real): folded into elementwise code
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
        if isinstance(s, Assign) and isinstance(s.expr, Call) and s.expr.func in desugar.SPECIAL:
            shape, dtype = self._special(s.expr, s)
            self._tensors[s.target] = TensorInfo(s.target, shape, np.dtype(dtype), kind)
            return
        if isinstance(s, Assign):
            shape, dtype = self.expr_type(s.expr, s)
            self._tensors[s.target] = TensorInfo(s.target, shape, dtype, kind)
            return
        shape = []
        for axis, z in enumerate(s.sizes):
            n = self._size_at(z, s)
            if n < 0:
                raise ShapeError(f"{s.output}: size of axis {axis} is {format_expr(z)} = {n} < 0", _where(z, s))
            if n >= 2 ** 62:
                raise ShapeError(f"{s.output}: size of axis {axis} is {format_expr(z)} = {n}, too large to index",
                                 _where(z, s))
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

    def _special(self, e: Call, s) -> Tuple[Tuple[int, ...], str]:
        """Shape and dtype of a statement-level builtin (PlaidML's TypeCheck for each)."""
        f = e.func
        src = self._tensors[e.args[0].name]
        if f == "reshape":
            shape = tuple(self._size_at(a, s) for a in e.args[1:])
            if any(n < 0 for n in shape):
                raise ShapeError(f"reshape: negative size in {shape}", _where(e, s))
            if int(np.prod(shape, dtype=object)) != int(np.prod(src.shape, dtype=object)):
                raise ShapeError(f"reshape: {src.name} has shape {src.shape} ({int(np.prod(src.shape))} elements), "
                                 f"which cannot be viewed as {shape}", _where(e, s))
            return shape, src.dtype.name
        if f == "gather":
            idx = self._tensors[e.args[1].name]
            if not src.shape:
                raise ShapeError(f"gather: the data {src.name} must have at least one dimension", _where(e, s))
            if idx.dtype.kind not in "iu":
                raise ShapeError(f"gather: the indices {idx.name} must be integers, got {idx.dtype}", _where(e, s))
            return idx.shape + src.shape[1:], src.dtype.name
        if f == "shape":
            return (len(src.shape),), "int32"
        if f == "prng_step":
            if src.shape != PRNG_STATE_SHAPE or src.dtype != np.uint32:
                raise ShapeError(f"prng_step: the state {src.name} must be uint32 of shape {PRNG_STATE_SHAPE}, "
                                 f"got {src.dtype} {src.shape}", _where(e, s))
            self.prng[s.target] = tuple(self._size_at(a, s) for a in e.args[1:])
            return PRNG_STATE_SHAPE, "uint32"
        if src.name not in self.prng:
            raise ShapeError(f"{f}: '{src.name}' is not the result of prng_step", _where(e, s))
        if f == "prng_state":
            return PRNG_STATE_SHAPE, "uint32"
        return self.prng[src.name], "float32"

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


def _tensor_uses(program: Program) -> set:
    """Names read as tensors: contraction operands, defaults, statement-level builtins' tensor arguments."""
    out = set()
    for s in program.body:
        if isinstance(s, Contraction):
            out.update(op.tensor for op in s.operands)
            if s.default:
                out.add(s.default)
        elif isinstance(s, Assign) and isinstance(s.expr, Call) and s.expr.func in desugar.SPECIAL:
            out.update(a.name for a in s.expr.args if isinstance(a, Ref))
    return out


#: PlaidML's random-number state: three uint32 Tausworthe words for each of 2048 lanes.
PRNG_STATE_SHAPE = (3, 2048)


def bind(program: Program, shapes: Sequence[Sequence[int]], dtypes: Sequence[Any],
         sizes: Optional[Mapping[str, int]] = None) -> Bound:
    """Check ``program`` and specialise it to input ``shapes`` and ``dtypes``.

        >>> p = Program((ir.Input("I", ("H",)),), ("O",),
        ...             (DimDef("HO", Binary("/", Binary("+", Ref("H"), Int(1)), Int(2))),
        ...              Assign("O", Binary("*", Ref("I"), Ref("HO")))))
        >>> b = bind(p, [(5,)], ["int32"])
        >>> b.dims["HO"], b.tensors["O"]
        (3, TensorInfo(name='O', shape=(5,), dtype=dtype('int32'), kind='output'))
    """
    program = desugar.normalize(program)
    check(program)
    names = program.input_names
    need = desugar.size_inputs(program)
    sizes = {n: v for n, v in (sizes or {}).items()}
    missing = [n for n in need if n not in sizes]
    if missing:
        raise ShapeError(f"size input(s) {', '.join(missing)} need a value (an integer passed at call time)")
    scalar = {i.name for i in program.inputs if not i.dims}
    for n, v in sizes.items():
        if n not in scalar:
            raise ShapeError(f"{n}: only an input declared without dimensions can be a constant, got {v!r}")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ShapeError(f"{n}: a constant input must be a Python int or float, got {type(v).__name__}")
    if len(shapes) != len(names):
        raise ShapeError(f"expected {len(names)} inputs ({', '.join(names)}), got {len(shapes)}")
    if len(dtypes) != len(names):
        raise ShapeError(f"expected {len(names)} dtypes ({', '.join(names)}), got {len(dtypes)}")
    shp = tuple(_as_shape(n, s) for n, s in zip(names, shapes))
    dts = tuple(_as_dtype(n, d) for n, d in zip(names, dtypes))
    b = Bound(program, shp, dts, sizes)
    b._bind_inputs()
    for s in program.body:
        b._bind_statement(s)
    object.__setattr__(b, "_frozen", True)
    return b


def contraction_dtype(bound: Bound, stmt: Contraction) -> np.dtype:
    """Element type of a contraction's output (also ``Bound.contraction_dtype``).

    The operands' promoted type (:func:`polytile.dtypes.promote`); ``==`` gives bool.

        >>> p = Program((ir.Input("A", ("N",)), ir.Input("B", ("N",))), ("O",),
        ...     (Contraction("O", (), (), "+", "*", (Access("A", (Index("i"),)), Access("B", (Index("i"),)))),))
        >>> b = bind(p, [(3,), (3,)], ["int32", "float32"])
        >>> contraction_dtype(b, p.body[0])
        dtype('float64')
    """
    dts = [bound.tensors[op.tensor].dtype for op in stmt.operands]
    if stmt.combo == "==":
        return np.dtype(bool)
    if stmt.combo in (None, "+", "*", "?"):
        return np.dtype(D.promote(dts))
    raise InternalError(f"unknown combination {stmt.combo!r}")
