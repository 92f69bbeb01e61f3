"""Polyhedral statements for PlaidML's statement-level builtins.

Each is written as ordinary statements over isl domains, so dependences,
scheduling and every code generator treat them like any other statement:

* ``O = reshape(X, d...)``: ``E[o] : 0 <= o < d``:
  ``O[o] = X[unflatten(flatten(o))]``, a quasi-affine access
  (``x_k = floor(L / s_k) mod n_k``);
* ``O = gather(V, I)``: ``O[i, r] = V[clamp(I[i], 0, n - 1), r]``; the read of
  ``V`` is data-dependent, modelled as a may-read of ``V``'s whole first axis;
* ``O = shape(X)``: ``O[c] = (c == 0 ? n_0 : c == 1 ? n_1 : ...)``;
* ``T = prng_step(S, d...)``: PlaidML's taus88 generator (see
  :func:`polytile.reference.taus88`), with the state of every step expanded
  into its own cells so that program order needs no in-place update:
  ``TS[0] = S``; ``TS[t + 1][c][j] = step_c(TS[t][c][j])`` for
  ``2048 t + j < N``; ``VAL[2048 t + j] = float(TS[t+1][0][j] ^ TS[t+1][1][j]
  ^ TS[t+1][2][j]) / 2**32``; ``T[c][j] = TS[floor((N + 2047 - j) / 2048)][c][j]``
  (the last state lane ``j`` reached).  ``prng_value(T)`` reads ``VAL`` with
  the values' shape and ``prng_state(T)`` copies ``T``.
"""
from __future__ import annotations

from typing import List, Tuple

import islpy as isl

from .. import ir
from ..errors import InternalError
from . import body as B
from .scop import Array, Statement

LANES = 2048
U32 = "uint32"
# (mask, shift a, shift b, shift c) of the three Tausworthe components:
# s = ((s & mask) << a) ^ (((s << b) ^ s) >> c)
_TAUS = ((4294967294, 12, 13, 19), (4294967288, 4, 2, 25), (4294967280, 17, 3, 11))


def _c(v: int) -> B.Const:
    return B.Const(int(v), B.INDEX)


def _add(a: B.Node, b: B.Node) -> B.Node:
    return B.Bin("+", a, b, B.INDEX)


def _mul(c: int, a: B.Node) -> B.Node:
    return B.Bin("*", _c(c), a, B.INDEX)


def _floordiv(a: B.Node, d: int) -> B.Node:
    return a if d == 1 else B.Bin("//", a, _c(d), B.INDEX)


def flatten(cells, shape) -> B.Node:
    """Row-major offset of ``cells`` in ``shape``."""
    node: B.Node = _c(0)
    stride = 1
    for c, n in reversed(list(zip(cells, shape))):
        if n != 1:
            term = B.Iter(c) if stride == 1 else _mul(stride, B.Iter(c))
            node = term if isinstance(node, B.Const) and node.value == 0 else _add(term, node)
        stride *= n
    return node


def unflatten(offset: B.Node, shape) -> Tuple[B.Node, ...]:
    """The index in ``shape`` of row-major ``offset`` (quasi-affine: floors of constants)."""
    out = []
    stride = 1
    strides = []
    for n in reversed(shape):
        strides.append(stride)
        stride *= n
    strides.reverse()
    for d, (n, s) in enumerate(zip(shape, strides)):
        if n == 1:
            out.append(_c(0))
            continue
        q = _floordiv(offset, s)
        if d > 0:  # the outermost index needs no modulo: offset < total size
            q = B.Bin("-", q, _mul(n, _floordiv(q, n)), B.INDEX)
        out.append(q)
    return tuple(out)


