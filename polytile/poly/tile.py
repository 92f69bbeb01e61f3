"""Lower a bound Tile program (:class:`polytile.sema.Bound`) to a :class:`Scop`.

Shapes are concrete, so every dimension name becomes a number and kernels
are shape-specialised.  Each Tile statement becomes one or more polyhedral
statements (``k`` is the statement's position in the program):

* contraction ``O[p : S] = agg(A[q] comb B[r]), c < E`` with variables ``x``:

  - ``Zk[o]``  over every cell of ``O``:   ``O[o] = 0``  (or ``= D[o]`` for ``default D``)
  - ``Rk[o]``  over the *reached* cells, ``{ Sk[x] -> O[p(x)] }(dom Sk)``:
    ``O[o] = identity(agg)`` (omitted where the identity is already there)
  - ``Sk[x] : 0 <= p(x) < S and 0 <= q(x) < dim A and ... and 0 <= c(x) < E
    and (e) mod m = 0`` for every exact division ``e / m`` in an index:
    ``O[p(x)] agg= A[q(x)] comb B[r(x)]``

* elementwise ``Y = f(...)`` of broadcast shape ``s``:
  ``Ek[i] : 0 <= i < s``: ``Y[i] = f(operands indexed with numpy broadcasting)``.

Static checks done here with isl: a variable without a finite range, and
``=`` contractions whose write relation is not injective (two colliding
iteration points are reported).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import islpy as isl
import numpy as np

from .. import desugar, elemwise, ir, sema
from .. import dtypes as D
from ..errors import CollisionError, InternalError, NonAffineError, TileSemanticError
from ..names import NameTable
from . import body as B
from . import scan
from .scop import Array, Scop, Statement

_REDUCE = {"+": "+", "*": "*", ">": "max", "<": "min", "=": None}


def lower(bound: "sema.Bound") -> Scop:
    """Build the Scop of a bound program.

    >>> # function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }
    >>> # with M=2, K=3, N=4 becomes
    >>> #   Z0[i, j] : 0 <= i < 2 and 0 <= j < 4               C[i][j] = 0
    >>> #   S0[i, j, k] : 0 <= i < 2 and 0 <= j < 4 and 0 <= k < 3   C[i][j] += A[i][k] * B[k][j]
    """
    return _Lowering(bound).run()


class _Lowering:
    def __init__(self, bound):
        self.bound = bound
        self.prog: ir.Program = bound.program
        self.names = NameTable()
        self.arrays: Dict[str, Array] = {}
        for name, info in bound.tensors.items():
            self.arrays[name] = Array(self.names.claim(name), name, tuple(info.shape), np.dtype(info.dtype).name, info.kind)
        self.statements: List[Statement] = []

    def run(self) -> Scop:
        for k, stmt in enumerate(self.prog.body):
            if isinstance(stmt, ir.Contraction):
                self._contraction(k, stmt)
            elif isinstance(stmt, ir.Assign):
                self._elementwise(k, stmt)
        return Scop.build(_kernel_name(self.prog), self.statements, list(self.arrays.values()))

    # -- helpers ----------------------------------------------------------
    def _arr(self, name: str) -> Array:
        return self.arrays[name]

    def _iters(self, names) -> Dict[str, str]:
        table = NameTable(a.name for a in self.arrays.values())
        return {n: table.claim(n) for n in names}

    def _const(self, e: ir.Expr) -> Optional[int]:
        """The value of an index-free integer expression (floor division), else None."""
        if any(isinstance(n, ir.Index) for n in ir.walk(e)):
            return None
        return int(self.bound.size(e))

    def _index(self, e: ir.Expr, it: Dict[str, str], divs: List[Tuple[B.Node, int]]) -> B.Node:
        """Lower an index polynomial; record exact divisions in ``divs``."""
        c = self._const(e)
        if c is not None:
            return B.Const(c, B.INDEX)
        if isinstance(e, ir.Index):
            return B.Iter(it[e.name])
        if isinstance(e, ir.Unary) and e.op == "-":
            return B.Neg(self._index(e.operand, it, divs), B.INDEX)
        # PlaidML's op library writes 1*x + 1*k - Pad with Pad = 0: the identities go here, so the code
        # generators' patterns (a column index j + c, a unit stride) see x + k, as a user would write it.
        if isinstance(e, ir.Binary) and e.op in ("+", "-"):
            if self._const(e.rhs) == 0:
                return self._index(e.lhs, it, divs)
            if e.op == "+" and self._const(e.lhs) == 0:
                return self._index(e.rhs, it, divs)
            return B.Bin(e.op, self._index(e.lhs, it, divs), self._index(e.rhs, it, divs), B.INDEX)
        if isinstance(e, ir.Binary) and e.op == "*":
            lc, rc = self._const(e.lhs), self._const(e.rhs)
            if lc == 1 or rc == 1:
                return self._index(e.rhs if lc == 1 else e.lhs, it, divs)
            if lc is not None:
                return B.Bin("*", B.Const(lc, B.INDEX), self._index(e.rhs, it, divs), B.INDEX)
            if rc is not None:
                return B.Bin("*", B.Const(rc, B.INDEX), self._index(e.lhs, it, divs), B.INDEX)
        if isinstance(e, ir.Binary) and e.op == "/":
            d = self._const(e.rhs)
            if d is not None:
                if d == 0:
                    raise TileSemanticError(f"division by zero in index '{ir.format_expr(e)}'", e.loc)
                num = self._index(e.lhs, it, divs)
                divs.append((num, abs(d)))
                q = B.Bin("//", num, B.Const(abs(d), B.INDEX), B.INDEX)
                return q if d > 0 else B.Neg(q, B.INDEX)
        raise NonAffineError(f"index expression '{ir.format_expr(e)}' is not affine in the index variables", getattr(e, "loc", None))

    # -- contractions -----------------------------------------------------
    def _contraction(self, k: int, st: ir.Contraction) -> None:
        it = self._iters(st.index_vars())
        out = self._arr(st.output)
        divs: List[Tuple[B.Node, int]] = []
        cons: List[str] = []

        def bounded(node: B.Node, size: int) -> None:
            cons.append(f"0 <= {B.affine_text(node)} <= {size - 1}")

        out_idx = tuple(self._index(e, it, divs) for e in st.indices)
        for node, size in zip(out_idx, out.shape):
            bounded(node, size)
        loads = []
        for acc in st.operands:
            arr = self._arr(acc.tensor)
            idx = tuple(self._index(e, it, divs) for e in acc.indices)
            if len(idx) != len(arr.shape):
                raise TileSemanticError(
                    f"{acc.tensor} has rank {len(arr.shape)} but is indexed with {len(idx)} indices", acc.loc)
            for node, size in zip(idx, arr.shape):
                bounded(node, size)
            loads.append(B.Load(arr.name, idx, arr.dtype))
        for c in st.constraints:
            node = self._index(c.expr, it, divs)
            limit = self._const(c.bound)
            if limit is None:
                raise TileSemanticError(f"constraint bound '{ir.format_expr(c.bound)}' must not use index variables", c.loc)
            bounded(node, limit)
        for num, d in divs:
            cons.append(f"({B.affine_text(num)}) mod {d} = 0")

        iters = tuple(it.values())
        sname = f"S{k}"
        text = f"{{ {sname}[{', '.join(iters)}] : {' and '.join(cons) or 'true'} }}"
        domain = isl.Set(text)
        self._check_bounded(domain, st, it)

        dtype = np.dtype(sema.contraction_dtype(self.bound, st)).name
        value = self._combine(st, loads, dtype)
        contract = Statement(sname, iters, domain, B.Store(out.name, out_idx, value, _REDUCE[st.agg]),
                             "contract", st.output, ir.format_stmt(st), st.loc)
        if st.agg == "=":
            self._check_injective(contract, st, it)

        # Output initialisation: every cell to 0 / the default, reached cells to the identity.
        # The fill is left out when the contraction reaches every cell and sets each before use (an
        # assignment, or a reset to the identity): a transpose wrote its output twice.
        cells = tuple(f"o{d}" for d in range(len(out.shape)))
        cell_nodes = tuple(B.Iter(c) for c in cells)
        full = " and ".join(f"0 <= {c} < {n}" for c, n in zip(cells, out.shape)) or "true"
        reached = contract.write_map().range().set_tuple_name(f"R{k}")
        ident = sema.identity(st.agg, np.dtype(out.dtype)) if st.agg != "=" else None
        reset = ident is not None and not (ident == 0 and st.default is None)
        sets_first = (st.agg == "=" or reset) and reached.is_equal(isl.Set(f"{{ R{k}[{', '.join(cells)}] : {full} }}"))
        if st.default is not None:
            dflt = self._arr(st.default)
            fill_value: B.Node = _cast(B.Load(dflt.name, cell_nodes, dflt.dtype), out.dtype)
        else:
            fill_value = B.Const(0, out.dtype)
        if not sets_first:
            self.statements.append(Statement(
                f"Z{k}", cells, isl.Set(f"{{ Z{k}[{', '.join(cells)}] : {full} }}"),
                B.Store(out.name, cell_nodes, fill_value), "fill", st.output,
                f"{st.output} = {'default ' + st.default if st.default else '0'}", st.loc))
        if reset:
            self.statements.append(Statement(
                f"R{k}", cells, reached, B.Store(out.name, cell_nodes, B.Const(_py(ident), out.dtype)),
                "reset", st.output, f"{st.output} = identity of {st.agg} on reached cells", st.loc))
        # A prefix sum (cumsum's triangle) as a recurrence: each cell from the previous one (poly.scan).
        self.statements.extend(scan.carry(contract, out.dtype, st.default is not None) or [contract])

    def _combine(self, st: ir.Contraction, loads: List[B.Load], dtype: str) -> B.Node:
        if st.combo is None:
            return _cast(loads[0], dtype)
        if st.combo in ("+", "*"):
            return B.Bin(st.combo, loads[0], loads[1], dtype)
        cmp_dtype = np.result_type(np.dtype(loads[0].dtype), np.dtype(loads[1].dtype)).name
        eq = B.Cmp("==", loads[0], loads[1], cmp_dtype)
        if st.combo == "==":
            return B.Cast(eq, dtype)
        # '?': C where A == B, else the aggregation's identity (0 for '=').
        ident = sema.identity(st.agg, np.dtype(dtype)) if st.agg != "=" else 0
        return B.Select(eq, _cast(loads[2], dtype), B.Const(_py(ident), dtype), dtype)

    def _check_bounded(self, domain: isl.Set, st: ir.Contraction, it: Dict[str, str]) -> None:
        if domain.is_empty() or domain.is_bounded():
            return
        for d, (user, _) in enumerate(it.items()):
            proj = domain.project_out(isl.dim_type.set, d + 1, domain.dim(isl.dim_type.set) - d - 1) \
                         .project_out(isl.dim_type.set, 0, d)
            if not proj.is_bounded():
                raise TileSemanticError(f"index variable '{user}' has no finite range: bound it by an index or a constraint", st.loc)
        raise TileSemanticError("the iteration domain is unbounded", st.loc)

    def _check_injective(self, contract: Statement, st: ir.Contraction, it: Dict[str, str]) -> None:
        """``=`` needs ``{ S[x] -> O[p(x)] }`` injective; else name two colliding points."""
        w = contract.write_map()
        if w.is_injective():
            return
        same_cell = w.apply_range(w.reverse())
        ident = isl.Map.identity(same_cell.get_space()).intersect_domain(contract.domain)
        pairs = same_cell.subtract(ident)
        pt = pairs.wrap().sample_point()
        n = len(it)
        users = list(it)
        a = [int(pt.get_coordinate_val(isl.dim_type.set, d).to_python()) for d in range(n)]
        b = [int(pt.get_coordinate_val(isl.dim_type.set, n + d).to_python()) for d in range(n)]
        cell_map = {u: v for u, v in zip(users, a)}
        cell = [int(_eval_index(e, cell_map, self.bound)) for e in st.indices]
        fmt = lambda vals: "(" + ", ".join(f"{u}={v}" for u, v in zip(users, vals)) + ")"
        raise CollisionError(
            f"'=' contraction writes {st.output}[{', '.join(map(str, cell))}] twice: "
            f"at {fmt(a)} and at {fmt(b)}; '=' needs every output cell written at most once", st.loc)

    # -- elementwise ------------------------------------------------------
    def _elementwise(self, k: int, st: ir.Assign) -> None:
        out = self._arr(st.target)
        shape = out.shape
        cells = tuple(f"i{d}" for d in range(len(shape)))
        if isinstance(st.expr, ir.Call) and st.expr.func in desugar.SPECIAL:
            from .special import lower_special

            self.statements.extend(lower_special(self, k, st, cells))
            return
        value = elemwise.walk(st.expr, _NodeOps(self, shape, cells), {**self.bound.sizes, **self.bound.dims})
        if isinstance(value, elemwise.Lit):
            value = B.Const(_wrap(value.value, out.dtype), out.dtype)
        self.statements.append(self.cell_statement(f"E{k}", out, cells, _cast(value, out.dtype), st))

    def cell_statement(self, name: str, out: Array, cells, value: B.Node, st, kind: str = "elementwise",
                       index=None) -> Statement:
        """``name[cells] : 0 <= cells < out.shape``: ``out[index or cells] = value``."""
        dom = " and ".join(f"0 <= {c} < {n}" for c, n in zip(cells, out.shape)) or "true"
        idx = index if index is not None else tuple(B.Iter(c) for c in cells)
        return Statement(name, cells, isl.Set(f"{{ {name}[{', '.join(cells)}] : {dom} }}"),
                         B.Store(out.name, idx, value), kind, st.target, ir.format_stmt(st), st.loc)

    def bcast(self, shape: Tuple[int, ...], out_shape: Tuple[int, ...], cells) -> Tuple[B.Node, ...]:
        """Index of an operand of ``shape`` in a statement over ``cells`` (numpy broadcasting)."""
        r, q = len(out_shape), len(shape)
        if q > r:
            raise InternalError("operand rank exceeds broadcast rank")
        return tuple(B.Const(0, B.INDEX) if shape[d] == 1 else B.Iter(cells[r - q + d]) for d in range(q))


class _NodeOps(elemwise.Ops):
    """Builds statement-body nodes with :func:`polytile.elemwise.walk`: the oracle's types, exactly."""

    def __init__(self, low: _Lowering, shape: Tuple[int, ...], cells: Tuple[str, ...]):
        self.low = low
        self.shape = shape
        self.cells = cells

    def dtype(self, v) -> str:
        return v.dtype

    def tensor(self, name: str):
        arr = self.low.arrays.get(name)
        if arr is None:
            raise InternalError(f"unknown name {name} after semantic checks")
        return B.Load(arr.name, self.low.bcast(arr.shape, self.shape, self.cells), arr.dtype)

    def const(self, value, dtype: str):
        return B.Const(_wrap(value, dtype), dtype)

    def cast(self, v, dtype: str):
        return B.Cast(v, dtype)

    def unary(self, op: str, v, dtype: str):
        if op == "-":
            return B.Neg(v, dtype)
        ones = True if dtype == "bool" else (-1 if not D.is_unsigned(dtype) else (1 << D.width(dtype)) - 1)
        return B.Bin("^", v, B.Const(ones, dtype), dtype)

    def binary(self, op: str, a, b, dtype: str):
        return B.Bin(op, a, b, dtype)

    def compare(self, op: str, a, b, dtype: str):
        return B.Cmp(op, a, b, dtype)

    def select(self, c, t, e, dtype: str):
        return B.Select(c, t, e, dtype)

    def call(self, name: str, args, dtype: str):
        return B.Call(name, tuple(args), dtype)

    def index(self, tensor: str, axis: int):
        arr = self.low.arrays[tensor]
        r, q = len(self.shape), len(arr.shape)
        node = B.Const(0, B.INDEX) if arr.shape[axis] == 1 else B.Iter(self.cells[r - q + axis])
        return B.Cast(node, "int32")


