"""Binding a checked program to input shapes and dtypes: :func:`bind`.

:func:`bind` checks the program, validates the arrays' shapes and dtypes,
then fills a :class:`~polytile.sema.bound.Bound` input by input and
statement by statement, with the checks that need concrete sizes (output
sizes, ranks of operands, index divisors, bounded index variables,
statement-level builtins).
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .. import desugar, ir
from .. import dtypes as D
from ..errors import ShapeError, TileSemanticError
from ..ir import Assign, Binary, Call, Contraction, DimDef, Index, Program, Ref, format_expr
from .bound import Bound, TensorInfo, contraction_dtype
from .checks import _where, check

SUPPORTED_DTYPES: Tuple[np.dtype, ...] = tuple(np.dtype(t) for t in D.SUPPORTED)

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
    _bind_inputs(b)
    for s in program.body:
        _bind_statement(b, s)
    object.__setattr__(b, "_frozen", True)
    return b


def _bind_inputs(bound: Bound) -> None:
    p = bound.program
    first: Dict[str, Tuple[str, int, int]] = {}  # dim -> (tensor, axis, value)
    sized = set(desugar.size_inputs(p)) if bound.sizes else set()
    read_as_tensors = _tensor_uses(p) if bound.sizes else set()
    for inp, shape, dtype in zip(p.inputs, bound.shapes, bound.dtypes):
        if inp.name in bound.sizes:
            value = bound.sizes[inp.name]
            if inp.name in sized:
                if not isinstance(value, int):
                    raise ShapeError(f"{inp.name} is used as a size: pass one integer, got {value!r}", inp.loc)
                bound._dims[inp.name] = value
            elif inp.name in read_as_tensors:
                # A constant read as a tensor too (PlaidML's ArgMax and average pooling: ``=(One[])``):
                # also a 0-d input, int32 as PlaidML types every Integer/Real.
                bound._tensors[inp.name] = TensorInfo(inp.name, (), np.dtype("int32"), "input")
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
                    bound._dims[d] = n
        bound._tensors[inp.name] = TensorInfo(inp.name, shape, dtype, "input")


def _bind_statement(bound: Bound, s) -> None:
    outputs = set(bound.program.outputs)
    if isinstance(s, DimDef):
        bound._dims[s.target] = _size_at(bound, s.expr, s)
        return
    kind = "output" if s.target in outputs else "temp"
    if isinstance(s, Assign) and isinstance(s.expr, Call) and s.expr.func in desugar.SPECIAL:
        shape, dtype = _special(bound, s.expr, s)
        bound._tensors[s.target] = TensorInfo(s.target, shape, np.dtype(dtype), kind)
        return
    if isinstance(s, Assign):
        shape, dtype = bound.expr_type(s.expr, s)
        bound._tensors[s.target] = TensorInfo(s.target, shape, dtype, kind)
        return
    shape = []
    for axis, z in enumerate(s.sizes):
        n = _size_at(bound, z, s)
        if n < 0:
            raise ShapeError(f"{s.output}: size of axis {axis} is {format_expr(z)} = {n} < 0", _where(z, s))
        if n >= 2 ** 62:
            raise ShapeError(f"{s.output}: size of axis {axis} is {format_expr(z)} = {n}, too large to index",
                             _where(z, s))
        shape.append(n)
    for op in s.operands:
        t = bound._tensors[op.tensor]
        if len(t.shape) != len(op.indices):
            raise ShapeError(
                f"{op.tensor}: indexed with {len(op.indices)} indices in the contraction for {s.output}, "
                f"but it has rank {len(t.shape)} (shape {t.shape})",
                _where(op, s),
            )
    for c in s.constraints:
        _size_at(bound, c.bound, c if c.loc is not None else s)
    _check_index_divisors(bound, s)
    _check_bounded(bound, s)
    if s.default is not None:
        d = bound._tensors[s.default]
        if d.shape != tuple(shape):
            raise ShapeError(
                f"{s.output}: default tensor {s.default} has shape {d.shape} but the output has shape {tuple(shape)}",
                s.loc,
            )
    bound._tensors[s.output] = TensorInfo(s.output, tuple(shape), contraction_dtype(bound, s), kind)


def _special(bound: Bound, e: Call, s) -> Tuple[Tuple[int, ...], str]:
    """Shape and dtype of a statement-level builtin (PlaidML's TypeCheck for each)."""
    f = e.func
    src = bound._tensors[e.args[0].name]
    if f == "reshape":
        shape = tuple(_size_at(bound, a, s) for a in e.args[1:])
        if any(n < 0 for n in shape):
            raise ShapeError(f"reshape: negative size in {shape}", _where(e, s))
        if int(np.prod(shape, dtype=object)) != int(np.prod(src.shape, dtype=object)):
            raise ShapeError(f"reshape: {src.name} has shape {src.shape} ({int(np.prod(src.shape))} elements), "
                             f"which cannot be viewed as {shape}", _where(e, s))
        return shape, src.dtype.name
    if f == "gather":
        idx = bound._tensors[e.args[1].name]
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
        bound.prng[s.target] = tuple(_size_at(bound, a, s) for a in e.args[1:])
        return PRNG_STATE_SHAPE, "uint32"
    if src.name not in bound.prng:
        raise ShapeError(f"{f}: '{src.name}' is not the result of prng_step", _where(e, s))
    if f == "prng_state":
        return PRNG_STATE_SHAPE, "uint32"
    return bound.prng[src.name], "float32"


def _size_at(bound: Bound, e: ir.Expr, stmt) -> int:
    try:
        return bound.size(e)
    except ShapeError as exc:
        if exc.loc is None:
            raise ShapeError(exc.message, getattr(stmt, "loc", None)) from None
        raise


def _check_bounded(bound: Bound, s: Contraction) -> None:
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
                c, f = bound.size(e.lhs), lin(e.rhs)
            else:
                c, f = bound.size(e.rhs), lin(e.lhs)
            return {k: c * v for k, v in f.items()}
        if isinstance(e, Binary) and e.op == "/":
            q = f"/q{counter[0]}"
            counter[0] += 1
            c = bound.size(e.rhs)
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


def _check_index_divisors(bound: Bound, s: Contraction) -> None:
    exprs = list(s.indices) + [e for op in s.operands for e in op.indices] + [c.expr for c in s.constraints]
    for e in exprs:
        for n in ir.walk(e):
            if isinstance(n, Binary) and n.op == "/":
                if _size_at(bound, n.rhs, s) == 0:
                    raise ShapeError(f"division by zero in index expression '{format_expr(n)}'", _where(n, s))
                if not ir.index_names(n.lhs):
                    _size_at(bound, n.lhs, s)


def _dims_text(dims) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


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
