"""A program bound to shapes and dtypes: :class:`Bound`, and what it answers.

:class:`Bound` holds every dimension's value and every tensor's
:class:`TensorInfo`; its queries evaluate sizes and infer the (shape, dtype)
of elementwise expressions, and :func:`contraction_dtype` types a
contraction's output.  Building one is :mod:`polytile.sema.binding`'s job.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Dict, Mapping, Tuple

import numpy as np

from .. import dtypes as D
from .. import ir
from ..errors import InternalError, ShapeError, TileSemanticError
from ..ir import Binary, Call, Cond, Contraction, Float, Int, Program, Ref, Unary, format_expr
from .checks import _where
from .functions import BUILTINS, eval_elementwise


@dataclass(frozen=True)
class TensorInfo:
    """A tensor of a bound program: ``kind`` is 'input', 'output' or 'temp'."""

    name: str
    shape: Tuple[int, ...]
    dtype: np.dtype
    kind: str


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
                                        "use 32 or 64 (see 'Not supported' in docs/tile-language.md)", _where(e, stmt))
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