def lower_special(low, k: int, st: ir.Assign, cells) -> List[Statement]:
    """Statements for ``st`` (a special call, see the module doc)."""
    e = st.expr
    out = low.arrays[st.target]
    src = low.arrays[e.args[0].name]
    if e.func in ("reshape", "prng_value"):
        if e.func == "prng_value":
            src = low.arrays[_values_name(low, e.args[0].name)]
        idx = tuple(B.Iter(c) for c in cells)
        if tuple(src.shape) != tuple(out.shape):
            idx = unflatten(flatten(cells, out.shape), src.shape)
        return [low.cell_statement(f"E{k}", out, cells, B.Load(src.name, idx, src.dtype), st)]
    if e.func == "prng_state":
        return [low.cell_statement(f"E{k}", out, cells, B.Load(src.name, tuple(B.Iter(c) for c in cells), U32), st)]
    if e.func == "gather":
        idx_arr = low.arrays[e.args[1].name]
        q = len(idx_arr.shape)
        row = B.Cast(B.Load(idx_arr.name, tuple(B.Iter(c) for c in cells[:q]), idx_arr.dtype), B.INDEX)
        index = (B.Clamp(row, 0, max(src.shape[0] - 1, 0)),) + tuple(B.Iter(c) for c in cells[q:])
        return [low.cell_statement(f"E{k}", out, cells, B.Load(src.name, index, src.dtype), st)]
    if e.func == "shape":
        value: B.Node = B.Const(0, "int32")
        for d in reversed(range(len(src.shape))):
            hit = B.Cmp("==", B.Iter(cells[0]), _c(d), B.INDEX)
            value = B.Select(hit, B.Const(int(src.shape[d]), "int32"), value, "int32")
        return [low.cell_statement(f"E{k}", out, cells, value, st)]
    if e.func == "prng_step":
        return _prng(low, k, st, out, src)
    raise InternalError(f"no lowering for {e.func}")


def _values_name(low, step: str) -> str:
    return f"{step}$values"


def _prng(low, k: int, st: ir.Assign, out: Array, src: Array) -> List[Statement]:
    count = 1
    for n in low.bound.prng[st.target]:
        count *= n
    steps = -(-count // LANES)
    ts = Array(low.names.claim(f"{st.target}_steps"), f"{st.target}$steps", (steps + 1, 3, LANES), U32, "temp")
    val = Array(low.names.claim(f"{st.target}_values"), _values_name(low, st.target), (count,), "float32", "temp")
    low.arrays[ts.source_name] = ts
    low.arrays[val.source_name] = val
    c, j, t = B.Iter("c"), B.Iter("j"), B.Iter("t")
    text = ir.format_stmt(st)

    def stmt(name, iters, dom, store, what):
        return Statement(name, iters, isl.Set(f"{{ {name}[{', '.join(iters)}] : {dom} }}"), store,
                         "elementwise", st.target, f"{text}  ({what})", st.loc)

    lanes = f"0 <= j < {LANES}"
    stepping = f"{lanes} and t >= 0 and {LANES}*t + j < {count}"
    out_stmts = [stmt(f"P{k}i", ("c", "j"), f"0 <= c < 3 and {lanes}",
                      B.Store(ts.name, (_c(0), c, j), B.Load(src.name, (c, j), U32)), "initial state")]
    nxt = _add(t, _c(1))
    for comp, (mask, a, b, sh) in enumerate(_TAUS):
        s = B.Load(ts.name, (t, _c(comp), j), U32)
        u = lambda v: B.Const(v, U32)  # noqa: E731
        left = B.Bin("<<", B.Bin("&", s, u(mask), U32), u(a), U32)
        right = B.Bin(">>", B.Bin("^", B.Bin("<<", s, u(b), U32), s, U32), u(sh), U32)
        out_stmts.append(stmt(f"P{k}s{comp}", ("t", "j"), stepping,
                              B.Store(ts.name, (nxt, _c(comp), j), B.Bin("^", left, right, U32)),
                              f"Tausworthe component {comp}"))
    x = B.Load(ts.name, (nxt, _c(0), j), U32)
    for comp in (1, 2):
        x = B.Bin("^", x, B.Load(ts.name, (nxt, _c(comp), j), U32), U32)
    value = B.Bin("/", B.Cast(B.Cast(x, "float32"), "float64"), B.Const(4294967296.0, "float64"), "float64")
    out_stmts.append(stmt(f"P{k}v", ("t", "j"), stepping,
                          B.Store(val.name, (_add(_mul(LANES, t), j),), B.Cast(value, "float32")), "values"))
    last = _floordiv(_add(_c(count + LANES - 1), B.Neg(j, B.INDEX)), LANES)
    out_stmts.append(stmt(f"P{k}o", ("c", "j"), f"0 <= c < 3 and {lanes}",
                          B.Store(out.name, (c, j), B.Load(ts.name, (last, c, j), U32)), "final state"))
    return out_stmts
