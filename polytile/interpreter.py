"""The reference interpreter: numpy only, the oracle every compiled kernel is tested against.

It shares nothing with the polyhedral machinery (no isl): only :mod:`polytile.ir`,
:mod:`polytile.sema` and numpy, so a bug in the compiler cannot hide in both.

A contraction is executed literally from its definition (see
``tile-language.md``): the iteration domain is every integer assignment of
the index variables such that every index of every tensor is in bounds,
every constraint ``c < E`` holds as ``0 <= c < E``, and every division in an
index polynomial whose numerator contains index variables is exact.  To
enumerate it, each index variable first gets a finite range:

1. every index expression is made affine, an exact division ``e / c``
   becoming a fresh variable ``q`` with ``c*q = e``;
2. interval propagation over the resulting linear (in)equalities bounds the
   variables; any still unbounded get bounds from Fourier-Motzkin
   elimination (exact, integer arithmetic); a variable that is unbounded
   even then has no finite range and is an error;
3. the box of ranges is walked in chunks (at most :data:`CHUNK` points),
   masking points outside the domain, gathering operands, combining and
   folding into the output with ``ufunc.at``.  ``=`` checks that no cell is
   written twice and raises :class:`~polytile.errors.CollisionError` naming
   both points.

A plain tensor contraction (``+`` of one operand or a product of two, every
index a bare variable, no constraints, no default: matmul, batched matmul,
transposes, row sums) has the whole box as its domain and is evaluated by
``numpy.einsum`` instead (:func:`_einsum_contraction`, exact for integers,
float64 for floats); a property test checks it against the enumeration.

Elementwise statements use :func:`polytile.sema.eval_elementwise`, the same
evaluator that types them.  Floating-point warnings (overflow, log of a
negative number) are silenced: the results are numpy's inf/nan, as in C.

Example::

    >>> from polytile import ir
    >>> i, j, k = ir.Index("i"), ir.Index("j"), ir.Index("k")
    >>> p = ir.Program((ir.Input("A", ("M", "K")), ir.Input("B", ("K", "N"))), ("C",),
    ...     (ir.Contraction("C", (i, j), (ir.Ref("M"), ir.Ref("N")), "+", "*",
    ...                     (ir.Access("A", (i, k)), ir.Access("B", (k, j)))),))
    >>> run(p, np.array([[1, 2]]), np.array([[3], [4]]))
    array([[11]])
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import desugar, ir, sema
from . import dtypes as D
from .errors import CollisionError, InternalError, NonAffineError, ShapeError, TileSemanticError, recursion_room
from .memory import too_large
from .ir import Binary, Contraction, DimDef, Float, Index, Int, Program, Ref, Unary, format_expr

__all__ = ["CHUNK", "evaluate", "run", "index_ranges"]

#: Points enumerated per chunk: bounds the interpreter's memory (a few arrays of this many elements).
CHUNK = 1 << 22

_AT = {"+": np.add, "*": np.multiply, ">": np.maximum, "<": np.minimum}

INF = math.inf


# ---------------------------------------------------------------------------
# Affine forms
# ---------------------------------------------------------------------------


@dataclass
class _Form:
    """``const + sum(coef * var)`` over variable ids (index variables, then quotients)."""

    coefs: Dict[int, int] = field(default_factory=dict)
    const: int = 0

    def is_const(self) -> bool:
        return not self.coefs

    def scaled(self, k: int) -> "_Form":
        if k == 0:
            return _Form({}, 0)
        return _Form({v: a * k for v, a in self.coefs.items()}, self.const * k)

    def plus(self, other: "_Form", sign: int = 1) -> "_Form":
        coefs = dict(self.coefs)
        for v, a in other.coefs.items():
            c = coefs.get(v, 0) + sign * a
            if c:
                coefs[v] = c
            else:
                coefs.pop(v, None)
        return _Form(coefs, self.const + sign * other.const)


@dataclass
class _Quot:
    var: int
    num: _Form
    div: int


class _System:
    """The linear description of one contraction's iteration domain."""

    def __init__(self, bound: sema.Bound, stmt: Contraction):
        self.bound = bound
        self.stmt = stmt
        self.names: List[str] = list(stmt.index_vars())
        self.nidx = len(self.names)
        self.var = {n: k for k, n in enumerate(self.names)}
        self.quots: List[_Quot] = []
        # rows: (form, lo, hi) meaning lo <= form <= hi (inclusive integers)
        self.rows: List[Tuple[_Form, int, int]] = []
        self.checks: List[Tuple[_Form, int, int]] = []  # the rows a point must satisfy (not quotient defs)

        out = bound.tensors[stmt.output]
        self.out_forms = [self.form(e) for e in stmt.indices]
        for f, n in zip(self.out_forms, out.shape):
            self.checks.append((f, 0, n - 1))
        self.op_forms: List[List[_Form]] = []
        for op in stmt.operands:
            shape = bound.tensors[op.tensor].shape
            forms = [self.form(e) for e in op.indices]
            self.op_forms.append(forms)
            for f, n in zip(forms, shape):
                self.checks.append((f, 0, n - 1))
        for c in stmt.constraints:
            self.checks.append((self.form(c.expr), 0, bound.size(c.bound) - 1))
        self.rows = list(self.checks)
        for q in self.quots:
            self.rows.append((_Form({q.var: q.div}).plus(q.num, -1), 0, 0))

    @property
    def nvars(self) -> int:
        return self.nidx + len(self.quots)

    def form(self, e: ir.Expr) -> _Form:
        if isinstance(e, Int):
            return _Form({}, int(e.value))
        if isinstance(e, Index):
            return _Form({self.var[e.name]: 1}, 0)
        if isinstance(e, Ref):
            return _Form({}, self.bound.dims[e.name])
        if isinstance(e, Unary) and e.op == "-":
            return self.form(e.operand).scaled(-1)
        if isinstance(e, Binary) and e.op in ("+", "-"):
            return self.form(e.lhs).plus(self.form(e.rhs), 1 if e.op == "+" else -1)
        if isinstance(e, Binary) and e.op == "*":
            a, b = self.form(e.lhs), self.form(e.rhs)
            if a.is_const():
                return b.scaled(a.const)
            if b.is_const():
                return a.scaled(b.const)
            raise NonAffineError(f"index expression '{format_expr(e)}' is not affine", e.loc or self.stmt.loc)
        if isinstance(e, Binary) and e.op == "/":
            d = self.form(e.rhs)
            if not d.is_const():
                raise NonAffineError(f"index expression '{format_expr(e)}' is not affine", e.loc or self.stmt.loc)
            c = d.const
            if c == 0:
                raise ShapeError(f"division by zero in index expression '{format_expr(e)}'", e.loc or self.stmt.loc)
            if not ir.index_names(e.lhs):
                # A constant numerator is a size-like expression: floor division.
                return _Form({}, self.bound.size(e.lhs) // c)
            n = self.form(e.lhs)
            if n.const % c == 0 and all(a % c == 0 for a in n.coefs.values()):
                return _Form({v: a // c for v, a in n.coefs.items()}, n.const // c)
            q = _Quot(self.nidx + len(self.quots), n, c)
            self.quots.append(q)
            return _Form({q.var: 1}, 0)
        if isinstance(e, Float):
            raise TileSemanticError(f"float literal {format_expr(e)} in an index expression", e.loc or self.stmt.loc)
        raise TileSemanticError(f"'{format_expr(e)}' is not allowed in an index expression", self.stmt.loc)


# ---------------------------------------------------------------------------
# Bounding the variables
# ---------------------------------------------------------------------------


def _floordiv(p, a: int):
    return p if p in (INF, -INF) else p // a


def _ceildiv(p, a: int):
    return p if p in (INF, -INF) else -((-p) // a)


def _propagate(nvars: int, rows, lo=None, hi=None, rounds: int = 200):
    """Interval propagation; returns (lo, hi) lists, or None if infeasible."""
    L = list(lo) if lo is not None else [-INF] * nvars
    U = list(hi) if hi is not None else [INF] * nvars
    for _ in range(rounds):
        changed = False
        for f, rlo, rhi in rows:
            terms = list(f.coefs.items())
            mins, maxs = [], []
            for v, a in terms:
                x, y = (a * L[v], a * U[v]) if a > 0 else (a * U[v], a * L[v])
                mins.append(x)
                maxs.append(y)
            total_min = sum(mins) + f.const
            total_max = sum(maxs) + f.const
            if total_min > rhi or total_max < rlo:
                return None
            for t, (v, a) in enumerate(terms):
                # Sums with one infinite term cannot be "un-added"; recompute without it.
                rest_min = f.const + sum(m for s, m in enumerate(mins) if s != t)
                rest_max = f.const + sum(m for s, m in enumerate(maxs) if s != t)
                low, high = rlo - rest_max, rhi - rest_min  # a * x_v in [low, high]
                if a > 0:
                    nl, nu = _ceildiv(low, a), _floordiv(high, a)
                else:
                    nl, nu = _ceildiv(-high, -a), _floordiv(-low, -a)
                if nl > L[v]:
                    L[v] = nl
                    changed = True
                if nu < U[v]:
                    U[v] = nu
                    changed = True
                if L[v] > U[v]:
                    return None
                # Refresh this variable's term so later terms of the row use the tightened range.
                x, y = (a * L[v], a * U[v]) if a > 0 else (a * U[v], a * L[v])
                mins[t], maxs[t] = x, y
        if not changed:
            break
    return L, U


def _fm_bounds(nvars: int, ineqs: List[Tuple[Tuple[int, ...], int]], target: int, limit: int = 20000):
    """Bounds of ``target`` by Fourier-Motzkin elimination of every other variable.

    ``ineqs`` are ``(a, b)`` meaning ``a . x + b >= 0``.  Returns (lo, hi)
    (possibly infinite) or None if the system has no rational solution.
    """

    def norm(a, b):
        g = 0
        for x in a:
            g = math.gcd(g, x)
        if g > 1:
            # Integer points satisfy the tightened inequality too.
            return tuple(x // g for x in a), b // g
        return tuple(a), b

    cur = {norm(a, b) for a, b in ineqs}
    others = [v for v in range(nvars) if v != target]
    while True:
        live = [v for v in others if any(a[v] for a, _ in cur)]
        if not live:
            break
        # Eliminate the variable producing the fewest new inequalities.
        def cost(v):
            pos = sum(1 for a, _ in cur if a[v] > 0)
            neg = sum(1 for a, _ in cur if a[v] < 0)
            return pos * neg - pos - neg

        v = min(live, key=cost)
        pos = [(a, b) for a, b in cur if a[v] > 0]
        neg = [(a, b) for a, b in cur if a[v] < 0]
        nxt = {(a, b) for a, b in cur if a[v] == 0}
        for ap, bp in pos:
            for an, bn in neg:
                mp, mn = -an[v], ap[v]
                a = tuple(mp * x + mn * y for x, y in zip(ap, an))
                nxt.add(norm(a, mp * bp + mn * bn))
        if len(nxt) > limit:
            raise TileSemanticError("cannot bound the iteration domain: the constraint system is too large")
        cur = nxt
    lo, hi = -INF, INF
    for a, b in cur:
        t = a[target]
        if t == 0:
            if b < 0:
                return None
        elif t > 0:
            lo = max(lo, _ceildiv(-b, t))
        else:
            hi = min(hi, _floordiv(b, -t))
    if lo > hi:
        return None
    return lo, hi


def _bound_vars(system: _System):
    """Finite (lo, hi) for every variable, or None for an empty domain."""
    n = system.nvars
    res = _propagate(n, system.rows)
    if res is None:
        return None
    L, U = res
    missing = [v for v in range(n) if L[v] == -INF or U[v] == INF]
    if missing:
        ineqs: List[Tuple[Tuple[int, ...], int]] = []

        def add(f: _Form, sign: int, k: int):
            a = [0] * n
            for v, c in f.coefs.items():
                a[v] = sign * c
            ineqs.append((tuple(a), sign * f.const + k))

        for f, lo, hi in system.rows:
            add(f, 1, -lo)  # f - lo >= 0
            add(f, -1, hi)  # hi - f >= 0
        for v in range(n):
            unit = _Form({v: 1})
            if L[v] != -INF:
                add(unit, 1, -L[v])
            if U[v] != INF:
                add(unit, -1, U[v])
        for v in missing:
            r = _fm_bounds(n, ineqs, v)
            if r is None:
                return None
            L[v], U[v] = max(L[v], r[0]), min(U[v], r[1])
        res = _propagate(n, system.rows, L, U)
        if res is None:
            return None
        L, U = res
    for v in range(system.nidx):
        if L[v] == -INF or U[v] == INF:
            raise TileSemanticError(
                f"index variable '{system.names[v]}' of {system.stmt.output} has no finite range: "
                "no tensor index or constraint bounds it",
                system.stmt.loc,
            )
    return L, U


def index_ranges(bound: sema.Bound, stmt: Contraction) -> Optional[Dict[str, Tuple[int, int]]]:
    """Inclusive (lo, hi) boxes of a contraction's index variables; None if its domain is empty.

    The box contains the domain (it may be larger; points are masked later).

        >>> i, k = ir.Index("i"), ir.Index("k")
        >>> p = ir.Program((ir.Input("I", ("N",)),), ("O",),
        ...     (ir.Contraction("O", (i,), (ir.Ref("N"),), "+", None, (ir.Access("I", (k,)),),
        ...                     (ir.Constraint(Binary("-", i, k), ir.Ref("N")),)),))
        >>> index_ranges(sema.bind(p, [(4,)], ["float64"]), p.body[0])
        {'i': (0, 3), 'k': (0, 3)}
    """
    system = _System(bound, stmt)
    r = _bound_vars(system)
    if r is None:
        return None
    L, U = r
    return {name: (int(L[v]), int(U[v])) for v, name in enumerate(system.names)}


# ---------------------------------------------------------------------------
# Contractions
# ---------------------------------------------------------------------------


def _interval(f: _Form, box) -> Tuple[int, int]:
    lo = hi = f.const
    for v, a in f.coefs.items():
        l, u = box[v]
        if a > 0:
            lo, hi = lo + a * l, hi + a * u
        else:
            lo, hi = lo + a * u, hi + a * l
    return lo, hi


def _value(f: _Form, vals) -> Union[int, np.ndarray]:
    out: Union[int, np.ndarray] = f.const
    for v, a in f.coefs.items():
        out = out + (vals[v] if a == 1 else a * vals[v])
    return out


def _and(m, c):
    if c is True:
        return m
    return c if m is True else (m & c)


def _points_text(system: _System, lows, sizes, gid: int) -> str:
    coords = np.unravel_index(gid, sizes) if sizes else ()
    parts = [f"{n}={int(c) + lo}" for n, c, lo in zip(system.names, coords, lows)]
    return "(" + ", ".join(parts) + ")"


def _contraction(bound: sema.Bound, stmt: Contraction, env: Dict[str, np.ndarray]) -> np.ndarray:
    fast = _einsum_contraction(bound, stmt, env)
    return fast if fast is not None else _enumerate_contraction(bound, stmt, env)


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum_contraction(bound: sema.Bound, stmt: Contraction, env: Dict[str, np.ndarray]) -> Optional[np.ndarray]:
    """The fast path: a plain tensor contraction by ``numpy.einsum``; None when ``stmt`` is not one.

    Plain means: ``+`` of one operand or of a product of two, no constraints,
    no default, every index of every tensor a bare index variable (no
    variable twice in one tensor), each variable indexing axes of one size,
    every output variable read by an operand.  Then the domain is the whole
    box of those sizes and the definition is einsum's:
    ``C[i, j : M, N] = +(A[i, k] * B[k, j])`` is ``einsum("ab,bc->ac", A, B)``.

    Integers are computed in the output dtype, which is numpy's promotion of
    the operands, as in the enumeration; wrap-around is arithmetic modulo
    2**bits, where the order of the sum does not matter, so the result is
    identical.  Floats are computed in float64 and rounded once to the output
    dtype: identical whenever the enumeration is exact (integer-valued data,
    as the tuner uses), otherwise at least as accurate.
    ``tests/test_interpreter.py`` checks it against :func:`_enumerate_contraction`
    on random contractions.
    """
    dtype = bound.tensors[stmt.output].dtype
    if stmt.agg != "+" or stmt.combo not in (None, "*") or stmt.constraints or stmt.default is not None:
        return None
    if dtype.kind in "iu":
        compute = dtype
    elif dtype in (np.float32, np.float64):
        compute = np.dtype(np.float64)
    else:
        return None
    letter: Dict[str, str] = {}
    extent: Dict[str, int] = {}

    def subscripts(indices, shape) -> Optional[str]:
        text = ""
        for e, n in zip(indices, shape):
            if not isinstance(e, Index) or extent.setdefault(e.name, n) != n:
                return None
            if e.name not in letter:
                if len(letter) == len(_LETTERS):
                    return None
                letter[e.name] = _LETTERS[len(letter)]
            text += letter[e.name]
        return text if len(set(text)) == len(text) else None

    ins = [subscripts(op.indices, bound.tensors[op.tensor].shape) for op in stmt.operands]
    out = subscripts(stmt.indices, bound.tensors[stmt.output].shape)
    if out is None or any(s is None for s in ins) or not set(out) <= set("".join(ins)):
        return None
    arrays = [np.asarray(env[op.tensor]).astype(compute, copy=False) for op in stmt.operands]
    # optimize: a product goes through tensordot, i.e. BLAS for floats.
    r = np.einsum(",".join(ins) + "->" + out, *arrays, optimize=len(arrays) > 1)
    return np.asarray(r).astype(dtype)


def _enumerate_contraction(bound: sema.Bound, stmt: Contraction, env: Dict[str, np.ndarray]) -> np.ndarray:
    """The literal path: enumerate the domain's box in chunks, mask, gather, combine and fold (module doc)."""
    info = bound.tensors[stmt.output]
    dtype, shape = info.dtype, info.shape
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if stmt.default is not None:
        base = np.asarray(env[stmt.default]).astype(dtype).reshape(-1)
    else:
        base = np.zeros(size, dtype=dtype)

    system = _System(bound, stmt)
    box_all = _bound_vars(system)
    if box_all is None or size == 0:
        return base.reshape(shape)
    L, U = box_all
    nidx = system.nidx
    lows = [int(L[v]) for v in range(nidx)]
    sizes = [int(U[v]) - int(L[v]) + 1 for v in range(nidx)]

    agg = stmt.agg
    ident = sema.identity(agg, dtype)
    fill = ident if ident is not None else dtype.type(0)  # the '?' value where A != B
    if agg == "=":
        acc = np.zeros(size, dtype=dtype)
        writer = np.full(size, -1, dtype=np.int64)  # box-linear id of the point that wrote each cell
    else:
        acc = np.full(size, ident, dtype=dtype)
    reached = np.zeros(size, dtype=bool)

    # Row-major strides of the box, for point ids in collision reports.
    box_strides = [0] * nidx
    st = 1
    for v in reversed(range(nidx)):
        box_strides[v] = st
        st *= sizes[v]

    operands = [np.ascontiguousarray(env[op.tensor]).reshape(-1) for op in stmt.operands]
    op_shapes = [bound.tensors[op.tensor].shape for op in stmt.operands]

    for grids, chunk_box in _chunks(lows, sizes):
        vals: Dict[int, Union[int, np.ndarray]] = dict(enumerate(grids))
        box = dict(enumerate(chunk_box))
        mask: Union[bool, np.ndarray] = True
        for q in system.quots:
            num = _value(q.num, vals)
            mask = _and(mask, np.asarray(num % q.div == 0))
            vals[q.var] = num // q.div
            nl, nh = _interval(q.num, box)
            a, b = (nl, nh) if q.div > 0 else (nh, nl)
            box[q.var] = (-((-a) // q.div), b // q.div)  # ceil, floor: q's values over the chunk
        for f, lo, hi in system.checks:
            flo, fhi = _interval(f, box)
            if flo >= lo and fhi <= hi:
                continue  # implied by the chunk's box: no work
            if flo > hi or fhi < lo:
                mask = False
                break
            x = _value(f, vals)
            mask = _and(mask, (x >= lo) & (x <= hi))
        if mask is False:
            continue

        def flat(forms, shp):
            idx: Union[int, np.ndarray] = 0
            for f, n in zip(forms, shp):
                x = _value(f, vals)
                flo, fhi = _interval(f, box)
                if flo < 0 or fhi > n - 1:
                    x = np.clip(x, 0, n - 1)  # out-of-bounds points are masked; keep the gather legal
                idx = idx * n + x
            return idx

        got = [arr[flat(forms, shp)] for arr, forms, shp in zip(operands, system.op_forms, op_shapes)]
        if stmt.combo is None:
            v = got[0]
        elif stmt.combo == "+":
            v = got[0].astype(dtype) + got[1].astype(dtype)  # C converts both operands first
        elif stmt.combo == "*":
            v = got[0].astype(dtype) * got[1].astype(dtype)
        elif stmt.combo == "==":
            v = (got[0] == got[1]).astype(dtype)
        else:  # '?'
            v = np.where(got[0] == got[1], got[2], fill)
        out_idx = flat(system.out_forms, shape)

        full = np.broadcast_shapes(*(np.shape(g) for g in grids)) if grids else ()
        v = np.broadcast_to(np.asarray(v, dtype=dtype), full)
        out_idx = np.broadcast_to(np.asarray(out_idx, dtype=np.int64), full)
        if mask is True:
            v, out_idx = v.reshape(-1), out_idx.reshape(-1)
            sel = None
        else:
            sel = np.broadcast_to(mask, full)
            v, out_idx = v[sel], out_idx[sel]
        if out_idx.size == 0:
            continue

        if agg == "=":
            gid = 0
            for k, g in enumerate(grids):
                gid = gid + (g - lows[k]) * box_strides[k]
            gid = np.broadcast_to(np.asarray(gid, dtype=np.int64), full)
            gid = gid.reshape(-1) if sel is None else gid[sel]
            _check_collisions(system, stmt, lows, sizes, shape, writer, out_idx, gid)
            writer[out_idx] = gid
            acc[out_idx] = v
        else:
            _AT[agg].at(acc, out_idx, v)
        reached[out_idx] = True

    return np.where(reached, acc, base).reshape(shape)


def _check_collisions(system, stmt, lows, sizes, shape, writer, out_idx, gid) -> None:
    def fail(cell: int, g1: int, g2: int):
        where = np.unravel_index(cell, shape) if shape else ()
        cell_text = f"{stmt.output}[{', '.join(str(int(c)) for c in where)}]"
        raise CollisionError(
            f"'=' writes {cell_text} twice: from points {_points_text(system, lows, sizes, g1)} "
            f"and {_points_text(system, lows, sizes, g2)}",
            stmt.loc,
        )

    prev = writer[out_idx]
    hit = np.flatnonzero(prev >= 0)
    if hit.size:
        k = int(hit[0])
        fail(int(out_idx[k]), int(prev[k]), int(gid[k]))
    order = np.argsort(out_idx, kind="stable")
    s = out_idx[order]
    dup = np.flatnonzero(s[1:] == s[:-1])
    if dup.size:
        k = int(dup[0])
        fail(int(s[k]), int(gid[order[k]]), int(gid[order[k + 1]]))


def _chunks(lows: Sequence[int], sizes: Sequence[int]):
    """Yield (sparse grids, per-variable (lo, hi)) covering the box in pieces of <= CHUNK points."""
    n = len(sizes)
    if n == 0:
        yield [], []
        return
    if any(s <= 0 for s in sizes):
        return
    # Axes [split, n) are taken whole; axis split-1 in blocks; earlier axes one value at a time.
    split, inner = n, 1
    while split > 0 and inner * sizes[split - 1] <= CHUNK:
        split -= 1
        inner *= sizes[split]
    if split == 0:
        ranges = [[(0, sizes[a])] for a in range(n)]
    else:
        block = max(1, CHUNK // inner)
        ranges = [[(x, x + 1) for x in range(sizes[a])] for a in range(split - 1)]
        ranges.append([(x, min(x + block, sizes[split - 1])) for x in range(0, sizes[split - 1], block)])
        ranges.extend([(0, sizes[a])] for a in range(split, n))
    for pieces in itertools.product(*ranges):
        grids, box = [], []
        for a, (s, e) in enumerate(pieces):
            g = np.arange(lows[a] + s, lows[a] + e, dtype=np.int64)
            view = [1] * n
            view[a] = e - s
            grids.append(g.reshape(view))
            box.append((lows[a] + s, lows[a] + e - 1))
        yield grids, box


# ---------------------------------------------------------------------------
# Whole programs
# ---------------------------------------------------------------------------


def _collect(program: Program, arrays, named) -> List[np.ndarray]:
    names = program.input_names
    if isinstance(arrays, np.ndarray):
        # list(A) would silently split one array into its rows.
        raise TypeError("evaluate() takes a sequence of arrays; for one input write evaluate(program, [A])")
    arrays = list(arrays or ())
    if named:
        unknown = [k for k in named if k not in names]
        if unknown:
            raise ShapeError(f"unknown input name(s) {', '.join(unknown)}; inputs are ({', '.join(names)})")
        if arrays:
            given = names[: len(arrays)]
            twice = [k for k in named if k in given]
            if twice:
                raise ShapeError(f"input(s) {', '.join(twice)} given both by position and by name")
        for n in names[len(arrays):]:
            if n not in named:
                raise ShapeError(f"missing input {n}; inputs are ({', '.join(names)})")
            arrays.append(named[n])
    return [np.asarray(a) for a in arrays]


def evaluate(program: Program, arrays: Sequence[np.ndarray] = (), **named) -> Dict[str, np.ndarray]:
    """Run ``program`` on numpy arrays; return every tensor (inputs first, then statement targets).

    Inputs are given in header order, positionally and/or by name.

        >>> p = ir.Program((ir.Input("X", ("N",)),), ("Y",), (ir.Assign("Y", Binary("*", Ref("X"), Int(2))),))
        >>> evaluate(p, [np.arange(3)])["Y"]
        array([0, 2, 4])
    """
    with recursion_room():
        return _evaluate(program, arrays, named)


def _evaluate(program: Program, arrays, named) -> Dict[str, np.ndarray]:
    sizes = constants(program, arrays, named)
    arrs = _collect(program, arrays, named)
    bound = sema.bind(program, [a.shape for a in arrs], [a.dtype for a in arrs], sizes)
    program = bound.program
    env: Dict[str, Union[np.ndarray, int, float]] = dict(bound.sizes)  # constants: Python numbers
    env.update(bound.dims)
    out: Dict[str, np.ndarray] = {}
    prng: Dict[str, np.ndarray] = {}
    for inp, a in zip(program.inputs, arrs):
        if inp.name in sizes:
            continue
        env[inp.name] = a
        out[inp.name] = a
    held = 0  # bytes of the results computed so far (all kept until the end)
    with np.errstate(all="ignore"):
        for s in program.body:
            if isinstance(s, DimDef):
                continue
            info = bound.tensors[s.target]
            size = int(np.prod(info.shape, dtype=object)) * info.dtype.itemsize
            # Before allocating (an overcommitted array is killed later, not refused): the result,
            # numpy's temporaries while computing it (counted as two more), and what is already held.
            why = too_large(held + 3 * size)
            if why:
                raise ShapeError(f"{s.target}: {info.dtype}{list(info.shape)} needs {size:,} bytes: too large to "
                                 f"compute here (with room to compute it, {why})", s.loc)
            held += size
            try:
                r = _statement(bound, s, env, prng)
            except (MemoryError, ValueError) as e:
                if isinstance(e, ValueError) and "too big" not in str(e) and "Maximum allowed" not in str(e):
                    raise
                size = int(np.prod(info.shape, dtype=object)) * info.dtype.itemsize
                raise ShapeError(f"{s.target}: {info.dtype}{list(info.shape)} needs {size:,} bytes: too large to "
                                 f"compute here", s.loc) from None
            if r.dtype != info.dtype or r.shape != info.shape:
                raise InternalError(
                    f"reference computed {s.target} as {r.dtype}{r.shape}, sema predicted {info.dtype}{info.shape}"
                )
            env[s.target] = r
            out[s.target] = r
    return out


def _statement(bound, s, env, prng) -> np.ndarray:
    """One statement's value (the oracle's definition of each kind)."""
    if isinstance(s, Contraction):
        return _contraction(bound, s, env)
    if isinstance(s.expr, ir.Call) and s.expr.func in desugar.SPECIAL:
        return _special(bound, s, env, prng)
    info = bound.tensors[s.target]
    r = np.array(sema.eval_elementwise(s.expr, env), copy=True)
    if r.shape != info.shape:
        # A literal-only expression is 0-d: broadcast it to the statement's shape.
        r = np.array(np.broadcast_to(r, info.shape))
    return r


def constants(program: Program, arrays=(), named=None, sized=None) -> Dict[str, Union[int, float]]:
    """Inputs passed as numbers: size inputs (whose integer value binds a dimension) and, like
    PlaidML's ``Integer``/``Real``, Python ``int``/``float`` values for inputs declared without
    dimensions (constants: typed int32 as PlaidML types them, computed with their exact value).

        >>> from polytile.frontends.tile import parse
        >>> constants(parse("function (X[N], S) -> (Y) { Y = X * S; }"), [np.ones(2), 2.5])
        {'S': 2.5}
    """
    named = named or {}
    raw = dict(zip(program.input_names, arrays))
    raw.update({k: v for k, v in named.items() if k in program.input_names})
    if sized is None:  # callers that call often (Kernel) pass the set they computed once
        sized = set(desugar.size_inputs(desugar.normalize(program)))
    out: Dict[str, Union[int, float]] = {}
    for inp in program.inputs:
        if inp.dims or inp.name not in raw:
            continue
        v = raw[inp.name]
        if inp.name in sized:
            out[inp.name] = _size_value(inp.name, v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[inp.name] = v  # PlaidML's Integer / Real: a constant, folded into the kernel
    return out


def _size_value(name: str, a) -> int:
    a = np.asarray(a)
    if a.dtype.kind not in "iu" or a.size != 1:
        raise ShapeError(f"{name} is used as a size: pass one integer, got {a.dtype} of shape {a.shape}")
    return int(a.reshape(-1)[0])


def taus88(state: np.ndarray, count: int) -> Tuple[np.ndarray, np.ndarray]:
    """PlaidML's generator: ``count`` uniform float32 values and the state after them.

    Each of the 2048 lanes ``j`` of a ``uint32[3, 2048]`` state is a combined
    Tausworthe generator (L'Ecuyer's taus88) that makes values ``j``,
    ``j + 2048``, ...; a value is ``float(s1 ^ s2 ^ s3) / 2**32``, as in
    PlaidML's ``prng_step`` kernel.

        >>> st = np.arange(1, 6145, dtype=np.uint32).reshape(3, 2048) * np.uint32(977)
        >>> v, new = taus88(st, 3)
        >>> v.dtype, new.shape, bool(((0 <= v) & (v <= 1)).all())
        (dtype('float32'), (3, 2048), True)
    """
    s = np.array(state, dtype=np.uint32, copy=True)
    lanes = s.shape[1]
    out = np.empty(count, dtype=np.float32)
    s1, s2, s3 = s[0], s[1], s[2]
    for t in range(0, count, lanes):
        n = min(lanes, count - t)
        a, b, c = s1[:n], s2[:n], s3[:n]
        a[:] = ((a & np.uint32(4294967294)) << np.uint32(12)) ^ (((a << np.uint32(13)) ^ a) >> np.uint32(19))
        b[:] = ((b & np.uint32(4294967288)) << np.uint32(4)) ^ (((b << np.uint32(2)) ^ b) >> np.uint32(25))
        c[:] = ((c & np.uint32(4294967280)) << np.uint32(17)) ^ (((c << np.uint32(3)) ^ c) >> np.uint32(11))
        out[t:t + n] = ((a ^ b ^ c).astype(np.float32).astype(np.float64) / 4294967296.0).astype(np.float32)
    return out, s


def _special(bound: sema.Bound, s, env, prng: Dict[str, np.ndarray]) -> np.ndarray:
    """reshape / gather / shape / prng_* with numpy (shapes checked by sema)."""
    e = s.expr
    info = bound.tensors[s.target]
    x = np.asarray(env[e.args[0].name])
    if e.func == "reshape":
        return np.array(x.reshape(info.shape), copy=True)
    if e.func == "gather":
        idx = np.asarray(env[e.args[1].name]).astype(np.int64)
        # Out-of-range indices are clamped (PlaidML clamps; it never reads outside the data).
        return np.array(x[np.clip(idx, 0, x.shape[0] - 1)], copy=True)
    if e.func == "shape":
        return np.array(x.shape, dtype=np.int32).reshape(info.shape)
    if e.func == "prng_step":
        values, state = taus88(x, int(np.prod(bound.prng[s.target], dtype=np.int64)))
        prng[s.target] = values.reshape(bound.prng[s.target])
        return state
    if e.func == "prng_state":
        return np.array(x, copy=True)
    return np.array(prng[e.args[0].name], copy=True)


def run(program: Program, *arrays: np.ndarray, **named: np.ndarray):
    """Run ``program`` and return its outputs: one array, or a tuple for several.

        >>> p = ir.Program((ir.Input("X", ("N",)),), ("Y",), (ir.Assign("Y", Binary("-", Ref("X"), Float(0.5))),))
        >>> run(p, X=np.ones(2, np.float32))
        array([0.5, 0.5], dtype=float32)
    """
    res = evaluate(program, arrays, **named)
    outs = tuple(res[o] for o in program.outputs)
    return outs[0] if len(outs) == 1 else outs
