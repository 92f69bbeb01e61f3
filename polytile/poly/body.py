"""Statement bodies: a tiny typed expression language shared by every frontend.

A polyhedral statement is an isl domain plus one :class:`Store`.  Frontends
(Tile, later C) lower their statements to these nodes; the access relations
of the Scop are *derived* from the ``Load``/``Store`` index expressions, so
there is one source of truth for what a statement touches, and every code
generator renders the same nodes.

Every node carries the numpy dtype name of its value.  Index expressions are
``int64`` trees over :class:`Iter` and :class:`Const` using ``+ - *`` and
``//`` (floor division by a positive constant); they are affine by
construction, which :func:`affine_text` relies on.

Example: the body of matmul's statement ``S0[i, j, k]`` is::

    Store("C", (Iter("i"), Iter("j")),
          Bin("*", Load("A", (Iter("i"), Iter("k")), "float32"),
                   Load("B", (Iter("k"), Iter("j")), "float32"), "float32"),
          reduce="+")

i.e. ``C[i][j] += A[i][k] * B[k][j]`` with access relations
``{ S0[i, j, k] -> A[i, k] }``, ``{ S0[i, j, k] -> B[k, j] }`` and
``{ S0[i, j, k] -> C[i, j] }``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import FrozenSet, Iterator, Optional, Tuple, Union

INDEX = "int64"


@dataclass(frozen=True)
class Iter:
    """A statement's iteration variable."""

    name: str
    dtype: str = INDEX


@dataclass(frozen=True)
class Const:
    """A literal; ``value`` is a Python int, float or bool."""

    value: Union[int, float, bool]
    dtype: str


@dataclass(frozen=True)
class Load:
    """``array[index...]``."""

    array: str
    index: Tuple["Node", ...]
    dtype: str


@dataclass(frozen=True)
class Bin:
    """Arithmetic ``+ - * / // & | ^ << >>`` in ``dtype`` (operands are converted to it first).

    ``/`` on a float dtype is true division, on integers C's (toward zero, x / 0
    is 0); ``//`` is floor division (indices); shift counts are taken modulo the width.
    """

    op: str
    a: "Node"
    b: "Node"
    dtype: str


@dataclass(frozen=True)
class Cmp:
    """A comparison done in ``operand_dtype``; the value is ``bool``."""

    op: str
    a: "Node"
    b: "Node"
    operand_dtype: str
    dtype: str = "bool"


@dataclass(frozen=True)
class Neg:
    operand: "Node"
    dtype: str


@dataclass(frozen=True)
class Call:
    """A builtin math function (names of :data:`polytile.sema.BUILTINS`)."""

    func: str
    args: Tuple["Node", ...]
    dtype: str


@dataclass(frozen=True)
class Cast:
    operand: "Node"
    dtype: str


@dataclass(frozen=True)
class Select:
    """``cond ? then : else_``."""

    cond: "Node"
    then: "Node"
    else_: "Node"
    dtype: str


@dataclass(frozen=True)
class Clamp:
    """``min(max(operand, lo), hi)`` as an index (a data-dependent one: ``gather``'s row).

    An index holding a Clamp is not affine; its access relation is the may-access
    ``lo <= a <= hi`` (:meth:`polytile.poly.scop.Statement.access_map`).
    """

    operand: "Node"
    lo: int
    hi: int
    dtype: str = "int64"


Node = Union[Iter, Const, Load, Bin, Cmp, Neg, Call, Cast, Select, Clamp]

REDUCE_OPS = ("+", "*", "max", "min")


@dataclass(frozen=True)
class Store:
    """``array[index] = value`` or, with ``reduce``, ``array[index] = array[index] (reduce) value``."""

    array: str
    index: Tuple[Node, ...]
    value: Node
    reduce: Optional[str] = None


def children(n: Node) -> Tuple[Node, ...]:
    if isinstance(n, Load):
        return n.index
    if isinstance(n, (Bin, Cmp)):
        return (n.a, n.b)
    if isinstance(n, (Neg, Cast, Clamp)):
        return (n.operand,)
    if isinstance(n, Call):
        return n.args
    if isinstance(n, Select):
        return (n.cond, n.then, n.else_)
    return ()


def walk(n: Node) -> Iterator[Node]:
    """Every node of the tree, parents first."""
    yield n
    for c in children(n):
        yield from walk(c)


def loads(n: Node) -> Iterator[Load]:
    """Every Load in ``n`` (including loads nested inside indices)."""
    for m in walk(n):
        if isinstance(m, Load):
            yield m


def iter_names(*nodes: Node) -> FrozenSet[str]:
    """The names of the iterators that ``nodes`` read (index expressions, values, loads and what
    their indices read).

    >>> sorted(iter_names(Bin("+", Iter("i"), Const(1, INDEX), INDEX), Iter("k")))
    ['i', 'k']
    """
    return frozenset(x.name for n in nodes for x in walk(n) if isinstance(x, Iter))