def _wrap(value, dtype: str):
    """A constant in ``dtype``'s range, converted as C converts (what the oracle holds too)."""
    return elemwise.NumpyOps({}).const(value, dtype).item()


def _cast(node: B.Node, dtype: str) -> B.Node:
    return node if node.dtype == dtype else B.Cast(node, dtype)


def _py(v):
    if isinstance(v, np.generic):
        return v.item()
    return v


def _eval_index(e: ir.Expr, env: Dict[str, int], bound) -> int:
    """Evaluate an index polynomial at a point (exact divisions hold there)."""
    if isinstance(e, ir.Index):
        return env[e.name]
    if not any(isinstance(n, ir.Index) for n in ir.walk(e)):
        return int(bound.size(e))
    if isinstance(e, ir.Unary):
        return -_eval_index(e.operand, env, bound)
    a = _eval_index(e.lhs, env, bound)
    b = _eval_index(e.rhs, env, bound)
    return {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else 0}[e.op]


def _kernel_name(prog: ir.Program) -> str:
    import os
    import re

    name = prog.name if prog.name and not prog.name.startswith("<") else "kernel"
    base = os.path.splitext(os.path.basename(name))[0]
    base = re.sub(r"[^A-Za-z0-9_]", "_", base) or "kernel"
    return base if base[0].isalpha() else "k_" + base
