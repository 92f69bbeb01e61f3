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

from dataclasses import dataclass
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