def is_affine(e: Node) -> bool:
    """True if ``e`` is an affine (quasi-affine) index: no loads, no clamps."""
    return not any(isinstance(n, (Load, Clamp, Call, Select, Cmp)) for n in walk(e))


def affine_text(e: Node) -> str:
    """isl text of an affine index expression.

    >>> affine_text(Bin("+", Bin("*", Const(2, "int64"), Iter("y"), "int64"), Iter("i"), "int64"))
    '(2*y + i)'
    """
    if isinstance(e, Iter):
        return e.name
    if isinstance(e, Const):
        return str(int(e.value))
    if isinstance(e, Neg):
        return f"(-{affine_text(e.operand)})"
    if isinstance(e, Bin):
        if e.op == "//":
            assert isinstance(e.b, Const) and int(e.b.value) > 0, e
            return f"floor({affine_text(e.a)}/{int(e.b.value)})"
        if e.op == "*":
            # isl wants the constant factor as a coefficient.
            if isinstance(e.a, Const):
                return f"{int(e.a.value)}*{affine_text(e.b)}"
            if isinstance(e.b, Const):
                return f"{int(e.b.value)}*{affine_text(e.a)}"
            raise ValueError(f"non-affine product in index: {e}")
        if e.op in ("+", "-"):
            return f"({affine_text(e.a)} {e.op} {affine_text(e.b)})"
    raise ValueError(f"not an affine index expression: {e}")


def linear(e: Node) -> Optional[dict]:
    """The coefficients of an index expression that is linear in its iterators (``""`` holds the
    constant), or None (a floor division, a load, ...).

    >>> linear(Bin("-", Iter("i"), Bin("*", Const(2, INDEX), Iter("k"), INDEX), INDEX))
    {'i': 1, 'k': -2}
    """
    if isinstance(e, Iter):
        return {e.name: 1}
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return {"": e.value} if e.value else {}
    if isinstance(e, Neg):
        a = linear(e.operand)
        return None if a is None else {v: -c for v, c in a.items()}
    if isinstance(e, Bin) and e.op in ("+", "-", "*"):
        a, b = linear(e.a), linear(e.b)
        if a is None or b is None:
            return None
        if e.op == "*":
            if set(a) <= {""}:
                a, b = b, a
            if not set(b) <= {""}:
                return None
            f = b.get("", 0)
            return {v: c * f for v, c in a.items() if c * f}
        sign = 1 if e.op == "+" else -1
        out = dict(a)
        for v, c in b.items():
            out[v] = out.get(v, 0) + sign * c
        return {v: c for v, c in out.items() if c}
    return None


def from_linear(coeffs: dict, order: Tuple[str, ...] = ()) -> Node:
    """The index expression of ``coeffs`` (as :func:`linear` gives them), terms in ``order`` first.

    >>> affine_text(from_linear({"i": 1, "k": -1, "": 2}))
    '((i - k) + 2)'
    """
    node: Optional[Node] = None
    names = [v for v in order if v in coeffs] + sorted(v for v in coeffs if v and v not in order)
    for v in names + [""]:
        c = coeffs.get(v, 0)
        if c == 0:
            continue
        term: Node = Const(abs(c), INDEX) if v == "" else Iter(v) if abs(c) == 1 else Bin("*", Const(abs(c), INDEX), Iter(v), INDEX)
        if node is None:
            node = term if c > 0 else (Const(c, INDEX) if v == "" else Neg(term, INDEX))
        else:
            node = Bin("+" if c > 0 else "-", node, term, INDEX)
    return Const(0, INDEX) if node is None else node


def substitute(n: Node, sub: dict) -> Node:
    """``n`` with iterators replaced by linear expressions (``{name: coeffs}``, coefficients as
    :func:`linear` gives them); linear index expressions come out in their simplest form.

    >>> affine_text(substitute(Bin("-", Iter("i"), Iter("k"), INDEX), {"k": {"i": 1, "k": -1}}))
    'k'
    """
    lin = linear(n) if n.dtype == INDEX else None
    if lin is not None and not isinstance(n, Const):
        out: dict = {}
        for v, c in lin.items():
            for w, d in (sub.get(v, {v: 1}) if v else {"": 1}).items():
                out[w] = out.get(w, 0) + c * d
        return from_linear({v: c for v, c in out.items() if c})
    if isinstance(n, Iter):
        return from_linear(sub[n.name]) if n.name in sub else n
    kids = children(n)
    if not kids:
        return n
    new = tuple(substitute(c, sub) for c in kids)
    if isinstance(n, Load):
        return Load(n.array, new, n.dtype)
    if isinstance(n, (Bin, Cmp)):
        return replace(n, a=new[0], b=new[1])
    if isinstance(n, Select):
        return Select(new[0], new[1], new[2], n.dtype)
    if isinstance(n, Call):
        return Call(n.func, new, n.dtype)
    return replace(n, operand=new[0])
